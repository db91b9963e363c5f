"""The Scale tab: a generated data set of a chosen size, the engine chosen, why, and the time."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

import nadaraya

from .._errors import NadarayaError
from ._common import require_panel

__all__ = ["SIZES", "ScaleTab", "generate"]

#: Sizes offered (training points; the fit is drawn at as many queries, at most 1e4).
SIZES = (1_000, 10_000, 100_000, 1_000_000)
KERNELS = ("gaussian", "laplacian", "epanechnikov")


def generate(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points ``y = sin(x) + noise`` with x uniform on [0, 10], shapes (n, 1) and (n,).

    Examples
    --------
    >>> x, y = generate(5)
    >>> x.shape, y.shape
    ((5, 1), (5,))
    """
    if not isinstance(n, int | np.integer) or n < 1:
        raise NadarayaError(f"n must be a positive integer; got {n!r}.")
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 10.0, (int(n), 1))
    return x, np.sin(x[:, 0]) + rng.normal(0.0, 0.3, int(n))


class ScaleTab:
    """Widgets and callback of the Scale tab.

    Attributes
    ----------
    explanation : nadaraya.engine.Explanation or None
        ``nadaraya.explain`` of the last run; ``seconds`` its time in ``nadaraya.smooth``.

    Examples
    --------
    >>> tab = ScaleTab(); tab.run()                          # doctest: +SKIP
    >>> tab.explanation.engine                               # doctest: +SKIP
    'compiled'
    """

    def __init__(self) -> None:
        pn = require_panel()
        self.explanation: Any = None
        self.seconds = float("nan")
        self.size = pn.widgets.Select(name="Points n", options=list(SIZES), value=SIZES[1])
        self.kernel = pn.widgets.Select(name="Kernel", options=list(KERNELS), value="gaussian")
        self.bandwidth = pn.widgets.FloatInput(name="Bandwidth h", value=0.2, start=1e-3)
        self.button = pn.widgets.Button(name="Run", button_type="primary")
        self.result = pn.pane.Markdown("Press **Run**.", name="scale-result",
                                       sizing_mode="stretch_width")
        self.button.on_click(lambda event: self.run())
        self.panel = pn.Row(pn.Column(self.size, self.kernel, self.bandwidth, self.button,
                                      width=300),
                            self.result, name="Scale", sizing_mode="stretch_width")

    def run(self) -> None:
        """Generate the data, ask ``nadaraya.explain`` and time ``nadaraya.smooth``."""
        n, kernel, h = int(self.size.value), self.kernel.value, float(self.bandwidth.value)
        x, y = generate(n)
        queries = np.linspace(0.0, 10.0, min(n, 10_000))[:, None]
        try:
            self.explanation = nadaraya.explain(queries, x, y, kernel, bandwidth=h)
            start = time.perf_counter()
            nadaraya.smooth(queries, x, y, kernel, bandwidth=h, empty="nan")
            self.seconds = time.perf_counter() - start
        except NadarayaError as exc:
            self.result.object = f"**{' '.join(str(exc).split())}**"
            return
        chosen = self.explanation.engine
        others = "\n".join(f"| {name} | {why} |" for name, why in
                           self.explanation.reasons.items() if name != chosen)
        self.result.object = (
            f"**{n} points, {len(queries)} queries, kernel {kernel}, h = {h:g}**\n\n"
            f"Engine: **{chosen}**: {self.explanation.reasons.get(chosen, '')}\n\n"
            f"Time in `nadaraya.smooth`: **{self.seconds * 1e3:.1f} ms**\n\n"
            f"| engine | why not |\n| --- | --- |\n{others}")
