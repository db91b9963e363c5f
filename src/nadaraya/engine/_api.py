"""The public operator: ``smooth``, ``weights`` and ``explain``."""

from __future__ import annotations

from typing import Any

import torch

from .._config import get_config
from .._errors import NadarayaError
from .._validation import as_input, as_tensor, check_finite, compute_dtype, kind_of, to_caller
from ..bandwidth import resolve_bandwidth
from ..kernels import Kernel, get_kernel
from ..masks import Mask, Problem, get_mask
from ._dispatch import Engine, Explanation, choose, get_engine
from ._empty import _nearest, check_policy
from ._job import Job
from ._scale import scale_values
from .certified import METHODS, certified_state, check_tolerance, choose_certified
from .dense import dense_weights
from .features import RandomFeatures
from .features import as_state as features_state
from .unnormalized import check_options, finish

__all__ = ["explain", "smooth", "weights"]


def _points(x: Any, name: str, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    t = as_tensor(x, name, dtype=dtype, device=device)
    if t.ndim == 1:
        t = t[:, None]
    if t.shape[0] == 0:
        raise NadarayaError(f"{name} is empty (shape {tuple(t.shape)}); give at least one row.")
    check_finite(t, name)
    return t


def _dtype_device(*arrays: Any) -> tuple[torch.dtype, torch.device]:
    """The compute dtype and device of inputs already through :func:`as_input`."""
    dtypes, devices = [], set()
    for a in arrays:
        if a is None:
            continue
        dtypes.append(compute_dtype(a.dtype))
        if isinstance(a, torch.Tensor):
            devices.add(a.device)
    if len(devices) > 1:
        raise NadarayaError(
            f"queries, keys and values must be on one device; got {sorted(map(str, devices))}. "
            "Move them with .to(device)."
        )
    dtype = torch.float64 if torch.float64 in dtypes else torch.float32
    if not any(isinstance(a, torch.Tensor) for a in arrays) and torch.float32 not in dtypes:
        dtype = torch.float64
    return dtype, (devices.pop() if devices else torch.device("cpu"))


def _inputs(queries: Any, keys: Any, values: Any | None) -> tuple[Any, Any, Any]:
    """The three inputs as tensors or NumPy arrays of real numbers (pandas' nullable included).

    Converted inputs pass through unchanged, so :func:`smooth` converts once to read
    the caller's kind from the arrays the engine computes with.
    """
    return (as_input(queries, "queries"), as_input(keys, "keys"),
            None if values is None else as_input(values, "values"))


def build_job(queries: Any, keys: Any, values: Any | None, kernel: Any, mask: Any,
              bandwidth: Any) -> tuple[Job, bool]:
    """Validate inputs and bind kernel and mask; returns the job and whether values were 1-D."""
    queries, keys, values = _inputs(queries, keys, values)
    dtype, device = _dtype_device(queries, keys, values)
    q = _points(queries, "queries", dtype, device)
    k = _points(keys, "keys", dtype, device)
    if q.shape[1] != k.shape[1]:
        raise NadarayaError(
            f"queries have {q.shape[1]} feature(s) but keys have {k.shape[1]}; "
            "both must have the same number of columns."
        )
    squeeze = False
    if values is None:
        v = torch.zeros(k.shape[0], 0, dtype=dtype, device=device)
    else:
        v = as_tensor(values, "values", dtype=dtype, device=device)
        squeeze = v.ndim == 1
        if squeeze:
            v = v[:, None]
        if v.shape[0] != k.shape[0]:
            raise NadarayaError(
                f"values have {v.shape[0]} row(s) but keys have {k.shape[0]}; "
                "give one value row per key."
            )
        check_finite(v, "values")
    kern = get_kernel(kernel, resolve_bandwidth(bandwidth, k, kernel))
    try:
        bound_kernel = kern.bind(q, k)
    except NadarayaError:
        raise
    m = get_mask(mask)
    bound_mask = None
    if m is not None:
        bound_mask = m.bind(Problem(q.shape[0], k.shape[0], q, k))
    return Job(bound_kernel, bound_mask, v, q, k), squeeze


def smooth(
    queries: Any,
    keys: Any,
    values: Any,
    kernel: str | Kernel | Any = "gaussian",
    mask: Mask | Any = None,
    *,
    bandwidth: Any = None,
    engine: str = "auto",
    return_lse: bool = False,
    empty: str = "raise",
    normalize: bool = True,
    tolerance: float | None = None,
    approximate: str | RandomFeatures | None = None,
) -> Any:
    """Kernel-weighted mean of the values of the visible keys, for each query.

    ``out(q) = sum_{j in M(q)} K(q, k_j) v_j / sum_{j in M(q)} K(q, k_j)``

    Nadaraya-Watson regression, attention, the bilateral filter and
    non-local means are all this one call with a different kernel and mask.

    Parameters
    ----------
    queries : array-like or torch.Tensor of shape (m, d) or (m,)
        Points to predict at (1-D means one feature).
    keys : array-like or torch.Tensor of shape (n, d) or (n,)
        Points with known values.
    values : array-like or torch.Tensor of shape (n, p) or (n,)
        Values at the keys.
    kernel : str, Kernel or callable, default "gaussian"
        ``"gaussian"``, ``"laplacian"``, ``"epanechnikov"``, ``"tricube"``,
        ``"uniform"``, ``"cauchy"``, ``"softmax"``; a :class:`~nadaraya.kernels.Kernel`
        (products ``k1 * k2`` included); or ``fn(q_block, k_block) -> log K``.
    mask : Mask, bool matrix, sparse matrix, callable or str, optional
        The visible set of each query (see :mod:`nadaraya.masks`).
    bandwidth : float, array, str, optional
        For a named radial kernel: a scalar, one value per feature, a metric
        matrix ``L``, or ``"scott"`` / ``"silverman"``. Default 1.0.
    engine : str, default "auto"
        ``"auto"`` picks one (:func:`explain` says which and why), or one of ``"sweep"``,
        ``"neighbors"``, ``"pruned"``, ``"compiled"``, ``"fused"``, ``"streamed"``,
        ``"autograd"``, ``"dense"``. ``"dask"`` runs in-memory inputs in chunks on the
        current Dask scheduler and returns the caller's kind; it is chosen for Dask
        inputs, where any other name is the in-memory engine each block task runs.
        With ``tolerance``, ``"fgt"`` (the fast Gauss transform) and ``"binned"``
        (linear binning and FFT) name a certified method.
    return_lse : bool, default False
        Also return ``log sum_j K(q, k_j)`` per query, so partial results merge.
    empty : {"raise", "nan", "nearest"}, default "raise"
        Policy for a query whose visible keys carry no weight.
    normalize : bool, default True
        Divide by ``sum_j K(q, k_j)`` (the weighted mean). ``False`` gives the
        weighted sum ``sum_j K(q, k_j) v_j`` (0 for a query that sees no
        weight; ``empty`` is then unused). Signed kernels such as
        :class:`~nadaraya.kernels.linear.LinearKernel` are summed in the
        weight domain; with ``normalize=True`` they divide by the signed row
        sum and a zero sum is an empty row.
    tolerance : float in (0, 1) or None, default None
        None computes the sums exactly (up to rounding). A number ``t`` lets
        the engine use a method whose proven bound keeps every output within
        ``t * max_j |v_jc|`` of the exact one, column by column ``c`` (the
        largest magnitude of that column over all keys; a column of zeros
        stays exactly zero). The fast Gauss transform (Gaussian kernels, up to
        6 kernel coordinates, ``t >= 1e-12``, on the CPU) and binned sums with
        FFT (radial kernels but the uniform, in 1 or 2 coordinates, on the CPU
        or a CUDA device) return ``total' = sum_j K`` and ``acc' = sum_j K v_j``
        with proven absolute bounds ``e_t`` and ``e_c``, rounding included;
        the mean ``acc' / total'`` then differs from the
        exact one by at most ``(e_c + |acc' / total'| e_t) / (total' - e_t)``,
        so the denominator's error enters both through the output's size and
        through the smallest ``total`` it allows. Each query's bound is
        checked, and a query it does not prove (one far from every key, whose
        tiny ``total`` the bounds cannot resolve) is computed again by the
        exact engines. A method runs only where it is cheaper than the exact
        engine (:func:`explain` names the method, its parameters and its
        bound, or why each method was refused). With ``normalize=False`` each
        sum ends within ``t * max_j |v_jc| * sum_j K``; the log-sum of
        ``return_lse`` within ``t``. The bound is on the sums of the points as
        the input's dtype holds them: in float32 the points are scaled by the
        bandwidth in float32, so the exact float32 engines' own error (a few
        times 1e-7 of ``max |v|``) comes on top of ``t``; pass float64 inputs
        when a tolerance below 1e-6 must hold against the float64 result.
        (The 1-D sweeps of the Laplacian family and the compact kernels need
        no tolerance: they are exact engines, chosen with or without one.)
    approximate : {"random-features"}, RandomFeatures or None, default None
        Opt in to positive random features (FAVOR+) for exp-dot kernels
        (``"softmax"``, and the Gaussian through its key bias) in any dimension:
        ``O((n + m) r)`` for ``r`` features instead of ``O(n m)``. Their
        error is statistical (an estimated standard error, which
        :func:`explain` states), never a proven bound, so they are never
        chosen for ``tolerance`` and passing both is refused.
        ``RandomFeatures(features=r, seed=s)`` sets the number of features
        (default 256) and the seed. Not available on Dask inputs.

    Returns
    -------
    out : ndarray or torch.Tensor of shape (m, p), or (m,) for 1-D values
        Same kind (and device) as the inputs; a lazy Dask array, chunked as the
        queries, when any input is a Dask array (:mod:`nadaraya.engine.dask`).
    lse : ndarray or torch.Tensor of shape (m,)
        Only with ``return_lse=True``.

    Notes
    -----
    Products of weights and values are summed in float64 block by block, so
    a float32 result does not drift with the number of keys. Each value
    column is smoothed divided by a power of two that brings it into
    ``(-1, 1)`` and multiplied back (exactly), so values near the dtype's
    largest number give their weighted mean and subnormal values are rounded
    once. A weighted sum (``normalize=False``) beyond the dtype's range
    raises :class:`~nadaraya.NadarayaError`. (When gradients are recorded
    the values are used as given.)

    Examples
    --------
    >>> import numpy as np, nadaraya
    >>> x = np.linspace(0, 6, 50); y = 2 * np.sin(x)
    >>> fit = nadaraya.smooth(x, x, y, "gaussian", bandwidth=0.3)
    >>> fit.shape
    (50,)
    """
    check_policy(empty)
    if engine == "dask" or _any_dask(queries, keys, values):
        return _dask_smooth(queries, keys, values, kernel, mask, bandwidth=bandwidth,
                            engine=engine, return_lse=return_lse, empty=empty,
                            normalize=normalize, tolerance=tolerance, approximate=approximate)
    queries, keys, values = _inputs(queries, keys, values)
    job, squeeze = build_job(queries, keys, values, kernel, mask, bandwidth)
    job.normalize = bool(normalize)
    check_options(job, return_lse)
    tol = check_tolerance(tolerance)
    _check_engine(engine, tol)
    features = _random_features(approximate, tol, engine)
    scale_values(job)
    if features is not None:
        _check_features(features, job)
        sums, info = features.sums(job)
        state = features_state(sums, info["offset"], job.dtype)
    elif tol is None:
        chosen: Engine = choose(job, engine, describe=False)[0]
        state = chosen.run(job)
    else:
        choice = choose_certified(job, tol, engine, describe=False)[0]
        if choice.method is not None:
            state = certified_state(job, choice.method, tol, lse=return_lse)[0]
        else:
            state = choice.engine.run(job)
    out = finish(job, state, empty)
    kind = kind_of(values)
    result = to_caller(out[:, 0] if squeeze else out, kind)
    if return_lse:
        return result, to_caller(state.lse, kind)
    return result


def explain(
    queries: Any,
    keys: Any,
    values: Any = None,
    kernel: str | Kernel | Any = "gaussian",
    mask: Mask | Any = None,
    *,
    bandwidth: Any = None,
    engine: str = "auto",
    normalize: bool = True,
    tolerance: float | None = None,
    approximate: str | RandomFeatures | None = None,
) -> Explanation:
    """Say which engine :func:`smooth` would use for these inputs, and why.

    Nothing is computed beyond binding the kernel and mask to the inputs.

    Parameters
    ----------
    queries : array-like or torch.Tensor of shape (m, d) or (m,)
        As in :func:`smooth`.
    keys : array-like or torch.Tensor of shape (n, d) or (n,)
        As in :func:`smooth`.
    values : array-like or torch.Tensor of shape (n, p) or (n,), optional
        As in :func:`smooth`; None explains the kernel sums alone (no value columns).
    kernel : str, Kernel or callable, default "gaussian"
        As in :func:`smooth`.
    mask : Mask, bool matrix, sparse matrix, callable or str, optional
        As in :func:`smooth`.
    bandwidth : float, array, str, optional
        As in :func:`smooth`.
    engine : str, default "auto"
        As in :func:`smooth`: a named engine is explained, or refused with the reason.
    normalize : bool, default True
        As in :func:`smooth`.
    tolerance : float in (0, 1) or None, default None
        As in :func:`smooth`: the chosen certified method's plan (expansion
        order, cell or grid size) and bound, or each method's reason for refusing.
    approximate : {"random-features"}, RandomFeatures or None, default None
        As in :func:`smooth`: the random features' plan and their error statement.

    Returns
    -------
    Explanation
        ``.engine`` is the chosen engine; ``.reasons`` says, for each engine,
        why it was or was not chosen; ``str()`` prints both.

    Examples
    --------
    >>> import numpy as np, nadaraya
    >>> x = np.linspace(0, 1, 10)
    >>> nadaraya.explain(x, x, x, bandwidth=0.1, engine="fused").engine
    'fused'
    >>> nadaraya.explain(x, x, x, bandwidth=0.1, tolerance=1e-8).reasons["fgt"].startswith("could")
    True
    """
    if engine == "dask" or _any_dask(queries, keys, values):
        from .dask import dask_explain

        tol = _check_dask(engine, tolerance, approximate)
        return dask_explain(queries, keys, values, kernel, mask, bandwidth=bandwidth,
                            engine=engine, normalize=normalize, tolerance=tol)
    job, _ = build_job(queries, keys, values, kernel, mask, bandwidth)
    job.normalize = bool(normalize)
    tol = check_tolerance(tolerance)
    _check_engine(engine, tol)
    features = _random_features(approximate, tol, engine)
    if features is not None:
        _check_features(features, job)
        exact = choose(job, "auto")[1]
        reasons = {"random-features": "chosen: requested by the caller (approximate=)",
                   **{name: f"exact; not used (approximate={approximate!r})"
                      for name in exact.reasons}}
        return Explanation("random-features", reasons, exact.detail, features.plan(job))
    if tol is None:
        return choose(job, engine)[1]
    return choose_certified(job, tol, engine)[1]


def _any_dask(*arrays: Any) -> bool:
    """Whether an input is a Dask collection (without importing Dask)."""
    from .dask._detect import any_dask

    return any_dask(*arrays)


def _check_dask(engine: str, tolerance: Any, approximate: Any) -> float | None:
    """The checked tolerance for the Dask engine; refuses what it cannot run."""
    tol = check_tolerance(tolerance)
    if approximate is not None:
        raise NadarayaError(
            f"approximate={approximate!r} is not available on Dask inputs (its random "
            "features would differ between chunks). Use tolerance= for a proven bound, or "
            "compute the inputs and smooth in memory."
        )
    if engine not in ("auto", "dask"):
        _check_engine(engine, tol)
        if engine not in METHODS:
            get_engine(engine)
    return tol


def _dask_smooth(queries: Any, keys: Any, values: Any, kernel: Any, mask: Any, *,
                 bandwidth: Any, engine: str, return_lse: bool, empty: str, normalize: bool,
                 tolerance: Any, approximate: Any) -> Any:
    from .dask import dask_smooth

    tol = _check_dask(engine, tolerance, approximate)
    return dask_smooth(queries, keys, values, kernel, mask, bandwidth=bandwidth, engine=engine,
                       return_lse=return_lse, empty=empty, normalize=normalize, tolerance=tol)


def _random_features(approximate: Any, tolerance: float | None,
                     engine: str) -> RandomFeatures | None:
    """The random-features method ``approximate`` asks for, or None."""
    if approximate is None:
        return None
    if isinstance(approximate, str) and approximate == "random-features":
        features = RandomFeatures()
    elif isinstance(approximate, RandomFeatures):
        features = approximate
    else:
        raise NadarayaError(
            f"approximate must be None, 'random-features' or a RandomFeatures(features=, "
            f"seed=) object; got {approximate!r}."
        )
    if tolerance is not None:
        raise NadarayaError(
            "approximate='random-features' gives an estimated error, not a proven bound, so "
            "it cannot honour tolerance=; pass one of the two."
        )
    if engine != "auto":
        raise NadarayaError(
            f"approximate= chooses the method itself; leave engine='auto' (got {engine!r})."
        )
    return features


def _check_features(features: RandomFeatures, job: Job) -> None:
    why = features.refuse(job)
    if why is not None:
        raise NadarayaError(f"approximate='random-features' cannot run this problem: {why}.")


def _check_engine(engine: str, tolerance: float | None) -> None:
    if tolerance is None and engine in METHODS:
        raise NadarayaError(
            f"engine={engine!r} approximates the sums within a tolerance; "
            "give tolerance= (for example 1e-8), or use engine='auto' for exact sums."
        )


def weights(
    queries: Any,
    keys: Any,
    kernel: str | Kernel | Any = "gaussian",
    mask: Mask | Any = None,
    *,
    bandwidth: Any = None,
    empty: str = "raise",
) -> Any:
    """Rows of the smoother matrix: ``W[i, j]`` is key ``j``'s weight for query ``i``.

    For plots and small problems: it is an ``(m, n)`` array, so it is refused
    beyond the working-memory budget (raise it with
    ``nadaraya.config_context(working_memory=...)``).

    Parameters
    ----------
    queries, keys, kernel, mask, bandwidth, empty
        As in :func:`smooth`.

    Returns
    -------
    ndarray or torch.Tensor of shape (m, n)
        Each row is non-negative and sums to one.

    Examples
    --------
    >>> import numpy as np, nadaraya
    >>> x = np.linspace(0, 1, 5)
    >>> W = nadaraya.weights(x, x, bandwidth=0.2)
    >>> np.allclose(W.sum(1), 1)
    True
    """
    check_policy(empty)
    queries, keys, _ = _inputs(queries, keys, None)
    job, _ = build_job(queries, keys, None, kernel, mask, bandwidth)
    need = job.m * job.n * job.dtype.itemsize / 2**20
    budget = get_config().working_memory
    if need > budget:
        raise NadarayaError(
            f"weights would need an ({job.m}, {job.n}) array, {need:.0f} MiB, over the "
            f"working-memory budget of {budget:.0f} MiB. Raise it with "
            f"nadaraya.config_context(working_memory={int(need) + 1}) or the "
            "NADARAYA_WORKING_MEMORY environment variable, or ask for fewer queries; "
            "use nadaraya.smooth for the smoothed values themselves."
        )
    w, lse = dense_weights(job, slice(0, job.m))
    rows = torch.nonzero(torch.isinf(lse)).flatten()
    if rows.numel():
        if empty == "raise":
            from ._empty import _describe

            raise NadarayaError(
                f"{_describe(rows, job.m)} see no key with positive weight. Widen the "
                "bandwidth, relax the mask, or pass empty='nan' or empty='nearest'."
            )
        if empty == "nan":
            w[rows] = torch.nan
        else:
            eye = torch.eye(job.n, dtype=job.dtype, device=job.device)
            job.values = eye
            near, lost = _nearest(job, rows)
            if lost.numel():
                raise NadarayaError("empty='nearest': the mask hides every key from "
                                    f"{lost.numel()} queries; relax it or pass empty='nan'.")
            w[rows] = near
    return to_caller(w, kind_of(queries))
