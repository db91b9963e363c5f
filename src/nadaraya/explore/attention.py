"""The Attention tab: a sentence through all-MiniLM-L6-v2, one head's map as NW weights.

The sentence runs once through the original model (:func:`nadaraya.nn.minilm.run`);
the chosen layer's hidden states are projected by the chosen head's query and
key weights, and the map is ``nadaraya.weights(q, k, kernel)`` with the kernel
of the selector on those same projections (``softmax`` gives the model's own
attention; ``rbf`` and ``laplacian`` the radial kernels at the head's scale).
A click on a row of the map (a query token) draws its weights over the tokens.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import nadaraya
from nadaraya.kernels import get_attention_kernel

from .._errors import NadarayaError
from ._common import figure, message, require_panel

__all__ = ["ATTENTION_KERNELS", "AttentionTab", "head_map"]

#: Kernels offered on the head's projections.
ATTENTION_KERNELS = ("softmax", "rbf", "laplacian")
SENTENCE = "The cat sat on the mat because it was warm."


def head_map(block: Any, hidden: Any, head: int, kernel: str) -> np.ndarray:
    """Weights of one head with ``kernel`` on the head's own projected tokens.

    Parameters
    ----------
    block : BertSelfAttention
        One of :func:`nadaraya.nn.minilm.attention_modules`.
    hidden : torch.Tensor of shape (tokens, hidden)
        The layer's input hidden states.
    head : int
    kernel : {"softmax", "rbf", "laplacian"}

    Returns
    -------
    ndarray of shape (tokens, tokens)
        Row i: the weights of query token i over the key tokens (rows sum to 1).
    """
    import torch

    d = block.attention_head_size
    cols = slice(head * d, (head + 1) * d)
    with torch.no_grad():
        q = hidden @ block.query.weight[cols].T + block.query.bias[cols]
        k = hidden @ block.key.weight[cols].T + block.key.bias[cols]
        w = nadaraya.weights(q, k, get_attention_kernel(kernel, scale=1 / math.sqrt(d)))
    return np.asarray(w, dtype=float)


class AttentionTab:
    """Widgets, plots and callbacks of the Attention tab.

    The model loads on the first :meth:`compute` (transformers is imported then).

    Attributes
    ----------
    tokens : list of str
    map : ndarray of shape (tokens, tokens)
        The current head's weights.
    token : int or None
        The clicked query token; ``token_weights`` its row of ``map``.
    sources : dict of str to ColumnDataSource
        ``map`` (one rectangle per cell) and ``row`` (named ``attention-<key>``).

    Examples
    --------
    >>> tab = AttentionTab()                                 # doctest: +SKIP
    >>> tab.kernel.value = "rbf"; tab.select_token(2)        # doctest: +SKIP
    """

    def __init__(self, sentence: str = SENTENCE) -> None:
        pn = require_panel()
        from bokeh.events import Tap
        from bokeh.models import ColumnDataSource, LinearColorMapper

        self._model: Any = None
        self.tokens: list[str] = []
        self.map = np.zeros((0, 0))
        self.token: int | None = None
        self.token_weights = np.zeros(0)
        self.sources = {"map": ColumnDataSource({"key": [], "query": [], "w": []},
                                                name="attention-map"),
                        "row": ColumnDataSource({"key": [], "w": []}, name="attention-row")}
        self.sentence = pn.widgets.TextInput(name="Sentence", value=sentence)
        self.layer = pn.widgets.IntSlider(name="Layer", start=0, end=5, value=0)
        self.head = pn.widgets.IntSlider(name="Head", start=0, end=11, value=0)
        self.kernel = pn.widgets.RadioButtonGroup(name="Kernel", options=list(ATTENTION_KERNELS),
                                                  value="softmax")
        self.status = pn.pane.Markdown("", name="attention-status")
        self.heatmap = figure("Weights: row = query token, column = key token (click a row)",
                              height=460, css_classes=["attention-map"])
        self.colors = LinearColorMapper(palette="Viridis256", low=0.0, high=1.0)
        self.heatmap.rect("key", "query", 1, 1, source=self.sources["map"], line_color=None,
                          fill_color={"field": "w", "transform": self.colors},
                          nonselection_fill_alpha=1.0, selection_fill_alpha=1.0)
        self.heatmap.y_range.flipped = True
        self.row_plot = figure("Weights of the clicked token over the tokens", height=220)
        self.row_plot.vbar("key", top="w", width=0.8, source=self.sources["row"],
                           color="#2ca02c", nonselection_alpha=1.0)
        self.heatmap.on_event(Tap, lambda event: self.select_token(
            None if event.y is None else round(event.y)))
        self.sentence.param.watch(lambda e: self.compute(), "value")
        for widget in (self.layer, self.head, self.kernel):
            widget.param.watch(lambda e: self.redraw(), "value")
        self.panel = pn.Row(
            pn.Column(self.sentence, self.layer, self.head, self.kernel, self.status, width=300),
            pn.Column(self.heatmap, self.row_plot, sizing_mode="stretch_width"),
            name="Attention", sizing_mode="stretch_width")

    def compute(self) -> None:
        """Run the sentence through the model, then :meth:`redraw`."""
        from nadaraya.nn import minilm

        text = self.sentence.value.strip()
        if not text:
            self.status.object = "**Type a sentence.**"
            return
        try:
            if self._model is None:
                model, tokenizer = minilm.load()
                self._model = (model, tokenizer, minilm.attention_modules(model))
            model, tokenizer, _ = self._model
            limit = int(model.config.max_position_embeddings)
            if len(tokenizer(text)["input_ids"]) > limit:
                raise NadarayaError(f"the sentence has more than {limit} tokens, the model's "
                                    "positions; shorten it.")
            hidden, self.attentions, enc = minilm.run(model, tokenizer, [text])
        except NadarayaError as exc:
            self.status.object = f"**{message(exc)}**"
            return
        self.hidden = hidden
        self.tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
        labels = {i: t for i, t in enumerate(self.tokens)}
        for axis in (*self.heatmap.xaxis, *self.heatmap.yaxis, *self.row_plot.xaxis):
            axis.ticker = list(range(len(self.tokens)))
            axis.major_label_overrides = labels
        self.heatmap.xaxis.major_label_orientation = 1.0
        self.token = None
        self.redraw()

    def redraw(self) -> None:
        """Draw the map of the selected layer, head and kernel (and the clicked row)."""
        if not self.tokens:
            self.compute()
            return
        _, _, blocks = self._model
        layer, head = int(self.layer.value), int(self.head.value)
        self.map = head_map(blocks[layer], self.hidden[layer][0], head, self.kernel.value)
        n = len(self.tokens)
        keys, queries = np.meshgrid(np.arange(n), np.arange(n))
        self.sources["map"].data = {"key": keys.ravel(), "query": queries.ravel(),
                                    "w": self.map.ravel()}
        self.colors.high = float(self.map.max())
        self.status.object = (f"{n} tokens; layer {layer}, head {head}, kernel "
                              f"{self.kernel.value}.")
        self.select_token(self.token)

    def select_token(self, index: int | None) -> None:
        """Draw the weights of query token ``index`` over the tokens."""
        if index is None or not 0 <= index < len(self.tokens):
            self.sources["row"].data = {"key": [], "w": []}
            self.token_weights = np.zeros(0)
            return
        self.token = int(index)
        self.token_weights = self.map[self.token]
        self.sources["row"].data = {"key": np.arange(len(self.tokens)), "w": self.token_weights}
        self.row_plot.title.text = f"Weights of {self.tokens[self.token]!r} over the tokens"
