"""Smoothing of many problems at once: attention's ``(..., L, E)`` tensors.

One call smooths every (batch, head) problem with the same kernel formula and
mask. Three ways to compute it, chosen automatically and explained:

* ``fused``: ``torch.nn.functional.scaled_dot_product_attention`` on the
  kernel's dot form, when that form is exact (the exp-dot kernel; the
  Gaussian through its key bias when rounding allows; products of these).
* ``distance``: the Laplacian, its distances and every gradient by matrix
  products, a block of query rows at a time (:mod:`._distance`).
* ``streamed``: the memory-bounded differentiable block pass
  (:func:`~nadaraya.engine.autograd.smooth_blocks`), for every kernel and mask.
* ``dense``: the weights materialised, for callers who asked for them.

Half precisions (float16, bfloat16) run through the fused kernel in their own
dtype (it accumulates in float32 itself); the streamed and dense passes
compute them in float32 (torch has no half ``cdist`` on the CPU, and a
running sum of weights in float16 loses digits and overflows past 65504
keys), and return the input dtype. Gradients flow back through the casts.
Callers may prepare the points of half-precision problems in float32 (the
fused kernel then gets them rounded once to the values' dtype), so that no
intermediate of the preparation, nor its gradient, leaves the half range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import torch

from ..._errors import NadarayaError
from ...kernels import PreparedKernel
from ...masks import Causal, Mask
from ..autograd import BlockMask, smooth_blocks
from ..autograd._problem import _value_frame, working_config
from ..streamed import dot_form_tolerance
from ._dense import _dense
from ._distance import smooth_distance

__all__ = ["BATCHED_ENGINES", "EMPTY", "BatchedResult", "accumulation_dtype", "smooth_batched",
           "wider_dtype"]

BATCHED_ENGINES = ("fused", "distance", "streamed", "dense")
EMPTY = ("zero", "nan", "raise")
_HALF = (torch.float16, torch.bfloat16)


@dataclass
class BatchedResult:
    """Output of :func:`smooth_batched` and how it was computed."""

    out: torch.Tensor
    weights: torch.Tensor | None
    engine: str
    reasons: dict[str, str] = field(default_factory=dict)


def _compiling() -> bool:
    """Under ``torch.compile``: checks that read tensor values are skipped (see smooth_batched)."""
    return bool(torch.compiler.is_compiling())


def _dot_tolerance(kernel: PreparedKernel, qn: float, kn: float) -> float:
    # The dot form is accepted when its error is within a small factor of the
    # rounding of the plain dot product of the same vectors (softmax
    # attention's own rounding, e eps |q| |k|); qn, kn: the largest norms.
    if _compiling():
        return math.inf
    q = kernel.queries
    return max(dot_form_tolerance(q.dtype),
               8.0 * (q.shape[-1] + 2) * torch.finfo(q.dtype).eps * qn * kn)


def accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the streamed and dense passes compute in: float32 for half precisions."""
    return torch.float32 if dtype in _HALF else dtype


def wider_dtype(kernel: PreparedKernel) -> torch.dtype | None:
    """float64 where the scores of these prepared points could overflow the working dtype.

    A score is a product or a squared distance of the prepared points, at most
    ``e (max|q| + max|k|)^2`` for ``e`` coordinates; beyond a small fraction
    of the working dtype's largest number (or if preparing the points
    overflowed) the caller prepares and smooths in float64 instead, and rounds
    the result once. So it does for weights that are neither exponentials
    nor homogeneous (a polynomial times an exponential) of points whose
    products ``e max|q| max|k|`` lie beyond ``2**±16``: their powers would
    leave the working dtype. None when the working dtype is wide enough (or
    is float64 already).
    """
    work = accumulation_dtype(kernel.queries.dtype)
    if work == torch.float64 or kernel.queries.device.type == "mps" or _compiling():
        return None
    pairs = [(kernel.queries, kernel.keys)]
    if kernel.dot is not None and (kernel.dot[0] is not kernel.queries
                                   or kernel.dot[1] is not kernel.keys):
        pairs.append(kernel.dot)
    pairs = [(q, k) for q, k in pairs if q.numel() and k.numel()]
    peaks = _peaks(*(t for pair in pairs for t in pair))
    for i, (q, _) in enumerate(pairs):
        tq, tk = peaks[2 * i], peaks[2 * i + 1]
        if q.shape[-1] * (tq + tk) ** 2 > torch.finfo(work).max / 64:  # NaN compares False
            return torch.float64
        if not kernel.log_domain and not kernel.homogeneous and not (
                2.0**-16 < q.shape[-1] * tq * tk < 2.0**16):
            # weights of a product of a power and an exponential: no rescaling of the
            # points keeps them, their normaliser and its inverse in range
            return torch.float64
    return None


def _out_of_range(dot: tuple[torch.Tensor, torch.Tensor], dtype: torch.dtype, tq: float,
                  tk: float) -> str | None:
    """Why the fused kernel cannot take this dot form in ``dtype``, or None.

    Its coordinates (largest magnitudes ``tq``, ``tk``) must fit ``dtype``
    (they are rounded to it), and its scores, at most ``e tq tk``, the dtype
    the kernel accumulates in.
    """
    if _compiling():
        return None
    if not (tq < torch.finfo(dtype).max / 2 and tk < torch.finfo(dtype).max / 2):
        return f"the kernel's dot form has coordinates beyond the range of {dtype}"
    if not (dot[0].shape[-1] * tq * tk < torch.finfo(accumulation_dtype(dtype)).max / 64):
        return "the kernel's dot form could give scores beyond the range of the fused kernel"
    return None


def _peaks(*tensors: torch.Tensor) -> list[float]:
    """``max |x|`` of each tensor (NaN if it holds one; 0 if empty), read in one synchronisation.

    One pass over each tensor without a temporary; the device is waited for
    once, not once per tensor.
    """
    unique = list({id(x): x for x in tensors if x.numel()}.values())  # a tensor read once
    parts = []
    for x in unique:
        low, high = torch.aminmax(x.detach())
        wide = torch.float32 if x.device.type == "mps" else torch.float64
        parts.append(torch.maximum(-low, high).to(wide).reshape(1))
    read = dict(zip((id(x) for x in unique), torch.cat(parts).tolist() if parts else [],
                    strict=True))
    return [read[id(x)] if x.numel() else 0.0 for x in tensors]


def _too_large(values: torch.Tensor, top: float) -> float | None:
    """The largest centred |value| ``top`` if it is too large for the fused kernel, else None.

    The fused kernel's backward forms products of gradients and values (and
    its forward, on some devices, unnormalised sums of values), in the
    values' own dtype; values (centred, as the fused path passes them) up
    to the square root of that dtype's largest number (256 in float16)
    leave as much room again for the gradients and the sums. The streamed
    pass rescales its values instead.
    """
    if values.numel() == 0 or _compiling():
        return None
    limit = math.sqrt(torch.finfo(values.dtype).max)
    return top if top > limit else None


def _materialise(mask: Mask | None, block_mask: BlockMask | None, bias: torch.Tensor | None,
                 m: int, n: int, dtype: torch.dtype) -> tuple[torch.Tensor | None, bool]:
    """SDPA's ``(attn_mask, is_causal)`` for a mask and a bias."""
    if block_mask is None:
        return bias, False
    if bias is None and isinstance(mask, Causal) and mask.offset == 0:
        return None, True
    visible = block_mask.block(slice(0, m), slice(0, n))
    if bias is None:
        return visible, False
    hidden = torch.tensor(-math.inf, dtype=bias.dtype, device=bias.device)
    return torch.where(visible, bias, hidden), False


class _Readings:
    """The scalars the engine choice and the finite check read from the inputs, in one go.

    ``finite``: every query, key and value is finite; ``dot``: the largest
    magnitudes of the dot form's two sides; ``norms``: their largest row
    norms (for the dot form's error); ``top``: the largest centred value.
    Under ``torch.compile`` nothing is read (the checks are skipped).
    """

    def __init__(self, kernel: PreparedKernel, values: torch.Tensor, centre: torch.Tensor,
                 dot: bool, top: bool) -> None:
        self.finite, self.dot, self.norms, self.top = False, (0.0, 0.0), (0.0, 0.0), 0.0
        if _compiling():
            return
        q, k = kernel.queries, kernel.keys
        tensors = [q, k, values]
        if dot and kernel.dot is not None:
            tensors += list(kernel.dot)
            if kernel.dot_error > 0 and q.numel() and k.numel():
                tensors += [t.detach().norm(dim=-1) for t in (q, k)]
        if top:
            tensors.append(values.detach() - centre)
        read = _peaks(*tensors)
        self.finite = all(math.isfinite(x) for x in read[:3])
        rest = read[3:]
        if dot and kernel.dot is not None:
            self.dot, rest = (rest[0], rest[1]), rest[2:]
            if kernel.dot_error > 0 and q.numel() and k.numel():
                self.norms, rest = (rest[0], rest[1]), rest[2:]
        if top:
            self.top = rest[0]


def _refusals(kernel: PreparedKernel, values: torch.Tensor, mask: Mask | None,
              block_mask: BlockMask | None, need_weights: bool, m: int, n: int,
              lead: tuple[int, ...], dropout_p: float, centre: torch.Tensor,
              ) -> tuple[dict[str, str | None], _Readings]:
    fused_candidate = not need_weights and kernel.log_domain and kernel.dot is not None
    distance_candidate = (not need_weights and kernel.negative_distance and dropout_p == 0
                          and values.shape[-1] > 0)
    readings = _Readings(kernel, values, centre, fused_candidate,
                         fused_candidate or distance_candidate)
    fused: str | None = None
    if need_weights:
        fused = "the weights were asked for, and the fused kernel does not return them"
    elif not kernel.log_domain:
        fused = f"the {kernel.name} kernel is not an exponential of a dot product"
    elif kernel.dot is None:
        fused = f"the {kernel.name} kernel has no dot-product form"
    elif (why := _out_of_range(kernel.dot, values.dtype, *readings.dot)) is not None:
        fused = why
    elif kernel.dot_error > 0 and kernel.dot_error > _dot_tolerance(kernel, *readings.norms):
        fused = (f"the dot form of the {kernel.name} kernel would lose precision here "
                 f"(error bound {kernel.dot_error:.1e})")
    elif block_mask is not None and not (isinstance(mask, Causal) and mask.offset == 0):
        per = block_mask.per_problem is not None or (mask is not None and mask.reads_index)
        size = m * n * (math.prod(lead) if per else 1) * 4
        if size > working_config().working_memory * 2**20:
            fused = "the mask would have to be materialised beyond the working-memory budget"
    distance: str | None = None
    if need_weights:
        distance = "the weights were asked for; the distance pass never materialises them"
    elif not kernel.negative_distance:
        distance = f"the {kernel.name} kernel's scores are not -||q - k||"
    elif dropout_p > 0:
        distance = "dropout runs in the streamed pass"
    elif values.shape[-1] == 0:
        distance = "the values have no features: there is nothing to sum"
    top = None
    if fused is None or distance is None:
        top = _too_large(values, readings.top)
    if top is not None:
        large = (f"values as large as {top:.3g} could overflow the fused kernel's sums and "
                 "gradients; the streamed pass rescales them")
        fused = fused if fused is not None else large
        distance = distance if distance is not None else large
    streamed = ("the weights were asked for; the streamed pass never materialises them"
                if need_weights else None)
    if streamed is None and _compiling() and not kernel.is_dot and torch.is_grad_enabled() and (
            kernel.queries.requires_grad or kernel.keys.requires_grad):
        streamed = ("under torch.compile the streamed pass's backward (the kernel's own "
                    "gradient, taken by autograd inside it) cannot be traced")
    return {"fused": fused, "distance": distance, "streamed": streamed, "dense": None}, readings


def _power_of_two(x: torch.Tensor) -> torch.Tensor:
    """A power of two ``(..., 1, 1)`` near the largest magnitude of each problem of ``x``.

    ``x / _power_of_two(x)`` has its largest magnitude in [1, 2); a problem
    without a finite nonzero entry gets 1.
    """
    if x.numel() == 0:
        return x.new_ones(*x.shape[:-2], 1, 1)
    top = x.detach().abs().amax(dim=(-2, -1), keepdim=True)
    top = torch.where(torch.isfinite(top) & (top > 0), top, torch.ones_like(top))
    _, exponent = torch.frexp(top)  # top = mantissa * 2**exponent, mantissa in [0.5, 1)
    return torch.ldexp(torch.ones_like(top), exponent - 1)


def _non_finite_rows(q: torch.Tensor, k: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Bool ``(..., m)``: rows whose query, or any key or value of their problem, is not finite.

    Those rows are NaN whatever the engine's arithmetic made of them (the
    fused kernel, on some backends, returns zeros for a NaN query). Computed
    on the device, without a synchronisation.
    """
    rows = ~torch.isfinite(q).all(-1)
    problem = ~(torch.isfinite(k).all(-1).all(-1) & torch.isfinite(values).all(-1).all(-1))
    return rows | problem[..., None]


def _apply_empty(out: torch.Tensor, empty: torch.Tensor | None, policy: str) -> torch.Tensor:
    if empty is None:
        return out
    if _compiling():
        if policy == "raise":
            raise NadarayaError(
                "empty='raise' reads the mask's values, which torch.compile cannot do without "
                "a graph break; pass empty='zero' or empty='nan' to a compiled call.")
    elif not bool(empty.any()):
        return out
    if policy == "raise":
        count = int(empty.sum())
        raise NadarayaError(
            f"{count} quer{'y sees' if count == 1 else 'ies see'} no key: every key is hidden "
            "by the mask. Relax the mask, or pass empty='zero' (zero output there, as "
            "scaled_dot_product_attention does) or empty='nan'."
        )
    if policy == "nan":
        return out.masked_fill(empty[..., None], math.nan)
    return out.masked_fill(empty[..., None], 0.0)


def smooth_batched(
    kernel: PreparedKernel,
    values: torch.Tensor,
    *,
    mask: Mask | None = None,
    bias: torch.Tensor | None = None,
    points: tuple[torch.Tensor, torch.Tensor] | None = None,
    dropout_p: float = 0.0,
    engine: str = "auto",
    need_weights: bool = False,
    empty: str = "zero",
) -> BatchedResult:
    """Smooth ``values`` for every leading (batch, head) problem at once.

    Parameters
    ----------
    kernel : PreparedKernel
        Queries ``(..., m, e)`` and keys ``(..., n, e)`` in kernel coordinates,
        and the kernel's block formula.
    values : torch.Tensor of shape (..., n, p)
        Values; leading dimensions equal those of the queries and keys.
    mask : Mask, optional
        Which keys each query sees (one mask for every problem; masks that
        read the points use ``points``).
    bias : torch.Tensor, optional
        Additive log-weights broadcastable to ``(..., m, n)``; ``-inf`` hides.
    points : tuple of torch.Tensor, optional
        Raw queries and keys for masks that read points (k-nearest, radius);
        the prepared points by default.
    dropout_p : float, default 0.0
        Dropout on the weights (training only; the caller decides).
    engine : {"auto", "fused", "distance", "streamed", "dense"}
        Force one way of computing it.
    need_weights : bool, default False
        Also return the weights ``(..., m, n)`` (materialised).
    empty : {"zero", "nan", "raise"}, default "zero"
        Output of a query whose every key is hidden: zero (as
        ``scaled_dot_product_attention``), NaN, or an error.

    Returns
    -------
    BatchedResult
        ``.out`` ``(..., m, p)``, ``.weights`` or None, ``.engine`` and
        ``.reasons`` (why each engine was or was not used).

    Notes
    -----
    Under ``torch.compile`` the checks that read tensor values (the dot
    form's error bound, coordinates and values beyond the fused kernel's
    range, scores beyond the working dtype's, an empty row under
    ``empty="raise"``) would break the graph, so they are skipped: the engine
    follows from the kernel, the mask and the shapes alone, as
    ``scaled_dot_product_attention`` does, and inputs near the dtype's
    largest number are the caller's to avoid. ``empty="raise"`` is refused.
    Kernels that would run in the streamed pass with gradients (polynomial,
    linear, cosine with a mask beyond the budget...) run in the dense one,
    whose graph compiles.
    """
    if empty not in EMPTY:
        raise NadarayaError(f"empty must be one of {', '.join(map(repr, EMPTY))}; got {empty!r}.")
    q, k = kernel.queries, kernel.keys
    lead = tuple(q.shape[:-2])
    m, n = q.shape[-2], k.shape[-2]
    block_mask = None
    if mask is not None:
        pq, pk = points if points is not None else (q, k)
        block_mask = BlockMask(mask, lead, m, n, pq, pk, device=q.device)
    centre = _value_frame(values, dropout_p)[0]  # the fused and distance paths' frame
    refusals, readings = _refusals(kernel, values, mask, block_mask, need_weights, m, n, lead,
                                   dropout_p, centre)
    if engine == "auto":
        chosen = next(name for name in BATCHED_ENGINES if refusals[name] is None)
    elif engine in BATCHED_ENGINES:
        if refusals[engine] is not None:
            raise NadarayaError(f"engine={engine!r} cannot run this problem: {refusals[engine]}. "
                                "Use engine='auto'.")
        chosen = engine
    else:
        raise NadarayaError(f"engine must be 'auto' or one of {', '.join(BATCHED_ENGINES)}; "
                            f"got {engine!r}.")
    reasons: dict[str, str] = {}
    for name in BATCHED_ENGINES:
        why = refusals[name]
        reasons[name] = ("chosen" if name == chosen else f"cannot run: {why}"
                         if why is not None else f"could run, but {chosen!r} is preferred")
    weights = None
    dtype = values.dtype
    work = accumulation_dtype(dtype)
    if chosen != "fused" and work != dtype:
        kernel = replace(kernel, queries=q.to(work), keys=k.to(work))
        q, k, values = kernel.queries, kernel.keys, values.to(work)
        bias = bias.to(work) if bias is not None else None
    scales = None
    if not kernel.log_domain:
        # weights are products of the kernel's and exp(bias): one factor per row cancels,
        # so the bias is shifted to a largest value of 0 (exp cannot overflow), and
        # homogeneous weights are taken of points of magnitude about one
        if bias is not None:
            top = bias.detach().amax(-1, keepdim=True) if n else bias.detach()
            bias = bias - torch.where(torch.isfinite(top), top, torch.zeros_like(top))
        if kernel.homogeneous:
            scales = (_power_of_two(q), _power_of_two(k))
    if chosen == "fused":
        assert kernel.dot is not None
        qa, ka = (t.to(dtype) for t in kernel.dot)  # prepared wider, rounded once
        attn_mask, is_causal = _materialise(mask, block_mask, bias, m, n, q.dtype)
        # values centred on their midpoint: the kernel's backward forms g . v_j - g . out,
        # which would cancel a common offset of the values to its rounding
        framed = values - centre
        e, p = qa.shape[-1], framed.shape[-1]
        if e != p:
            # torch's flash kernels take one head size for queries, keys and values; with
            # two, it falls back to a kernel that holds every score at once. Zero columns
            # change no dot product and no mean.
            width = max(e, p)
            qa, ka = (torch.nn.functional.pad(t, (0, width - e)) for t in (qa, ka))
            framed = torch.nn.functional.pad(framed, (0, width - p))
        out = torch.nn.functional.scaled_dot_product_attention(
            qa, ka, framed, attn_mask=attn_mask, dropout_p=dropout_p,
            is_causal=is_causal, scale=1.0)[..., :p] + centre
        empties = None
        if attn_mask is not None:
            seen = attn_mask if attn_mask.dtype == torch.bool else attn_mask > -math.inf
            empties = ~seen.any(-1)
            if empties.shape != out.shape[:-1]:
                empties = empties.expand(out.shape[:-1])
    elif chosen == "distance":
        centre = centre.to(values.dtype)
        if not _compiling() and not bool(centre.any()):  # columns of both signs: no shift
            out, total = smooth_distance(q, k, values, mask=block_mask, bias=bias)
        else:
            out, total = smooth_distance(q, k, values - centre, mask=block_mask, bias=bias)
            out = out + centre
        empties = total == 0
    elif chosen == "streamed":
        out, stat = smooth_blocks(q, k, values, kernel.block, mask=block_mask, bias=bias,
                                  log_domain=kernel.log_domain, dot=kernel.is_dot,
                                  dropout_p=dropout_p, point_scales=scales)
        empties = torch.isinf(stat) if kernel.log_domain else stat == 0
    else:
        out, weights, empties = _dense(kernel, values, block_mask, bias, dropout_p, scales)
    if n == 0:  # no key at all: every row is empty, whatever the engine returned
        empties = torch.ones(out.shape[:-1], dtype=torch.bool, device=out.device)
    if readings.finite:  # the usual case, read with the engine choice
        out = _apply_empty(out, empties, empty).to(dtype)
        weights = weights.to(dtype) if weights is not None else None
        return BatchedResult(out, weights, chosen, reasons)
    bad = _non_finite_rows(q, k, values)
    out = _apply_empty(out, empties if empties is None else empties & ~bad, empty)
    out = out.masked_fill(bad[..., None], math.nan).to(dtype)
    if weights is not None:
        weights = weights.masked_fill(bad[..., None], math.nan).to(dtype)
    return BatchedResult(out, weights, chosen, reasons)

