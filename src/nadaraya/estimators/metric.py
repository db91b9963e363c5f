"""Metric learning for kernel regression (MLKR): the Gaussian smoother's metric, learned.

Weinberger and Tesauro (2007) learn a linear map ``L`` for the Gaussian
Nadaraya-Watson regressor ``K(x, x') = exp(-||L x - L x'||^2 / 2)`` by
minimising the leave-one-out squared error

    sum_i ||y_i - sum_{j != i} K(x_i, x_j) y_j / sum_{j != i} K(x_i, x_j)||^2.

This is attention with ``W_q = W_k = L`` trained by gradient descent (seed
000's derivation): queries ``X L^T``, keys ``X L^T``, values ``y``, the RBF
kernel and the leave-one-out mask. Here the objective is exactly that call of
:func:`nadaraya.smooth` (its differentiable engine), and torch autograd gives
its gradient; SciPy's L-BFGS-B (with its line search) minimises it.
``tie=False`` learns separate maps for queries and keys.

The objective is not convex, and for a full map it has ``n_components *
n_features`` free parameters, so its minimum can fit the training sample's
noise; by default the descent starts at the best isotropic smoother and stops
early on held-out data (see :class:`MetricKernelRegressor`).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator, RegressorMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .._errors import NadarayaError
from ..engine import smooth
from ..kernels import Gaussian
from ..masks import LeaveOneOut
from ._mixed import check_var_types
from ._tabular import frame_types, is_frame

__all__ = ["MetricKernelRegressor", "loo_squared_error"]

INITS = ("auto", "identity", "pca")


def loo_squared_error(points: torch.Tensor, targets: torch.Tensor, query_map: torch.Tensor,
                      key_map: torch.Tensor | None = None) -> torch.Tensor:
    """Mean leave-one-out squared error of Gaussian NW in the metric ``L`` (differentiable).

    Parameters
    ----------
    points : torch.Tensor of shape (n, d)
    targets : torch.Tensor of shape (n, p)
    query_map : torch.Tensor of shape (r, d)
        ``L`` (``W_q``).
    key_map : torch.Tensor of shape (r, d), optional
        ``W_k``; ``query_map`` when None.

    Returns
    -------
    torch.Tensor
        ``mean_i ||y_i - yhat_{-i}||^2`` with ``K = exp(-||W_q x_i - W_k x_j||^2 / 2)``.
    """
    q = points @ query_map.T
    k = q if key_map is None else points @ key_map.T
    # the engine's differentiable path; every query sees n - 1 >= 1 keys
    fit = smooth(q, k, targets, Gaussian(1.0), LeaveOneOut(), empty="raise")
    return (fit - targets).square().sum(1).mean()


class MetricKernelRegressor(RegressorMixin, TransformerMixin, BaseEstimator):
    """Gaussian Nadaraya-Watson regression with a learned metric (MLKR).

    Parameters
    ----------
    n_components : int, optional
        Rows of ``L`` (the dimension of the learned space); all features by
        default.
    tie : bool, default True
        One map for queries and keys (``W_q = W_k = L``, a true metric);
        ``False`` learns ``W_q`` and ``W_k`` separately (an asymmetric kernel).
    init : {"auto", "identity", "pca"} or array of shape (n_components, n_features)
        Starting map. ``"identity"`` (or the principal axes scaled to unit
        variance, ``"pca"``) is divided by Scott's factor
        ``n ** (-1 / (n_components + 4))`` and multiplied by the isotropic
        scale with the lowest leave-one-out error on the grid of 21 scales
        from 0.1 to 10 (geometric), found by walking downhill from 1: the
        descent starts at the best isotropic Gaussian smoother. ``"auto"`` is
        ``"pca"`` when ``n_components`` is below the number of features,
        ``"identity"`` otherwise; an array is used as given.
    max_iter : int, default 100
        Most L-BFGS-B iterations.
    tol : float, default 1e-7
        Stop when an iteration lowers the leave-one-out error by less than
        ``tol`` times its value.
    early_stopping : bool, default True
        Learn on ``1 - validation_fraction`` of the data and keep the map
        with the lowest squared error on the rest: the leave-one-out error
        of a full metric can itself be overfitted on small, noisy data, and
        the held-out error decides how far the map moves from the isotropic
        start. ``False`` minimises the leave-one-out error of all the data
        (Weinberger and Tesauro's MLKR as stated) until ``tol`` or
        ``max_iter``.
    validation_fraction : float, default 0.2
        Share of the samples held out for early stopping (no early stopping
        when either part would have fewer than 2 samples).
    n_iter_no_change : int, default 5
        Stop after this many iterations without a better held-out error.
    refit : bool, default True
        With early stopping, learn the final map on all the data, taking
        the number of L-BFGS-B iterations that gave the best held-out error (as
        model selection refits on all the data); else keep the map learned
        on the smaller part.
    standardize : bool, default True
        Scale each feature to unit variance before learning ``L``.
    random_state : int, default 0
        Seeds the held-out split.
    var_types : str or None, default None
        One letter per feature, as in the regressors; only ``'c'``
        (continuous) is accepted. A learned linear map acts on coordinates,
        and the codes of categorical levels have none (the map would depend
        on how the levels happen to be numbered), so categorical features,
        by ``var_types`` or as a DataFrame's ``category`` / bool columns, are
        refused: give them as indicator columns (``pd.get_dummies``), whose
        distances the map then learns, or use
        :class:`~nadaraya.estimators.NadarayaWatsonRegressor` with
        ``var_types``. A DataFrame of numeric columns is accepted and names
        the features (``feature_names_in_``).

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        The learned map ``L`` (for the standardised features).
    key_components_ : ndarray of shape (n_components, n_features)
        The keys' map (equal to ``components_`` when ``tie=True``).
    loss_ : float
        Leave-one-out mean squared error (in the units of ``y``) of the
        final map on the samples it was learned on.
    validation_error_ : float or None
        Held-out mean squared error at the chosen step (with early stopping).
    n_steps_ : int
        L-BFGS-B iterations taken to the final map.
    n_iter_ : int
        Evaluations of the objective and its gradient by L-BFGS-B.
    fit_time_ : float
        Seconds spent in :meth:`fit`.

    Examples
    --------
    >>> from sklearn.datasets import make_friedman1
    >>> from nadaraya.estimators.metric import MetricKernelRegressor
    >>> X, y = make_friedman1(200, n_features=10, random_state=0)
    >>> model = MetricKernelRegressor(max_iter=20).fit(X, y)
    >>> model.components_.shape
    (10, 10)
    """

    def __init__(self, n_components: int | None = None, *, tie: bool = True,
                 init: str | Any = "auto", max_iter: int = 100, tol: float = 1e-7,
                 early_stopping: bool = True, validation_fraction: float = 0.2,
                 n_iter_no_change: int = 5, refit: bool = True, standardize: bool = True,
                 random_state: Any = 0, var_types: str | None = None) -> None:
        self.n_components = n_components
        self.tie = tie
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.refit = refit
        self.standardize = standardize
        self.random_state = random_state
        self.var_types = var_types

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    # -- helpers -------------------------------------------------------------
    def _check_params(self, n_features: int) -> int:
        r = n_features if self.n_components is None else self.n_components
        if not isinstance(r, int | np.integer) or r < 1:
            raise NadarayaError(f"n_components must be a positive integer; got "
                                f"{self.n_components!r}.")
        if not isinstance(self.max_iter, int | np.integer) or self.max_iter < 1:
            raise NadarayaError(f"max_iter must be a positive integer; got {self.max_iter!r}.")
        if not (isinstance(self.validation_fraction, int | float)
                and 0 <= self.validation_fraction < 1):
            raise NadarayaError(f"validation_fraction must be in [0, 1); got "
                                f"{self.validation_fraction!r}.")
        if not isinstance(self.n_iter_no_change, int | np.integer) or self.n_iter_no_change < 1:
            raise NadarayaError(f"n_iter_no_change must be a positive integer; got "
                                f"{self.n_iter_no_change!r}.")
        if not (isinstance(self.tol, int | float) and self.tol >= 0):
            raise NadarayaError(f"tol must be a number >= 0; got {self.tol!r}.")
        if isinstance(self.init, str) and self.init not in INITS:
            raise NadarayaError(f"init must be one of {', '.join(map(repr, INITS))} or an "
                                f"array (n_components, n_features); got {self.init!r}.")
        return int(r)

    def _split(self, n: int) -> tuple[np.ndarray, np.ndarray | None]:
        held = round(self.validation_fraction * n) if self.early_stopping else 0
        if held < 2 or n - held < 2:
            return np.arange(n), None
        order = np.random.default_rng(self.random_state).permutation(n)
        return np.sort(order[held:]), np.sort(order[:held])

    def _initial(self, Z: np.ndarray, Y: np.ndarray, r: int) -> np.ndarray:
        L = self._direction(Z, r)
        if not isinstance(self.init, str):
            return L
        # the isotropic scale with the lowest leave-one-out error: descend the grid of
        # scales from 1 (Scott's rule) to the first grid point beating both neighbours
        z, y = torch.as_tensor(Z), torch.as_tensor(Y)
        scales = np.geomspace(0.1, 10.0, 21)
        errors: dict[int, float] = {}

        def error(i: int) -> float:
            if i not in errors:
                with torch.no_grad():
                    errors[i] = float(loo_squared_error(z, y, torch.as_tensor(L * scales[i])))
            return errors[i]

        i = len(scales) // 2
        while True:
            j = min((k for k in (i - 1, i + 1) if 0 <= k < len(scales)), key=error)
            if error(j) >= error(i):
                return L * scales[i]
            i = j

    def _direction(self, Z: np.ndarray, r: int) -> np.ndarray:
        n, d = Z.shape
        scott = n ** (-1.0 / (r + 4))
        if not isinstance(self.init, str):
            L = np.asarray(self.init, dtype=float)
            if L.shape != (r, d):
                raise NadarayaError(f"init array must have shape (n_components, n_features) = "
                                    f"{(r, d)}; got {L.shape}.")
            return L
        kind = self.init
        if kind == "auto":
            kind = "pca" if r < d else "identity"
        if kind == "identity":
            L = np.eye(r, d)
        else:
            _, s, vt = np.linalg.svd(Z - Z.mean(0), full_matrices=False)
            L = np.zeros((r, d))
            k = min(r, vt.shape[0])
            spread = s[:k] / np.sqrt(max(n - 1, 1))
            L[:k] = vt[:k] / np.where(spread > 0, spread, 1.0)[:, None]
        return L / scott

    def _check_types(self, X: Any) -> None:
        """Refuse categorical features (see ``var_types``)."""
        d = X.shape[1] if getattr(X, "ndim", 0) == 2 else None
        types = check_var_types(self.var_types, d) if d is not None else self.var_types
        if types is None and is_frame(X):
            types = frame_types(X)
        if types and set(types) - {"c"}:
            j = next(i for i, t in enumerate(types) if t != "c")
            name = repr(str(X.columns[j])) if is_frame(X) else str(j)
            raise NadarayaError(
                f"MetricKernelRegressor learns a linear map of continuous features; feature "
                f"{name} is categorical (var_types={types!r}), and its level codes have no "
                "coordinates to map. Give it as indicator columns (pd.get_dummies), or use "
                "NadarayaWatsonRegressor(var_types=...) for a product kernel over levels."
            )

    def _scale(self, X: np.ndarray) -> np.ndarray:
        return (X - self.mean_) / self.scale_

    # -- fit / predict -----------------------------------------------------------
    def fit(self, X: Any, y: Any) -> MetricKernelRegressor:
        """Learn the metric by minimising the leave-one-out squared error.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Continuous features only (see ``var_types``).
        y : array-like of shape (n_samples,) or (n_samples, n_targets)

        Returns
        -------
        self
        """
        start = time.perf_counter()
        self._check_types(X)
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=True, dtype=np.float64)
        n, d = X.shape
        if n < 2:
            raise NadarayaError("MetricKernelRegressor needs at least 2 samples for the "
                                "leave-one-out objective; got 1 sample.")
        r = self._check_params(d)
        self.mean_ = X.mean(0) if self.standardize else np.zeros(d)
        spread = X.std(0) if self.standardize else np.ones(d)
        self.scale_ = np.where(spread > 0, spread, 1.0)
        Z = self._scale(X)
        y = np.array(y, dtype=np.float64)  # a writable copy: torch shares its memory
        Y = y.reshape(n, -1)
        fit_rows, held_rows = self._split(n)
        L0 = self._initial(Z[fit_rows], Y[fit_rows], r)
        held = None if held_rows is None else (Z[held_rows], Y[held_rows])
        params, steps, best_err, evaluations, loss = self._descend(
            Z[fit_rows], Y[fit_rows], L0, self.max_iter, held)
        if held is not None and self.refit:
            # the number of steps was chosen on held-out data: take them on all the data
            L0 = self._initial(Z, Y, r)
            params, _, _, more, loss = self._descend(Z, Y, L0, steps, None)
            evaluations += more
        self.components_ = params[0].copy()
        self.key_components_ = params[-1].copy()
        self.X_train_ = Z
        self.y_train_ = y
        self.loss_ = loss
        self.validation_error_ = best_err if held is not None else None
        self.n_steps_ = steps
        self.n_iter_ = evaluations
        self.fit_time_ = time.perf_counter() - start
        return self

    def _descend(self, Z: np.ndarray, Y: np.ndarray, L0: np.ndarray, max_steps: int,
                 held: tuple[np.ndarray, np.ndarray] | None,
                 ) -> tuple[list[np.ndarray], int, float, int, float]:
        """L-BFGS-B on the leave-one-out error; with ``held``, keep the best held-out map.

        Returns the maps, the steps taken (to the kept map), its held-out
        error, the objective evaluations and the leave-one-out error of the
        kept map.
        """
        from scipy.optimize import minimize

        z, yt = torch.as_tensor(Z), torch.as_tensor(Y)
        n_maps = 1 if self.tie else 2
        shape = (n_maps, *L0.shape)
        evaluations = 0
        start = np.tile(L0.ravel(), n_maps)
        # the kept point (step, held-out error, leave-one-out error) and the run's progress
        best = {"x": start, "step": 0, "error": math.nan, "loss": math.nan}
        state = {"step": 0, "stale": 0, "loss": math.nan}

        def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
            nonlocal evaluations
            evaluations += 1
            maps = torch.tensor(x).reshape(shape).requires_grad_()
            loss = loo_squared_error(z, yt, maps[0], maps[-1] if n_maps == 2 else None)
            loss.backward()
            if evaluations == 1:  # the starting point
                state["loss"] = best["loss"] = loss.item()
            return loss.item(), maps.grad.numpy().ravel()

        def held_out_error(x: np.ndarray) -> float:
            if held is None:
                return math.nan
            maps = torch.as_tensor(x).reshape(shape)
            with torch.no_grad():
                q = torch.as_tensor(held[0]) @ maps[0].T
                pred = smooth(q, z @ maps[-1].T, yt, "gaussian", bandwidth=1.0, empty="nearest")
                return float((pred - torch.as_tensor(held[1])).square().sum(1).mean())

        best["error"] = held_out_error(start)

        def after_step(intermediate_result: Any) -> None:
            # called by L-BFGS-B once per iteration, with the new point and objective
            x, value = intermediate_result.x, float(intermediate_result.fun)
            state["step"] += 1
            previous, state["loss"] = state["loss"], value
            if held is not None:
                err = held_out_error(x)
                if err < best["error"]:
                    best.update(x=x.copy(), step=state["step"], error=err, loss=value)
                    state["stale"] = 0
                else:
                    state["stale"] += 1
                    if state["stale"] >= self.n_iter_no_change:
                        raise StopIteration
            else:
                best.update(x=x.copy(), step=state["step"], loss=value)
            if previous - value <= self.tol * abs(value):
                raise StopIteration

        if max_steps > 0:
            minimize(objective, start, jac=True, method="L-BFGS-B", callback=after_step,
                     options={"maxiter": max_steps, "ftol": 0.0, "gtol": 0.0})
        else:
            best["loss"] = objective(start)[0]
        maps = list(best["x"].reshape(shape))
        return maps, best["step"], best["error"], evaluations, best["loss"]

    def transform(self, X: Any) -> np.ndarray:
        """Map points into the learned space ``((X - mean) / scale) @ L^T``: (n, n_components)."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return self._scale(X) @ self.components_.T

    def predict(self, X: Any) -> np.ndarray:
        """Gaussian Nadaraya-Watson prediction in the learned metric.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)

        Returns
        -------
        ndarray of shape (n_queries,) or (n_queries, n_targets)
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        queries = self._scale(X) @ self.components_.T
        keys = self.X_train_ @ self.key_components_.T
        return smooth(queries, keys, self.y_train_, "gaussian", bandwidth=1.0, empty="nearest")
