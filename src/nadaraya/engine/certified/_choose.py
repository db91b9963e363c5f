"""Choosing between the certified methods and the exact engines, and saying why.

With a tolerance, each certified method either refuses the job (with its
reason) or gives a cost; the cheapest method runs when it costs less than
the exact engine the ordinary dispatcher would choose, else the exact
engine runs (its result is within every tolerance). A leave-one-out job
(queries are the keys, mask ``LeaveOneOut()``) is offered to the methods
without its mask: they compute the full sums and the runner subtracts each
point's own term (:mod:`._leave_out`).
"""

from __future__ import annotations

from typing import Any

from ..._errors import NadarayaError
from .._dispatch import Engine, Explanation, choose, get_engine
from .._job import Job
from ._leave_out import is_leave_one_out, unmasked
from ._sums import Method

__all__ = ["METHODS", "CertifiedChoice", "choose_certified", "get_methods"]

METHODS = ("fgt", "binned")


def get_methods() -> dict[str, Method]:
    """The certified methods, by name (imported when first needed)."""
    from ..binned import BinnedMethod
    from ..fgt import FastGaussTransform

    return {m.name: m for m in (FastGaussTransform(), BinnedMethod())}


class CertifiedChoice:
    """The outcome of :func:`choose_certified`: a method, or an exact engine.

    Parameters
    ----------
    method : Method or None
        The certified method to run, or None when an exact engine runs.
    engine : Engine or None
        The exact engine to run, or None when a method runs.
    """

    def __init__(self, method: Method | None, engine: Engine | None) -> None:
        self.method = method
        self.engine = engine


def choose_certified(job: Job, tolerance: float, requested: str = "auto", *,
                     describe: bool = True) -> tuple[CertifiedChoice, Explanation]:
    """Pick a certified method or an exact engine for ``job`` at ``tolerance``.

    Parameters
    ----------
    job : Job
    tolerance : float
        The caller's tolerance (already checked).
    requested : str
        ``"auto"``, a method name (``"fgt"``, ``"binned"``) or an exact engine's name.
    describe : bool
        Fill the explanation's facts (sizes, kernel); False when only running.
    """
    methods = get_methods()
    plain = unmasked(job) if is_leave_one_out(job) else job
    if requested != "auto" and requested not in methods:
        engine, explanation = choose(job, requested, describe=describe)
        explanation.reasons = {
            **{name: f"not requested (engine={requested!r})" for name in methods},
            **explanation.reasons,
        }
        _add_tolerance(explanation, tolerance)
        return CertifiedChoice(None, engine), explanation
    refusals = {name: m.refuse(plain, tolerance) for name, m in methods.items()}
    if requested != "auto":
        why = refusals[requested]
        if why is not None:
            raise NadarayaError(
                f"engine={requested!r} cannot run this problem at tolerance={tolerance:g}: "
                f"{why}. Use engine='auto' or see nadaraya.explain(..., tolerance=...) "
                "for the methods and engines that can."
            )
        method = methods[requested]
        reasons = {name: ("chosen: requested by the caller" if name == requested else
                          f"not requested (engine={requested!r})") for name in methods}
        if not describe:
            return CertifiedChoice(method, None), Explanation(requested, reasons)
        _, exact = choose(job, "auto", describe=describe)
        explanation = Explanation(requested, {**reasons, **_exact_reasons(exact)}, exact.detail)
        explanation.plan = method.plan(plain, tolerance)
        _add_tolerance(explanation, tolerance)
        return CertifiedChoice(method, None), explanation
    costs = {name: float(methods[name].cost(plain, tolerance))
             for name in methods if refusals[name] is None}
    best = min(costs, key=costs.__getitem__) if costs else None
    exact_cost = _exact_cost(job)
    if best is not None and costs[best] < exact_cost and not describe:
        # the exact engines' own checks (a spatial sort, a dot form) cost more than
        # some methods' whole sums: skip them when only running
        return CertifiedChoice(methods[best], None), Explanation(best)
    engine, exact = choose(job, "auto", describe=describe)
    reasons: dict[str, str] = {}
    if best is not None and costs[best] < exact_cost:
        for name in methods:
            if name == best:
                reasons[name] = (f"chosen: certified within the tolerance at about "
                                 f"{costs[name]:.3g} operations against {exact_cost:.3g} "
                                 "for the exact engines")
            elif refusals[name] is not None:
                reasons[name] = f"cannot run: {refusals[name]}"
            else:
                reasons[name] = (f"could run, but costs about {costs[name]:.3g} operations "
                                 f"against {costs[best]:.3g} for {best!r}")
        explanation = Explanation(best, {**reasons, **_exact_reasons(exact, chosen=False)},
                                  exact.detail)
        explanation.plan = methods[best].plan(plain, tolerance)
        _add_tolerance(explanation, tolerance)
        return CertifiedChoice(methods[best], None), explanation
    for name in methods:
        if refusals[name] is not None:
            reasons[name] = f"cannot run: {refusals[name]}"
        else:
            reasons[name] = (f"could run, but costs about {costs[name]:.3g} operations against "
                             f"{exact_cost:.3g} for the exact engines ({engine.name!r} runs it)")
    explanation = Explanation(engine.name, {**reasons, **exact.reasons}, exact.detail)
    _add_tolerance(explanation, tolerance)
    return CertifiedChoice(None, engine), explanation


def _exact_cost(job: Job) -> float:
    """What the exact engines cost: the sweep's when it runs ``job``, else ``m n``.

    Every other exact engine is O(m n) for the problems the methods take (no
    mask), so their cost is known without running their checks (a spatial
    sort, a dot form), which cost more than some methods' whole sums.
    """
    sweep = get_engine("sweep")
    if sweep.refuse(job) is None:
        return float(sweep.cost(job))
    return float(job.m) * float(job.n)


def _exact_reasons(exact: Explanation, *, chosen: bool = True) -> dict[str, str]:
    if chosen:
        return dict(exact.reasons)
    return {name: ("exact; a certified method is cheaper at this tolerance"
                   if why.startswith("chosen") else why)
            for name, why in exact.reasons.items()}


def _add_tolerance(explanation: Explanation, tolerance: float) -> None:
    detail: dict[str, Any] = explanation.detail
    if detail:
        detail["tolerance"] = tolerance
