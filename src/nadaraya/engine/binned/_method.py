"""Linear binning with FFT convolution: the certified method ``"binned"``."""

from __future__ import annotations

import math
from typing import Any

import torch

from ..._config import get_config
from ..._errors import NadarayaError
from ...kernels import Uniform
from .._job import Job
from ..certified import Sums, block_rows
from ._bound import assemble, fft_rounding
from ._plan import Grid, make_grid
from ._profiles import PROFILES, Profile, profile_of
from ._transform import bin_keys, convolve, interpolate, kernel_quadrants, norms

__all__ = ["BinnedMethod"]

_U = 2.0**-53
# Modelled nanoseconds of one unit of the exact engines' cost (m n (p + 4)), as
# the other certified methods count.
_NS_PER_OPERATION = 0.25
# A grid slower than the exact sums is refused once it takes longer than this
# (a second, modelled): below, binning on request costs little either way.
_SLOW_NS = 1e9


class BinnedMethod:
    """Kernel sums by linear binning and FFT convolution, with a proven bound per query.

    Keys (weights 1 and each value column) are spread linearly over a
    regular grid of cell ``delta`` in kernel coordinates, convolved with the
    kernel sampled on the grid (truncated where its tail no longer matters)
    by real FFTs, and read off at the queries by linear interpolation, as
    KernSmooth and KDEpy do, in ``O(n + m + N log N)`` for ``N`` grid nodes.
    The same FFT convolves the weight masses with an envelope kernel that
    bounds every error term offset by offset (:mod:`._bound` derives it), so
    each query's bound follows its own neighbourhood, not ``n``.

    Serves radial kernels with a bounded interpolation error (Gaussian,
    Laplacian, Cauchy, Epanechnikov, tricube) in 1 or 2 kernel dimensions, on
    the CPU or a CUDA device (where the data is: binning by ``index_add_``,
    cuFFT, the bounds assembled there), without mask or gradients. The cell
    is the largest whose bound for a query amid keys of uniform density is
    ``tolerance / 4`` of its total; the grid's arrays count against
    ``working_memory``.

    Examples
    --------
    >>> import numpy as np, nadaraya
    >>> x = np.linspace(0, 6, 2000); y = np.sin(x)
    >>> fit = nadaraya.smooth(x, x, y, bandwidth=0.3, tolerance=1e-4, engine="binned")
    >>> bool(np.abs(fit - nadaraya.smooth(x, x, y, bandwidth=0.3)).max() < 1e-4)
    True
    """

    name = "binned"

    # -- the Method protocol ---------------------------------------------------
    def refuse(self, job: Job, tolerance: float) -> str | None:
        """Why binning cannot serve ``job`` at ``tolerance`` (None if it can).

        Parameters
        ----------
        job : Job
            The bound problem: kernel and points, mask, values and sizes.
        tolerance : float
            The caller's tolerance, already checked: a float in (0, 1).
        """
        why = self._unsupported(job, tolerance)
        if why is not None:
            return why
        grid = self._grid(job, tolerance)
        budget = get_config().working_memory * 2**20
        need = grid.memory(job.p)
        nodes = "x".join(str(n) if n < 10**7 else f"{float(n):.3g}" for n in grid.fft)
        if need > budget:
            return (f"the grid for tolerance {tolerance:g} has {nodes} nodes (cell "
                    f"{grid.delta:.3g} bandwidths): {need / 2**20:.3g} MiB, over working_memory "
                    f"({budget / 2**20:.0f} MiB); raise the tolerance or working_memory")
        exact = float(job.m) * job.n * (job.p + 4)
        cost = self.cost(job, tolerance)
        if cost > exact and cost * _NS_PER_OPERATION > _SLOW_NS:
            return (f"the grid for tolerance {tolerance:g} has {nodes} nodes: about "
                    f"{cost:.3g} operations, more than the exact sums ({exact:.3g})")
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
        if self._unsupported(job, tolerance) is not None:
            return math.inf
        return self._seconds(job, self._grid(job, tolerance)) * 1e9 / _NS_PER_OPERATION

    def plan(self, job: Job, tolerance: float) -> dict[str, Any]:
        """Grid, cell, truncation and the bound, for ``explain()``.

        Parameters
        ----------
        job : Job
            The bound problem: kernel and points, mask, values and sizes.
        tolerance : float
            The caller's tolerance, already checked: a float in (0, 1).
        """
        why = self._unsupported(job, tolerance)
        if why is not None:
            return {"method": self.name, "refused": why}
        grid = self._grid(job, tolerance)
        return {
            "method": self.name,
            "kernel": profile_of(job.kernel.kernel).name,
            "dimensions": grid.d,
            "cell": grid.delta,
            "grid": grid.nodes,
            "fft": grid.fft,
            "truncation_radius": grid.radius,
            "memory_mib": grid.memory(job.p) / 2**20,
            "bulk_bound": grid.ratio,
            "bound": ("per query: interpolated (weight masses * E) + FFT rounding + truncated "
                      "tail; E(s) = 2 min(d (cell^2/8 max|K''| + cell/4 kink jumps), "
                      "sqrt(d) cell max|K'|) over the offsets of two cells, plus rounding "
                      "(nadaraya.engine.binned._bound)"),
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

    def prepare(self, job: Job, tolerance: float) -> PreparedGrid:
        """The keys binned and convolved once; :meth:`PreparedGrid.evaluate` reads query blocks.

        Memory: the grid's arrays and ``O(block_rows(job))`` per block of keys
        or queries (the keys are binned a block at a time).

        Parameters
        ----------
        job : Job
            The bound problem: kernel and points, mask, values and sizes.
        tolerance : float
            The caller's tolerance, already checked: a float in (0, 1).
        """
        why = self._unsupported(job, tolerance)
        if why is not None:
            raise NadarayaError(f"engine='binned' cannot run this job: {why}. Use an exact "
                                "engine (engine='auto' without tolerance).")
        profile = self._profile(job)
        grid = self._grid(job, tolerance)
        keys = job.kernel.k.detach().to(torch.float64)
        values = job.values.detach().to(torch.float64)
        workers = max(1, torch.get_num_threads())

        masses, crowd = bin_keys(grid, keys, values,
                                 rows=max(block_rows(job), 4 * grid.size))
        mass_rel = (crowd + 2**grid.d + 8) * _U * 1.01
        kernel, env = kernel_quadrants(profile, grid, mass_rel)
        nodes = convolve(grid, masses, kernel, env, workers)
        sizes = norms(kernel)
        rounding = [fft_rounding(masses[c], sizes, grid.size, grid.d)
                    for c in range(masses.shape[0])]
        nodes[-1].clamp_(min=0.0)
        nodes[-1] += fft_rounding(masses[0], norms(env), grid.size, grid.d)
        del masses

        # sum_j |v_jc| and max_j |v_jc| per column, in one pass each and no temporary
        magnitude = torch.linalg.vector_norm(values, ord=1, dim=0)
        vmax = torch.linalg.vector_norm(values, ord=math.inf, dim=0)
        weight = [float(job.n), *(magnitude * (1 + job.n * _U)).tolist()]
        box = self._extent(job)
        return PreparedGrid(profile, grid, nodes, box, weight, vmax.tolist(), rounding,
                            mass_rel, job.kernel.q)

    # -- helpers ---------------------------------------------------------------
    @staticmethod
    def _seconds(job: Job, grid: Grid) -> float:
        """Run time modelled from this machine class's measured costs per element."""
        corners, p = 2**grid.d, job.p
        size, quadrant = grid.size, math.prod(r + 1 for r in grid.reach)
        ns = (job.n * (8.0 + 6.0 * (p + 1) * corners)
              + job.m * (8.0 + 9.0 * (p + 2) * corners + 8.0 * (p + 1))
              + 0.6 * grid.d * (2 * p + 7) * size * math.log2(max(size, 2)) + 60.0 * quadrant)
        return ns * 1e-9

    @staticmethod
    def _profile(job: Job) -> Profile:
        profile = profile_of(job.kernel.kernel)
        assert profile is not None
        return profile

    def _grid(self, job: Job, tolerance: float) -> Grid:
        profile = self._profile(job)

        def build() -> Grid:
            low, high = (x.cpu().numpy() for x in self._extent(job))
            return make_grid(profile, low, high, tolerance)

        return job.kernel.cached(f"binned_grid:{tolerance!r}", build)

    @staticmethod
    def _extent(job: Job) -> tuple[torch.Tensor, torch.Tensor]:
        """The keys' smallest and largest coordinate per axis ``(d,)`` each, float64, once."""
        return job.kernel.cached("binned_extent", lambda: tuple(torch.aminmax(
            job.kernel.k.detach().to(torch.float64), dim=0)))

    @staticmethod
    def _unsupported(job: Job, tolerance: float) -> str | None:
        if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not (
                0.0 < tolerance < 1.0):
            return f"the tolerance must be a number in (0, 1); got {tolerance!r}"
        if job.mask is not None:
            return (f"binning sums over every key; the mask {job.mask.mask!r} is not "
                    "supported (use an exact engine)")
        if job.requires_grad:
            return "binned sums carry no gradients (use an exact engine to train)"
        if job.device.type not in ("cpu", "cuda"):
            return (f"binning runs on the CPU or a CUDA device (it sums in float64); the data "
                    f"is on {job.device.type}")
        kernel = job.kernel.kernel
        if isinstance(kernel, Uniform):
            return ("the uniform kernel jumps at r = 1, so linear interpolation of it does "
                    "not converge and binning has no useful bound")
        if profile_of(kernel) is None:
            names = ", ".join(p.name for p in PROFILES.values())
            return f"binning bounds the radial kernels {names}; got {kernel!r}"
        e = job.kernel.q.shape[1]
        if e not in (1, 2):
            return f"binning runs in 1 or 2 dimensions of kernel coordinates; got {e}"
        return None


class PreparedGrid:
    """The node sums of one job's keys: the sums of any block of its queries.

    Parameters are what :func:`~._bound.assemble` reads besides the queries;
    ``queries`` ``(m, d)`` are the job's prepared ones.
    """

    def __init__(self, profile: Profile, grid: Grid, nodes: torch.Tensor,
                 box: tuple[torch.Tensor, torch.Tensor], weight: list[float],
                 vmax: list[float], rounding: list[float], mass_rel: float,
                 queries: torch.Tensor) -> None:
        self.profile, self.grid, self.nodes, self.box = profile, grid, nodes, box
        self.weight, self.vmax, self.rounding, self.mass_rel = weight, vmax, rounding, mass_rel
        self.queries = queries

    def evaluate(self, rows: slice) -> Sums:
        """The sums and bounds of the queries ``rows`` (a slice of the job's queries).

        Each query's numbers depend on its own position only: any blocks give the
        same bits.
        """
        queries = self.queries[rows].detach().to(torch.float64)
        inside, at, whole = interpolate(self.grid, self.nodes, queries)
        return assemble(self.profile, self.grid, self.box, queries, self.weight, self.vmax,
                        self.rounding, self.mass_rel, inside, at, whole)
