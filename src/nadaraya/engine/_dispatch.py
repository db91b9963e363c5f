"""Choosing an engine, and saying why.

Every engine answers two questions about a job: ``refuse(job)`` (a reason it
cannot run it, or None) and ``cost(job)`` (a rough operation count). An engine
may also ``defer(job)``: it can run the job, but says why another is faster
(the automatic choice then passes over it; a caller who names it still gets
it). The automatic choice takes engines in order of preference and keeps the
first that accepts and does not defer; :class:`Explanation` records the verdict
on every engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from .._errors import NadarayaError
from ._job import Job
from ._state import SmoothState
from .unnormalized import adapt_engines

__all__ = ["ENGINES", "Engine", "Explanation", "choose", "get_engine"]


class Engine(Protocol):
    """What the dispatcher needs from an engine."""

    name: str

    def refuse(self, job: Job) -> str | None: ...

    def cost(self, job: Job) -> float: ...

    def run(self, job: Job) -> SmoothState: ...


def _engines() -> dict[str, Engine]:
    from .autograd import AutogradEngine
    from .compiled import CompiledEngine
    from .dense import DenseEngine
    from .fused import FusedEngine
    from .neighbors import NeighborsEngine
    from .pruned import PrunedEngine
    from .streamed import StreamedEngine
    from .sweep import SweepEngine

    return {e.name: e for e in (SweepEngine(), NeighborsEngine(), PrunedEngine(), CompiledEngine(),
                                FusedEngine(), StreamedEngine(), AutogradEngine(),
                                DenseEngine())}


ENGINES = ("sweep", "neighbors", "pruned", "compiled", "fused", "streamed", "autograd",
           "dense")


@dataclass
class Explanation:
    """Which engine runs a job and why each other engine does not.

    Attributes
    ----------
    engine : str
        The chosen engine's name.
    reasons : dict of str to str
        For every engine, why it was or was not chosen.
    detail : dict
        Facts about the job the choice rested on (sizes, dtype, device, kernel, mask).
    plan : dict
        For a certified method (``tolerance=``): its parameters (expansion order,
        cell size, grid size) and the bound they prove; empty for exact engines.
    """

    engine: str
    reasons: dict[str, str] = field(default_factory=dict)
    detail: dict[str, Any] = field(default_factory=dict)
    plan: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        facts = ", ".join(f"{k}={v}" for k, v in self.detail.items())
        lines = [f"engine: {self.engine}  ({facts})"]
        if self.plan:
            lines.append("  plan: " + ", ".join(f"{k}={v}" for k, v in self.plan.items()))
        lines += [f"  {name:<10} {why}" for name, why in self.reasons.items()]
        return "\n".join(lines)


def _defers(engine: Engine, job: Job) -> str | None:
    """The engine's reason to be passed over by the automatic choice (None: it is not)."""
    defer = getattr(engine, "defer", None)
    return None if defer is None else defer(job)


def get_engine(name: str) -> Engine:
    engines = _engines()
    try:
        return engines[name]
    except KeyError:
        raise NadarayaError(
            f"engine {name!r} is not known; use 'auto' or one of "
            f"{', '.join((*ENGINES, 'dask'))}."
        ) from None


def choose(job: Job, requested: str = "auto", *,
           describe: bool = True) -> tuple[Engine, Explanation]:
    """Pick the engine for ``job`` (or check the requested one) and explain.

    ``describe=False`` leaves ``Explanation.detail`` empty: formatting the
    kernel and mask costs more than choosing for small problems. It also
    asks only the engines up to the first that accepts (or the requested
    one): some checks (a spatial sort) cost a fast engine's whole run.
    """
    engines = adapt_engines(job, _engines())
    if not describe:
        if requested != "auto":
            engine = engines[get_engine(requested).name]
            _check_requested(requested, engine.refuse(job))
            return engine, Explanation(requested)
        for name in ENGINES:
            if engines[name].refuse(job) is None and _defers(engines[name], job) is None:
                return engines[name], Explanation(name)
    detail = {
        "m": job.m, "n": job.n, "p": job.p, "dtype": str(job.dtype).replace("torch.", ""),
        "device": str(job.device), "kernel": repr(job.kernel.kernel),
        "mask": repr(job.mask.mask) if job.mask is not None else None,
    } if describe else {}
    refusals = {name: engine.refuse(job) for name, engine in engines.items()}
    if requested != "auto":
        engine = engines[get_engine(requested).name]
        _check_requested(requested, refusals[engine.name])
        reasons = {
            name: ("chosen: requested by the caller" if name == requested else
                   f"not requested (engine={requested!r})" if refusals[name] is None else
                   f"cannot run: {refusals[name]}")
            for name in engines
        }
        return engine, Explanation(requested, reasons, detail)
    deferrals: dict[str, str | None] = {}
    for name in ENGINES:
        if refusals[name] is None:
            deferrals[name] = _defers(engines[name], job)
            if deferrals[name] is None:
                break
    chosen = next(name for name in ENGINES
                  if refusals[name] is None and deferrals.get(name) is None)
    reasons = {}
    for name in ENGINES:
        if name == chosen:
            reasons[name] = "chosen: first engine in order of preference that can run it"
        elif refusals[name] is not None:
            reasons[name] = f"cannot run: {refusals[name]}"
        elif deferrals.get(name) is not None:
            reasons[name] = f"could run, but {deferrals[name]}"
        else:
            reasons[name] = f"could run, but {chosen!r} is preferred for this problem"
    return engines[chosen], Explanation(chosen, reasons, detail)


def _check_requested(requested: str, why: str | None) -> None:
    if why is not None:
        raise NadarayaError(
            f"engine={requested!r} cannot run this problem: {why}. "
            "Use engine='auto' or see nadaraya.explain(...) for the engines that can."
        )
