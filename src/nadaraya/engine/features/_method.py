"""The random-feature method: refusals, plan, and the entry point."""

from __future__ import annotations

import math
from typing import Any

import torch

from ..._errors import NadarayaError
from .._job import Job
from .._state import SmoothState
from ..certified import Sums
from ._draw import check_features, check_seed, orthogonal_gaussian
from ._estimate import (
    ERROR_STATEMENT,
    block_rows,
    error_summary,
    feature_sums,
    over_budget,
    sd_bound,
)
from ._form import exp_dot_form, unsupported

__all__ = ["RandomFeatures", "as_state", "random_feature_sums"]

_DEVICES = ("cpu", "cuda")


def _refuse(job: Job) -> str | None:
    if job.mask is not None:
        return (f"random features sum over every key; the mask {job.mask.mask!r} is not "
                "supported (use an exact engine)")
    if job.device.type not in _DEVICES:
        return f"random features run on CPU or CUDA; the data is on {job.device.type}"
    return unsupported(job.kernel)


def _width(job: Job) -> int:
    return job.kernel.q.shape[1]


def random_feature_sums(job: Job, features: int = 256,
                        seed: int | None = None) -> tuple[Sums, dict[str, Any]]:
    """Both kernel sums of ``job`` from positive orthogonal random features (FAVOR+).

    An opt-in approximation for exp-dot kernels (softmax attention's
    :class:`~nadaraya.kernels.ExpDot`, the :class:`~nadaraya.kernels.Gaussian`
    through its key bias, and their products on column groups), unmasked, in
    ``O((n + m) r (e + p))`` operations, computed in float64 on the job's
    device. The ``(n + m) x r`` features are formed block by block within
    the working-memory budget, never whole; beyond the results, memory holds
    the projections and the feature sums (``O(r (e + p))``).

    Its error is **statistical, not proven**: ``total_err`` and ``acc_err``
    are estimated standard errors (a confidence statement), not bounds. The
    certified dispatcher never chooses it for a ``tolerance``.

    Parameters
    ----------
    job : Job
        Values ``(n, p)``; kernel points ``(m, e)`` and ``(n, e)``; no mask.
    features : int, default 256
        Number of random features ``r`` (>= 2). The error falls like
        ``1 / sqrt(r)``.
    seed : int or None
        Seed of the projections; None draws a fresh one, reported in the
        returned dict so the result can be reproduced.

    Returns
    -------
    sums : Sums
        ``total (m,)``, ``acc (m, p)``, ``total_err (m,)``, ``acc_err (m, p)``,
        float64, all **divided by** ``exp(offset)``: the estimate of
        ``sum_j K(q, k_j)`` is ``exp(offset) * total``. The scaled form keeps
        attention scores of any size finite (an absolute sum overflows
        float64 beyond scores of about 709).
    info : dict
        ``offset`` (tensor ``(m,)``, float64, detached); ``mean_err``
        (tensor ``(m, p)``: estimated standard error of the means
        ``acc / total``, by the delta method; the errors of ``acc`` and
        ``total`` are correlated and largely cancel in the ratio, so this is
        far smaller than what the two errors give apart); ``relative_sd_bound``
        (tensor ``(m,)``: a proven bound, over the draw of the features, on
        the standard deviation of ``total`` relative to ``total``, and of
        ``acc`` relative to ``total * max|v|``; ``inf`` where it overflows);
        ``method``, ``features``, ``seed``, ``orthogonal_block`` (rows per
        orthogonal block), ``balance`` (the factor applied to the query dot
        vectors), ``error`` (the statement of what the errors mean),
        ``relative_error_median`` and ``relative_error_max`` (of
        ``total_err / total``), ``sd_bound_median`` and ``sd_bound_max``.

    Raises
    ------
    NadarayaError
        When the job cannot be served (the reason says why), or for an
        invalid ``features`` or ``seed``.

    Notes
    -----
    Range: every prepared point with a finite squared norm below ``1e290``
    (about ``|x| < 1e145``): the log-features ``w.x - ||x||^2 / 2`` are then
    finite and at most ``||w||^2 / 2``, and with the per-feature and
    per-query stabilizers no sum overflows (see
    :mod:`nadaraya.engine.features._estimate`). The estimate is accurate
    only where the balanced dot vectors are short: the relative spread of one
    feature is ``sqrt(exp(||a + b||^2) - 1)``. Gradients flow to the points
    and values that record them (they are those of the estimate returned).

    Examples
    --------
    >>> import torch, nadaraya
    >>> from nadaraya.engine._api import build_job
    >>> x = torch.randn(50, 4, dtype=torch.float64) / 2
    >>> job, _ = build_job(x, x, x[:, :1], "softmax", None, None)
    >>> sums, info = random_feature_sums(job, features=64, seed=0)
    >>> sums.acc.shape, info["seed"]
    (torch.Size([50, 1]), 0)
    """
    r = check_features(features)
    seed = check_seed(seed)
    why = _refuse(job) or over_budget(r, _width(job), job.p)
    if why is not None:
        raise NadarayaError(f"random features cannot run this problem: {why}.")
    form = exp_dot_form(job.kernel)
    w = orthogonal_gaussian(r, form.a.shape[1], seed, job.device)
    est = feature_sums(form, job.values.to(torch.float64), w)
    bound = sd_bound(est.spread, r)
    info = {"method": RandomFeatures.name, "features": r, "seed": seed,
            "orthogonal_block": max(1, min(r, form.a.shape[1])), "balance": form.balance,
            "error": ERROR_STATEMENT, "offset": est.offset, "mean_err": est.mean_err,
            "relative_sd_bound": bound, **error_summary(est.sums, bound)}
    return est.sums, info


def as_state(sums: Sums, offset: torch.Tensor, dtype: torch.dtype) -> SmoothState:
    """The estimate as the engines' log-sum-exp state, in ``dtype``.

    Parameters
    ----------
    sums : Sums
        From :func:`random_feature_sums`, divided by ``exp(offset)``.
    offset : torch.Tensor of shape (m,)
        ``info["offset"]``.
    dtype : torch.dtype
        The job's dtype.
    """
    return SmoothState(offset.to(dtype), sums.total.to(dtype), sums.acc.to(dtype))


class RandomFeatures:
    """Positive orthogonal random features for exp-dot kernels (opt-in, statistical).

    Parameters
    ----------
    features : int, default 256
        Number of random features (>= 2).
    seed : int or None
        Seed of the projections; None draws one now, so :meth:`plan` and
        :meth:`sums` of one object use the same features.

    Examples
    --------
    >>> RandomFeatures(features=128, seed=1).name
    'random-features'
    """

    name = "random-features"

    def __init__(self, features: int = 256, seed: int | None = None) -> None:
        self.features = check_features(features)
        self.seed = check_seed(seed)

    def refuse(self, job: Job, tolerance: float | None = None) -> str | None:
        """Why this method cannot serve ``job`` (None if it can).

        A ``tolerance`` is always refused: the error is estimated, not proven.

        Parameters
        ----------
        job : Job
            The bound problem: kernel and points, mask, values and sizes.
        tolerance : float or None
            Always refused when given: the error is estimated, not proven.
        """
        if tolerance is not None:
            return ("random features give a statistical error estimate, not a proven bound, "
                    "so they are never chosen for a tolerance; ask for them with "
                    "approximate='random-features'")
        return _refuse(job) or over_budget(self.features, _width(job), job.p)

    def cost(self, job: Job, tolerance: float | None = None) -> float:
        """Rough operation count, comparable with ``m * n`` of the exact engines.

        Parameters
        ----------
        job : Job
            The bound problem: kernel and points, mask, values and sizes.
        tolerance : float or None
            Unused: the signature every kernel-sum method shares.
        """
        return float((job.m + job.n) * self.features * (_width(job) + job.p + 2))

    def plan(self, job: Job, tolerance: float | None = None) -> dict[str, Any]:
        """The parameters for ``job``, for ``explain()`` (nothing is computed).

        Parameters
        ----------
        job : Job
            The bound problem: kernel and points, mask, values and sizes.
        tolerance : float or None
            Unused: the signature every kernel-sum method shares.
        """
        e = _width(job)
        return {"method": self.name, "features": self.features, "seed": self.seed,
                "orthogonal_block": max(1, min(self.features, e)),
                "blocks": math.ceil(self.features / max(e, 1)),
                "rows_per_block": block_rows(self.features, job.p),
                "error": ERROR_STATEMENT}

    def sums(self, job: Job, tolerance: float | None = None) -> tuple[Sums, dict[str, Any]]:
        """:func:`random_feature_sums` with this object's features and seed.

        Parameters
        ----------
        job : Job
            The bound problem: kernel and points, mask, values and sizes.
        tolerance : float or None
            Always refused when given: the error is estimated, not proven.
        """
        why = self.refuse(job, tolerance)
        if why is not None:
            raise NadarayaError(f"random features cannot run this problem: {why}.")
        return random_feature_sums(job, self.features, self.seed)
