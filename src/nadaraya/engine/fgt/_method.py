"""The fast Gauss transform as a certified method: ``"fgt"``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ..._errors import NadarayaError
from ...kernels import Gaussian, Kernel, ProductKernel
from .._job import Job
from ..certified import Sums, block_rows
from . import _native
from ._basis import Basis
from ._boxes import bin_points
from ._plan import SIDES, Params, Survey, choose, survey
from ._transform import Outcome, Prepared, prepare, transform

__all__ = ["MAX_DIMENSIONS", "MIN_TOLERANCE", "FastGaussTransform"]

MAX_DIMENSIONS = 6
# Below this the rounding of the direct sums alone (about 1e-14 of each sum) leaves
# too little of the tolerance for the rest.
MIN_TOLERANCE = 1e-12
# Modelled nanoseconds of one unit of the exact engines' cost (m n (p + 4)).
_NS_PER_OPERATION = 0.25
# The planner models fgt.c alone; around it each key and query costs about this much more
# (sorting keys into boxes, scattering the results back, the value ranges): the CPU time
# of the whole method at n = m = 1e6 and 3e6 in one dimension, 2 cores, less the model.
_BOOKKEEPING_NS = 30.0
# Farthest a point may lie from the keys' median, in boxes of the smallest side.
_MAX_SPREAD = 2.0**45
_CUT_OFF = ("cut-off = uncovered |weights| within 3^d blocks of 2K boxes * exp(-{r:g}^2 / 2) "
            "+ the rest * exp(-(2 {r:g})^2 / 2)")
_BOUNDS = {
    "hermite": ("per query: E * W + cut-off + direct rounding; E = k^d ((H+T)^d - H^d + "
                "gamma_N H^d) (Cramer's k, head H and tail T of the Hermite-Taylor double "
                "series), W = sum over key boxes of |weights| * exp(-|box offset|^2 / 4); "
                + _CUT_OFF + " (nadaraya.engine.fgt._bounds)"),
    "chebyshev": ("per query: E * W + cut-off + direct rounding; E = (1 + L^d)(1 + ... + "
                  "L^(d-1)) omega k / sqrt(p!) + gamma_N L^(2d) + shift (Lebesgue constant L, "
                  "node polynomial omega, Cramer's k), W = sum over key boxes of |weights| * "
                  "exp(-gap^2 / 4); " + _CUT_OFF + " (nadaraya.engine.fgt._chebyshev)"),
    "direct": ("per query: direct rounding (exp within 6e-15, sums in 8 lanes) + " + _CUT_OFF
               + " (nadaraya.engine.fgt._bounds)"),
}


def _is_gaussian(kernel: Kernel) -> bool:
    if isinstance(kernel, ProductKernel):
        return all(_is_gaussian(part) for part in kernel.parts)
    return isinstance(kernel, Gaussian)


def _points(job: Job) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    q = job.kernel.q.detach().to(torch.float64).contiguous()
    return (q, *_keys(job))


def _keys(job: Job) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys and values as float64, contiguous (the job's own tensors when they are)."""
    k = job.kernel.k.detach().to(torch.float64).contiguous()
    v = job.values.detach().to(torch.float64).contiguous()
    return k, v


class PreparedQueries:
    """The transform prepared for a job's queries: their sums, block by block.

    Parameters
    ----------
    ready : Prepared
        The key side and the target boxes of every query.
    queries : torch.Tensor of shape (m, d)
        The job's prepared queries (any float dtype).
    """

    def __init__(self, ready: Prepared, queries: torch.Tensor) -> None:
        self.ready, self.queries = ready, queries

    def evaluate(self, rows: slice) -> Sums:
        """The sums and bounds of the queries ``rows`` (a slice of the job's queries)."""
        block = self.queries[rows].to(torch.float64).contiguous()
        return self.ready.evaluate(block)


class FastGaussTransform:
    """Gaussian kernel sums by the fast Gauss transform, with a proven bound per query.

    Keys and queries are sorted into boxes of a uniform grid (occupied boxes
    only) of side about one bandwidth. A box of keys is summarized by a tensor
    of ``p^d`` coefficients per value column, which ``d`` separable passes
    carry to every box of queries within ``K`` boxes; each query evaluates one
    polynomial. The coefficients are Hermite moments translated into Taylor
    coefficients (Greengard and Strain) or, where that is cheaper for the
    same bound (it usually is, by a few orders), weights on Chebyshev nodes
    translated node to node and interpolated. Where boxes hold too few points
    for that to pay, pairs are summed directly. The order ``p``, the side and
    ``K`` follow from the tolerance by the truncation or interpolation bound
    (Cramér's inequality for Hermite functions) and the cut-off, so that a
    query amid keys of uniform density is bounded by about ``tolerance / 8``
    of its sums; each query's bound (truncation, cut-off and float64
    rounding, derived in :mod:`nadaraya.engine.fgt._bounds` and
    :mod:`nadaraya.engine.fgt._chebyshev`) follows the keys around it.

    Serves the Gaussian kernel (scalar, per-feature or metric bandwidth;
    products of Gaussians) in 1 to 6 kernel coordinates, on the CPU, without
    mask or gradients, with the compiled loops of ``fgt.c``.

    Examples
    --------
    >>> import torch
    >>> from nadaraya.engine._api import build_job
    >>> from nadaraya.engine.fgt import FastGaussTransform
    >>> x = torch.linspace(0, 6, 2000, dtype=torch.float64)
    >>> job, _ = build_job(x, x, torch.sin(x), "gaussian", None, 0.3)
    >>> fgt = FastGaussTransform()
    >>> s = fgt.sums(job, 1e-10) if fgt.refuse(job, 1e-10) is None else None
    >>> s is None or bool((s.total_err < 1e-10 * s.total).all())
    True
    """

    name = "fgt"

    # -- the Method protocol -----------------------------------------------------
    def refuse(self, job: Job, tolerance: float) -> str | None:
        """Why the transform cannot serve ``job`` at ``tolerance`` (None if it can).

        Parameters
        ----------
        job : Job
            The bound problem: kernel and points, mask, values and sizes.
        tolerance : float
            The caller's tolerance, already checked: a float in (0, 1).
        """
        return job.kernel.cached(f"fgt-refuse-{tolerance!r}", lambda: self._refuse(job, tolerance))

    def _refuse(self, job: Job, tolerance: float) -> str | None:
        kernel = job.kernel.kernel
        if not _is_gaussian(kernel):
            return f"it sums Gaussian kernels only; the kernel is {kernel!r}"
        if job.mask is not None:
            return "a mask hides keys from queries; the transform sums over every key"
        if job.requires_grad:
            return "inputs require grad; the transform has no gradient (the dense engine has)"
        if job.device.type != "cpu":
            return f"it runs on the CPU; the job is on {job.device}"
        d = job.kernel.q.shape[1]
        if d == 0:
            return "the kernel reads no coordinates"
        if d > MAX_DIMENSIONS:
            return (f"the kernel has {d} coordinates; expansions stop paying beyond "
                    f"{MAX_DIMENSIONS} (p^d terms per point)")
        if _native.load() is None:
            return _native.unavailable() or "its compiled loops are unavailable"
        q, k, _ = _points(job)
        spread = max(float(np.abs(np.stack(_native.value_range(t))).max()) for t in (q, k))
        if spread / min(SIDES) >= _MAX_SPREAD:
            return (f"the points lie up to {spread:.3g} bandwidths from the keys' median, "
                    f"beyond the {_MAX_SPREAD:.0e} boxes its grid indexes exactly")
        if tolerance < MIN_TOLERANCE:
            return (f"tolerance {tolerance:g} is below what its float64 rounding bounds prove "
                    f"(it takes {MIN_TOLERANCE:g} and above)")
        return None

    def cost(self, job: Job, tolerance: float) -> float:
        """Modelled run time in units of the exact engines' cost (``m n (p + 4)``).

        Parameters
        ----------
        job : Job
            The bound problem: kernel and points, mask, values and sizes.
        tolerance : float
            The caller's tolerance, already checked: a float in (0, 1).
        """
        if self.refuse(job, tolerance) is not None:
            return math.inf
        seconds = self._params(job, tolerance).seconds + (job.n + job.m) * _BOOKKEEPING_NS * 1e-9
        return seconds * 1e9 / _NS_PER_OPERATION

    def plan(self, job: Job, tolerance: float) -> dict[str, Any]:
        """Expansion, order, box side, reach and radius, occupied boxes (keys, queries), bound.

        For ``explain()``; ``E`` is the expansion's bound per unit of weighted mass and
        ``modelled_seconds`` the planner's time model (one thread).

        Parameters
        ----------
        job : Job
            The bound problem: kernel and points, mask, values and sizes.
        tolerance : float
            The caller's tolerance, already checked: a float in (0, 1).
        """
        why = self.refuse(job, tolerance)
        if why is not None:
            return {"method": self.name, "refused": why}
        plan = self._params(job, tolerance)
        q, k, _ = _points(job)
        boxes = (bin_points(k, plan.side).n_boxes, bin_points(q, plan.side).n_boxes)
        return {
            "method": self.name,
            "expansion": (Basis(plan.basis).description if plan.order
                          else "none: direct sums are cheaper"),
            "order": plan.order,
            "box_side": plan.side,
            "reach_boxes": plan.reach,
            "radius": plan.radius,
            "boxes": boxes,
            "bound": _BOUNDS[plan.basis if plan.order else "direct"].format(r=plan.radius),
            "E": plan.factor,
            "modelled_seconds": plan.seconds,
        }

    def sums(self, job: Job, tolerance: float) -> Sums:
        """Both sums for every query of ``job``, with their proven bounds.

        Parameters
        ----------
        job : Job
            The bound problem: kernel and points, mask, values and sizes.
        tolerance : float
            The caller's tolerance, already checked: a float in (0, 1).
        """
        return self.prepare(job, tolerance).evaluate(slice(0, job.m))

    def prepare(self, job: Job, tolerance: float) -> PreparedQueries:
        """The keys sorted and expanded once; :meth:`PreparedQueries.evaluate` serves query blocks.

        Memory: the keys' sorted copy, the expansions of the boxes, and
        ``O(block_rows(job))`` per block of queries (the queries are counted per box
        block by block, never sorted all at once).

        Parameters
        ----------
        job : Job
            The bound problem: kernel and points, mask, values and sizes.
        tolerance : float
            The caller's tolerance, already checked: a float in (0, 1).
        """
        self._check(job, tolerance)
        k, v = _keys(job)
        ready = prepare(job.kernel.q.detach(), k, v, self._params(job, tolerance),
                        rows=block_rows(job))
        return PreparedQueries(ready, job.kernel.q.detach())

    # -- helpers -------------------------------------------------------------------
    def run(self, job: Job, tolerance: float) -> Outcome:
        """:meth:`sums` with what the run did (boxes expanded, the factor ``E``).

        Parameters
        ----------
        job : Job
            The bound problem: kernel and points, mask, values and sizes.
        tolerance : float
            The caller's tolerance, already checked: a float in (0, 1).
        """
        self._check(job, tolerance)
        q, k, v = _points(job)
        return transform(q, k, v, self._params(job, tolerance))

    def _check(self, job: Job, tolerance: float) -> None:
        why = self.refuse(job, tolerance)
        if why is not None:
            raise NadarayaError(f"the fast Gauss transform (engine 'fgt') cannot run this job "
                                f"at tolerance={tolerance:g}: {why}. Use engine='auto'.")

    def _survey(self, job: Job) -> Survey:
        def make() -> Survey:
            q, k, _ = _points(job)
            return survey(q, k)

        return job.kernel.cached("fgt-survey", make)

    def _params(self, job: Job, tolerance: float) -> Params:
        return job.kernel.cached(f"fgt-plan-{tolerance!r}",
                                 lambda: choose(self._survey(job), job.n, job.m, job.p, tolerance))
