"""Figures of a regressor's effects: partial dependence and the gradient along a feature.

* :func:`plot_partial_dependence`: the fit averaged over the rows of ``X``
  with one feature set to each value of a grid (Friedman's partial
  dependence); for a categorical feature one point per level;
* :func:`plot_gradient`: the derivative of the fit along a continuous
  feature (:meth:`gradient`), with its pointwise band for a one-feature
  model, averaged over the rows of ``X`` otherwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._errors import NadarayaError
from ._figures import COLORS, DATA_COLOR, _axes

__all__ = ["plot_gradient", "plot_partial_dependence"]


def _column(model: Any, X: Any, feature: Any) -> tuple[int, str, Any]:
    """Position, name and values of ``feature`` in ``X`` (array or DataFrame)."""
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(model)
    names = getattr(model, "feature_names_in_", None)
    d = model.n_features_in_
    if isinstance(feature, str) and names is not None and feature in list(names):
        j = list(names).index(feature)
    elif isinstance(feature, int | np.integer) and not isinstance(feature, bool) \
            and 0 <= feature < d:
        j = int(feature)
    else:
        raise NadarayaError(
            f"feature must be a position in [0, {d}) or a column name of the fit; got "
            f"{feature!r}."
        )
    name = str(names[j]) if names is not None else f"x{j}"
    values = X.iloc[:, j] if hasattr(X, "iloc") else np.asarray(X, float)[:, j]
    return j, name, values


def _with_value(X: Any, j: int, value: Any) -> Any:
    """``X`` with column ``j`` set to ``value`` in every row."""
    if hasattr(X, "iloc"):
        out = X.copy()
        col = out.iloc[:, j]
        if type(col.dtype).__name__ == "CategoricalDtype":
            import pandas as pd  # loaded already: X is a DataFrame

            out.iloc[:, j] = pd.Categorical([value] * len(out), dtype=col.dtype)
        else:
            out.iloc[:, j] = value
        return out
    out = np.array(X, dtype=float, copy=True)
    out[:, j] = value
    return out


def _is_categorical(model: Any, j: int) -> bool:
    types = getattr(model, "_types", None)
    return types is not None and types[j] != "c"


def _output(a: np.ndarray, output: int) -> np.ndarray:
    if a.ndim == 1:
        return a
    if not 0 <= output < a.shape[-1]:
        raise NadarayaError(f"output must be in [0, {a.shape[-1]}); got {output!r}.")
    return a[..., output]


def plot_partial_dependence(model: Any, X: Any, feature: Any = 0, ax: Any = None, *,
                            grid: int = 50, output: int = 0, label: str | None = None,
                            color: str | None = None) -> Any:
    """Partial dependence of a fitted regressor on one feature.

    ``pd(v) = mean_i yhat(x_i with feature = v)`` over the rows of ``X``:
    a continuous feature on a grid from its smallest to its largest value in
    ``X``, a categorical one at each of its levels (points, one per level).
    Costs ``len(X) * grid`` predictions, in one call of ``predict``.

    Parameters
    ----------
    model : fitted NadarayaWatsonRegressor or LocalPolynomialRegressor
    X : array-like or DataFrame of shape (n_samples, n_features)
    feature : int or str, default 0
    ax : matplotlib Axes, optional
    grid : int, default 50
    output : int, default 0
        The output drawn, for a multi-output model.
    label, color : str, optional

    Returns
    -------
    matplotlib Axes
        The curve is the first line drawn (``ax.lines[0]`` on new axes): x the
        grid (level positions ``0, 1, ...`` for a categorical feature), y the
        partial dependence; a continuous feature's values follow as a rug.

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.estimators import NadarayaWatsonRegressor
    >>> from nadaraya.plot import plot_partial_dependence
    >>> X = np.random.default_rng(0).uniform(0, 1, (50, 2)); y = X[:, 0] + X[:, 1]
    >>> ax = plot_partial_dependence(NadarayaWatsonRegressor(bandwidth=0.2).fit(X, y), X, 1)
    """
    j, name, values = _column(model, X, feature)
    ax = _axes(ax)
    color = color or COLORS[len(ax.lines) % len(COLORS)]
    n = len(values)
    if _is_categorical(model, j):
        levels = list(values.cat.categories) if hasattr(values, "cat") else \
            list(np.unique(np.asarray(values)))
        positions = np.arange(len(levels), dtype=float)
        stack = [_with_value(X, j, lev) for lev in levels]
    else:
        v = np.asarray(values, float)
        levels = None
        positions = np.linspace(v.min(), v.max(), grid)
        stack = [_with_value(X, j, x) for x in positions]
    if hasattr(X, "iloc"):
        import pandas as pd  # loaded already: X is a DataFrame

        big = pd.concat(stack, ignore_index=True)
    else:
        big = np.concatenate(stack)
    pred = _output(np.asarray(model.predict(big)), output)
    curve = pred.reshape(len(positions), n).mean(axis=1)
    label = label or type(model).__name__
    if levels is None:
        ax.plot(positions, curve, color=color, lw=2, label=label)
        # a rug of the feature's values at the foot of the curve
        ax.plot(np.asarray(values, float), np.full(n, curve.min()), "|", color=DATA_COLOR,
                alpha=0.5, label="data")
    else:
        ax.plot(positions, curve, "o", color=color, ms=8, label=label)
        ax.set_xticks(positions, [str(lev) for lev in levels])
    ax.set_xlabel(name)
    ax.set_ylabel("partial dependence")
    ax.set_title(f"Partial dependence on {name}")
    return ax


def plot_gradient(model: Any, X: Any, feature: Any = 0, ax: Any = None, *, grid: int = 100,
                  level: float = 0.95, output: int = 0, label: str | None = None,
                  color: str | None = None) -> Any:
    """The derivative of the fit along a continuous feature.

    One feature: :meth:`gradient` on a grid over the range of ``X`` with its
    pointwise ``level`` band (asymptotic standard errors: the variability of
    the derivative at the fitted bandwidth, not its bias). Several features:
    the derivative averaged over the rows of ``X`` with the feature set to
    each grid value (no band). A dotted line marks zero.

    Parameters
    ----------
    model : fitted NadarayaWatsonRegressor or LocalPolynomialRegressor
    X : array-like or DataFrame of shape (n_samples, n_features)
    feature : int or str, default 0
    ax : matplotlib Axes, optional
    grid : int, default 100
    level : float, default 0.95
    output : int, default 0
    label, color : str, optional

    Returns
    -------
    matplotlib Axes
        The derivative is ``ax.lines[0]`` (x the grid), the band
        ``ax.collections[0]`` (one feature only).

    Examples
    --------
    >>> import numpy as np
    >>> from nadaraya.estimators import LocalPolynomialRegressor
    >>> from nadaraya.plot import plot_gradient
    >>> x = np.linspace(0, 6, 80)[:, None]; y = np.sin(x[:, 0])
    >>> ax = plot_gradient(LocalPolynomialRegressor(bandwidth=0.4).fit(x, y), x)
    """
    from scipy.special import ndtri

    j, name, values = _column(model, X, feature)
    if _is_categorical(model, j):
        raise NadarayaError(
            f"feature {name!r} is categorical: it has no derivative. Plot its level effects "
            "with plot_partial_dependence, or pick a continuous feature."
        )
    if not (isinstance(level, float) and 0 < level < 1):
        raise NadarayaError(f"level must be between 0 and 1 (e.g. 0.95); got {level!r}.")
    ax = _axes(ax)
    color = color or COLORS[len(ax.lines) % len(COLORS)]
    v = np.asarray(values, float)
    xs = np.linspace(v.min(), v.max(), grid)
    label = label or f"d yhat / d {name}"
    if model.n_features_in_ == 1:
        Q = xs[:, None]
        grad, std = model.gradient(Q, return_std=True)
        g, s = _output(grad[:, 0], output), _output(std[:, 0], output)
        ax.plot(xs, g, color=color, lw=2, label=label)
        z = float(ndtri(0.5 + level / 2))
        ax.fill_between(xs, g - z * s, g + z * s, color=color, alpha=0.2, lw=0,
                        label=f"{level:.0%} pointwise band")
    else:
        n = len(v)
        stack = [_with_value(X, j, x) for x in xs]
        if hasattr(X, "iloc"):
            import pandas as pd  # loaded already: X is a DataFrame

            big = pd.concat(stack, ignore_index=True)
        else:
            big = np.concatenate(stack)
        grad = _output(np.asarray(model.gradient(big))[:, j], output)
        ax.plot(xs, grad.reshape(grid, n).mean(axis=1), color=color, lw=2,
                label=f"{label} (averaged over X)")
    ax.axhline(0.0, color="black", lw=0.8, ls=":")
    ax.set_xlabel(name)
    ax.set_ylabel(f"d yhat / d {name}")
    ax.set_title(f"Gradient along {name}")
    ax.legend(loc="best", fontsize="small")
    return ax
