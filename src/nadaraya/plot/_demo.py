"""The smoothing demo: the motorcycle data fitted with chosen bandwidths, and its figures."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import NadarayaError
from ._figures import plot_cv_curve, plot_fit, plot_knn_vs_kernel, plot_weights, save_figure

__all__ = ["DemoReport", "smoothing_demo"]


@dataclass
class DemoReport:
    """What :func:`smoothing_demo` fitted and wrote.

    Attributes
    ----------
    models : dict of str to estimator
        ``"Nadaraya-Watson"`` and ``"local linear"``, fitted to mcycle.
    figures : dict of str to Path
        Figure name to the file written.
    summary : str
        A few lines: the bandwidth, leave-one-out error and effective degrees
        of freedom of each fit, and where the figures are.
    """

    models: dict[str, Any] = field(default_factory=dict)
    figures: dict[str, Path] = field(default_factory=dict)
    summary: str = ""


def _folder(folder: str | os.PathLike[str]) -> Path:
    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise NadarayaError(f"{path} is a file; give a folder for the figures.")
    path.mkdir(parents=True, exist_ok=True)
    return path


def smoothing_demo(folder: str | os.PathLike[str], *, kernel: str = "gaussian",
                   bandwidth: Any = "cv", weights_at: float = 20.0, level: float = 0.95,
                   fmt: str = "png") -> DemoReport:
    """Fit the motorcycle data by Nadaraya-Watson and local linear, write the figures.

    Loads :func:`nadaraya.datasets.load_mcycle` (head acceleration against
    time after impact), fits both estimators with ``bandwidth`` (exact
    leave-one-out cross-validation by default) and writes four figures to
    ``folder`` (created if needed; each file written atomically):

    * ``knn_vs_kernel``: k-nearest neighbours against a Gaussian kernel on
      40 noisy points of ``2 sin x``;
    * ``mcycle_fit``: both fits with their pointwise bands over the data;
    * ``mcycle_cv``: the criterion against the bandwidth, choices marked;
    * ``mcycle_weights``: the weights of the query ``weights_at`` (ms) for
      both fits, under the data.

    Parameters
    ----------
    folder : str or path-like
    kernel : str, default "gaussian"
    bandwidth : float or str, default "cv"
    weights_at : float, default 20.0
        Time (ms) of the query whose weights are drawn.
    level : float, default 0.95
        Level of the bands.
    fmt : {"png", "svg", "pdf"}, default "png"

    Returns
    -------
    DemoReport
        The fitted models, the files written and a printable summary.

    Examples
    --------
    >>> import tempfile
    >>> from nadaraya.plot import smoothing_demo
    >>> report = smoothing_demo(tempfile.mkdtemp())        # doctest: +SKIP
    >>> print(report.summary)                                # doctest: +SKIP
    """
    from ..datasets import load_mcycle
    from ..estimators import LocalPolynomialRegressor, NadarayaWatsonRegressor

    if fmt not in ("png", "svg", "pdf"):
        raise NadarayaError(f"fmt must be 'png', 'svg' or 'pdf'; got {fmt!r}.")
    out = _folder(folder)
    X, y = load_mcycle(return_X_y=True)
    models = {
        "Nadaraya-Watson": NadarayaWatsonRegressor(kernel, bandwidth).fit(X, y),
        "local linear": LocalPolynomialRegressor(1, kernel, bandwidth).fit(X, y),
    }
    report = DemoReport(models=models)

    def write(name: str, ax: Any) -> None:
        report.figures[name] = save_figure(ax.figure, out / f"{name}.{fmt}")

    write("knn_vs_kernel", plot_knn_vs_kernel())
    colors = dict(zip(models, ("teal", "darkorange"), strict=True))
    ax = None
    for i, (name, model) in enumerate(models.items()):
        ax = plot_fit(model, X, y, ax, level=level, label=name, data=i == 0,
                      color=colors[name])
    ax.set_xlabel("time after impact (ms)")
    ax.set_ylabel("head acceleration (g)")
    ax.set_title("motorcycle data: kernel fits, pointwise bands (variability, not bias)",
                 fontsize="medium")
    write("mcycle_fit", ax)
    if all(m.cv_results_ is not None for m in models.values()):
        ax = None
        for name, model in models.items():
            ax = plot_cv_curve(model, ax, label=name, color=colors[name])
        write("mcycle_cv", ax)
    ax = None
    for name, model in models.items():
        ax = plot_weights(model, weights_at, X, y, ax, label=name, color=colors[name])
    ax.set_xlabel("time after impact (ms)")
    ax.set_ylabel("head acceleration (g)")
    write("mcycle_weights", ax)

    lines = ["mcycle: 133 measurements of head acceleration (g) against time after impact (ms)"]
    for name, model in models.items():
        lines.append(f"  {name:<16} bandwidth {model.bandwidth_:7.3f} ms   leave-one-out MSE "
                     f"{model.cv_score_:8.2f}   effective dof {model.effective_dof_:6.2f}")
    lines.append(f"figures in {out}: " + ", ".join(p.name for p in report.figures.values()))
    report.summary = "\n".join(lines)
    return report
