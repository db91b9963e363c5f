"""The figures: kNN against kernel, a fit with its band, the CV curve, one query's weights."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._errors import NadarayaError

if TYPE_CHECKING:
    from .._files import Output

__all__ = ["figure_format", "plot_cv_curve", "plot_fit", "plot_knn_vs_kernel", "plot_weights",
           "save_figure"]

DATA_COLOR = "dimgrey"
COLORS = ("teal", "darkorange", "purple", "crimson")


def _axes(ax: Any, figsize: tuple[float, float] = (6.4, 4.2)) -> Any:
    """``ax``, or the axes of a new figure (made without pyplot: no window, no global state)."""
    if ax is not None:
        return ax
    try:
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover - matplotlib is a dependency
        raise NadarayaError("plotting needs matplotlib; install it with "
                            "'pip install matplotlib'.") from None
    return Figure(figsize=figsize, layout="constrained").subplots()


def _one_feature(model: Any, what: str) -> None:
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(model)
    if model.n_features_in_ != 1:
        raise NadarayaError(
            f"{what} draws a curve against one feature; the model was fitted on "
            f"{model.n_features_in_} features. Fit it on one column to plot it."
        )


def figure_format(path: str | Path | Output, fmt: str | None = None) -> str:
    """The format a figure is written in to ``path``, checked before any drawing.

    Parameters
    ----------
    path : str, path-like or nadaraya._files.Output
        The destination; an :class:`~nadaraya._files.Output` is named in
        messages by its option (``--plot``).
    fmt : str, optional
        The format; default from the suffix of ``path`` (``png`` without one).

    Returns
    -------
    str
        The format, lower case (``"png"``, ``"svg"``, ``"pdf"``, ...).

    Raises
    ------
    NadarayaError
        Matplotlib cannot write that format.
    """
    from matplotlib.backend_bases import FigureCanvasBase

    from .._files import Output

    if isinstance(path, Output):
        suffix, where = path.suffix, f"{path.option} {path}"
    else:
        suffix, where = Path(path).suffix.lower(), str(path)
    fmt = (fmt or suffix.lstrip(".") or "png").lower()
    supported = FigureCanvasBase.get_supported_filetypes()
    if fmt not in supported:
        raise NadarayaError(f"cannot write a figure as {fmt!r} ({where}); give a file name "
                            f"ending in one of {', '.join('.' + s for s in sorted(supported))}.")
    return fmt


def save_figure(fig: Any, path: str | Path | Output, *, dpi: int = 120,
                fmt: str | None = None) -> Path:
    """Write ``fig`` to a file, safely (see :mod:`nadaraya._files`).

    A regular file is written to a temporary file in the same folder and
    renamed over ``path``: a reader never sees a half-written figure, and a
    failed write leaves the old file as it was. ``-``, a FIFO or a character
    device are streamed to.

    Parameters
    ----------
    fig : matplotlib Figure
    path : str, path-like or nadaraya._files.Output
        Destination; ``"-"`` is standard output.
    dpi : int, default 120
    fmt : {"png", "svg", "pdf", ...}, optional
        The format; default from the suffix of ``path`` (``png`` without one).

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    from .._files import output

    target = output(path, option="path")
    fmt = figure_format(target, fmt)
    with target.open("wb") as f:
        fig.savefig(f, format=fmt, dpi=dpi)
    return target.path


def plot_knn_vs_kernel(ax: Any = None, *, n: int = 40, k: int = 10, bandwidth: float | None = None,
                       seed: int = 42) -> Any:
    """k-nearest neighbours against Gaussian kernel regression on noisy ``2 sin x``.

    ``n`` points ``x ~ U(0, 6)``, ``y = 2 sin x + N(0, 1)`` (NumPy's legacy
    generator seeded with ``seed``). The kNN fit is Nadaraya-Watson with a
    uniform kernel under a :class:`~nadaraya.masks.KNearest` mask, so it
    steps; the Gaussian kernel weighs every point by its distance, so it is
    smooth.

    Parameters
    ----------
    ax : matplotlib Axes, optional
    n : int, default 40
    k : int, default 10
    bandwidth : float, optional
        Gaussian bandwidth; default ``sqrt(1/10)`` (scikit-learn's
        ``rbf_kernel(gamma=5)``), or ``"cv"`` to choose it.
    seed : int, default 42

    Returns
    -------
    matplotlib Axes
    """
    from ..estimators import NadarayaWatsonRegressor
    from ..masks import KNearest

    ax = _axes(ax)
    rng = np.random.RandomState(seed)
    x = rng.uniform(0, 6, n)
    y = 2 * np.sin(x) + rng.normal(size=n)
    grid = np.linspace(0, 6, 500)[:, None]
    knn = NadarayaWatsonRegressor("uniform", bandwidth=np.inf, mask=KNearest(k)).fit(x[:, None], y)
    h = np.sqrt(1 / 10) if bandwidth is None else bandwidth
    kern = NadarayaWatsonRegressor("gaussian", bandwidth=h).fit(x[:, None], y)
    ax.scatter(x, y, color=DATA_COLOR, s=18, label="data", zorder=3)
    ax.step(grid[:, 0], knn.predict(grid), where="mid", color="darkorange", lw=2.5,
            label=f"{k}-nearest neighbours")
    ax.plot(grid[:, 0], kern.predict(grid), color="teal", lw=2.5,
            label=f"Gaussian kernel (h = {kern.bandwidth_:.3g})")
    ax.plot(grid[:, 0], 2 * np.sin(grid[:, 0]), color="black", lw=1, ls=":", label="2 sin x")
    ax.set_title("k-nearest neighbours vs Gaussian kernel regression")
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.legend(loc="lower left", fontsize="small")
    return ax


def plot_fit(model: Any, X: Any, y: Any, ax: Any = None, *, level: float = 0.95,
             kind: str = "confidence", method: str = "hc", grid: int = 300,
             label: str | None = None, color: str | None = None, data: bool = True) -> Any:
    """A fitted one-feature regressor, its pointwise band and the data.

    The band is the model's :meth:`predict_interval` with the same defaults: a
    confidence band for the smoothed mean, from the heteroscedasticity-
    consistent variance. It shows the variability of the estimate at the
    fitted bandwidth, not its bias (kernel fits flatten peaks), and it holds
    at each point separately; ``kind="prediction"`` draws the interval for a
    new observation instead.

    Parameters
    ----------
    model : fitted NadarayaWatsonRegressor or LocalPolynomialRegressor
    X : array-like of shape (n_samples, 1)
    y : array-like of shape (n_samples,)
    ax : matplotlib Axes, optional
    level : float, default 0.95
    kind : {"confidence", "prediction"}, default "confidence"
    method : {"hc", "normal", "bootstrap"}, default "hc"
        See :meth:`predict_interval`.
    grid : int, default 300
        Number of points of the curve.
    label, color : str, optional
    data : bool, default True
        Draw the data points.

    Returns
    -------
    matplotlib Axes
    """
    _one_feature(model, "plot_fit")
    ax = _axes(ax)
    X = np.asarray(X, float).reshape(len(y), -1)
    y = np.asarray(y, float)
    xs = np.linspace(X[:, 0].min(), X[:, 0].max(), grid)[:, None]
    mean = model.predict(xs)
    lo, hi = model.predict_interval(xs, level=level, kind=kind, method=method, random_state=0)
    color = color or COLORS[len(ax.lines) % len(COLORS)]
    label = label or type(model).__name__
    if data:
        ax.scatter(X[:, 0], y, color=DATA_COLOR, s=12, alpha=0.8, label="data", zorder=3)
    ax.fill_between(xs[:, 0], lo, hi, color=color, alpha=0.2, lw=0,
                    label=f"{level:.0%} {'band' if kind == 'confidence' else 'prediction interval'}"
                          f" ({method})")
    h = model.bandwidth_
    hs = f", h = {h:.3g}" if isinstance(h, float) else ""
    ax.plot(xs[:, 0], mean, color=color, lw=2, label=f"{label}{hs}")
    ax.legend(fontsize="small")
    return ax


def plot_cv_curve(model: Any, ax: Any = None, *, label: str | None = None,
                  color: str | None = None) -> Any:
    """The bandwidth criterion at every bandwidth the search evaluated, and the choice.

    Parameters
    ----------
    model : estimator fitted with ``bandwidth="cv"``, ``"gcv"`` or ``"aicc"``
    ax : matplotlib Axes, optional
    label, color : str, optional

    Returns
    -------
    matplotlib Axes
    """
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(model)
    res = getattr(model, "cv_results_", None)
    if res is None:
        raise NadarayaError(
            "plot_cv_curve needs the record of a bandwidth search; fit the model with "
            "bandwidth='cv' (or 'gcv', 'aicc')."
        )
    ax = _axes(ax)
    color = color or COLORS[len(ax.lines) % len(COLORS)]
    label = label or type(model).__name__
    H, score = res["bandwidth"], res["score"]
    finite = np.isfinite(score)
    chosen = np.atleast_1d(model.bandwidth_)
    if H.shape[1] == 1:
        order = np.argsort(H[finite, 0])
        ax.plot(H[finite, 0][order], score[finite][order], "o-", ms=3, color=color, label=label)
        ax.scatter(chosen, [np.min(score[finite])], color=color, s=90, marker="*", zorder=4)
        ax.axvline(chosen[0], color=color, ls="--", lw=1)
    else:
        # each feature's own line searches: the criterion against that feature's bandwidth
        for f, c in zip(range(H.shape[1]), COLORS * H.shape[1], strict=False):
            pick = finite & (res["feature"] == f)
            if pick.any():
                ax.scatter(H[pick, f], score[pick], s=10, color=c, label=f"{label}, feature {f}")
                if np.isfinite(chosen[f]):
                    ax.axvline(chosen[f], color=c, ls="--", lw=1)
    ax.set_xscale("log")
    ax.set_xlabel("bandwidth h")
    ax.set_ylabel({"cv": "leave-one-out MSE", "gcv": "GCV", "aicc": "AICc"}[res["criterion"]])
    ax.set_title("bandwidth search (dashed: chosen)")
    ax.legend(fontsize="small")
    return ax


def plot_weights(model: Any, x0: float, X: Any, y: Any, ax: Any = None, *,
                 color: str | None = None, label: str | None = None) -> Any:
    """The weights of one query as a curve under the data.

    Row ``x0`` of the smoother matrix: how much each training point counts
    in the prediction at ``x0`` (the attention of that query). For local
    linear fits some weights are negative (the equivalent kernel).

    Parameters
    ----------
    model : fitted one-feature estimator
    x0 : float
        The query.
    X, y : the training data (drawn as points)
    ax : matplotlib Axes, optional
    color, label : str, optional

    Returns
    -------
    matplotlib Axes
        The axes of the data; the weights are on a twin axis below them.
    """
    _one_feature(model, "plot_weights")
    ax = _axes(ax)
    X = np.asarray(X, float).reshape(len(y), -1)
    y = np.asarray(y, float)
    w = model.smoother_matrix(np.array([[float(x0)]]))[0]
    xt = model.X_fit_[:, 0]
    order = np.argsort(xt, kind="stable")
    color = color or COLORS[(len(ax.lines) + len(getattr(ax, "_weight_axes", []))) % len(COLORS)]
    label = label or type(model).__name__
    if not getattr(ax, "_weight_axes", None):
        ax.scatter(X[:, 0], y, color=DATA_COLOR, s=12, alpha=0.8, label="data", zorder=3)
        ax.axvline(float(x0), color="black", lw=1, ls=":")
        ax._weight_axes = [ax.twinx()]
    wax = ax._weight_axes[0]
    wax.fill_between(xt[order], 0, w[order], color=color, alpha=0.3, step="mid")
    wax.plot(xt[order], w[order], color=color, lw=1.5, drawstyle="steps-mid",
             label=f"weights of x0 = {x0:g} ({label})")
    top = max(float(np.max(np.abs(w))), 1e-12)
    lo = min(float(np.min(w)), 0.0)
    wax.set_ylim(min(lo * 3, -0.02 * top), top * 3)  # weights in the lower third
    wax.set_ylabel("weight")
    ax.set_title(f"which points the prediction at x0 = {x0:g} attends to")
    wax.legend(loc="upper right", fontsize="small")
    return ax
