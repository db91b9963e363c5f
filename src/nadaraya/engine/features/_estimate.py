"""The two kernel sums from positive random features, in blocks, in float64.

For ``K(q, k) = exp(a . b + bias(q) + bias(k))`` (see :mod:`._form`) and
projections ``w_1 .. w_r`` (see :mod:`._draw`),

    exp(a . b) = E_w[ exp(w.a - ||a||^2 / 2) exp(w.b - ||b||^2 / 2) ]

(FAVOR+, Choromanski et al. 2021), so with the log-features
``lq_i = w_i.a - ||a||^2 / 2 + bias(q)`` and ``lk_ij = w_i.b_j - ||b_j||^2 / 2 + bias(k_j)``

    total(q) ~ (1 / r) sum_i X_i,   X_i = exp(lq_i) S_i,   S_i = sum_j exp(lk_ij) [1, v_j]

in ``O((n + m) r e + (n + m) r p)`` operations. Keys stream through once,
in blocks; ``S`` (``r x (p + 1)``) is kept divided by ``exp(c_i)``, the
largest ``lk_ij`` over the keys seen so far, rescaled when a block raises it
(the online log-sum-exp rule, per feature). Each query then has the offset
``max_i (lq_i + c_i)``: all its terms are divided by ``exp(offset)``, so
none exceeds ``n`` and the largest is at least 1. Nothing overflows, and
what underflows is below ``e^-700`` of the largest term, whatever the
scores (see :func:`random_feature_sums` for the range of inputs).

The error estimate is the standard error of a mean of ``r`` terms, from
their sample variance: ``sqrt(sum_i (X_i - mean)^2 / (r (r - 1)))``, and
that of the means ``acc / total`` by the delta method; beside
it, :func:`sd_bound` bounds the true standard deviation from the points'
norms alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from ..._config import block_elements, get_config
from ..certified import Sums
from ._form import ExpDotForm

__all__ = ["ERROR_STATEMENT", "Estimate", "block_rows", "error_summary", "feature_sums",
           "over_budget", "sd_bound"]

ERROR_STATEMENT = (
    "statistical, not proven: total_err, acc_err and mean_err are one estimated standard "
    "error of each sum and of each mean acc / total (from the sample spread of the r "
    "random-feature terms; the mean's by the delta method); for a "
    "roughly normal estimate the error stays within 2 of them with about 95% probability "
    "and within 3 with about 99.7%, but no bound holds surely, and the terms are "
    "heavy-tailed (log-normal), so a draw now and then understates its own error. "
    "relative_sd_bound is proven over the draw of the features: the standard deviation "
    "of total is at most relative_sd_bound * total, that of acc at most "
    "relative_sd_bound * total * max|v| (by Chebyshev an error beyond t of them has "
    "probability at most 1/t^2); where it nears 1 the estimate means little."
)

# Blocks of one pass hold about this many (rows x features) float64 arrays (without
# gradients: the log-features turned into the features in place, their squares, the
# copies matrix products make, and the allocator's slack).
_BUFFERS = 6


def block_rows(features: int, p: int) -> int:
    """Rows of queries or keys per block within the working-memory budget."""
    return max(1, block_elements(8, _BUFFERS) // (features + p + 1))


def over_budget(features: int, e: int, p: int) -> str | None:
    """Why ``features`` do not fit the working memory (None when they do).

    Held whole: the projections (three scalings of ``(r, e)``), the feature
    sums and their moments (``r x 3 (p + 1)``), and one block row.
    """
    need = 8 * features * (3 * e + 3 * (p + 1) + _BUFFERS) / 2**20
    budget = get_config().working_memory
    if need <= budget:
        return None
    return (f"features={features} need {need:.0f} MiB for the projections and the feature "
            f"sums, over the working-memory budget of {budget:.0f} MiB; use fewer features "
            "or raise the budget with nadaraya.config_context(working_memory=...)")


@dataclass
class Estimate:
    """What :func:`feature_sums` returns.

    Attributes
    ----------
    sums : Sums
        ``total (m,)``, ``acc (m, p)`` and their estimated standard errors,
        all divided by ``exp(offset)``.
    offset : torch.Tensor of shape (m,)
        Log-scale of each query's sums (finite, detached).
    mean_err : torch.Tensor of shape (m, p)
        Estimated standard error of the means ``acc / total`` (detached).
    spread : torch.Tensor of shape (m,)
        A bound on ``||c a + b_j / c||^2`` over the keys, for each query (detached).
    """

    sums: Sums
    offset: torch.Tensor
    mean_err: torch.Tensor
    spread: torch.Tensor


def _log_features(x: torch.Tensor, bias: torch.Tensor, w: torch.Tensor, scale: torch.Tensor,
                  shift: torch.Tensor | None = None) -> torch.Tensor:
    """``w_i . (s x) - ||s x||^2 / 2 + bias (+ shift_i)`` for rows ``x (b, e)``: ``(b, r)``.

    ``w`` holds the projections times ``s``. Without gradients the block is
    formed in place: one ``(b, r)`` array.
    """
    out = x @ w.T
    rows = (bias - 0.5 * scale.square() * x.square().sum(1))[:, None]
    if out.requires_grad:
        return out + rows if shift is None else out + rows + shift
    out.add_(rows)
    return out if shift is None else out.add_(shift)


def _exp_minus(x: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """``exp(x - shift)``, in place of ``x`` when it records no gradient."""
    return torch.exp(x - shift) if x.requires_grad else x.sub_(shift).exp_()


def _key_pass(form: ExpDotForm, values: torch.Tensor, w: torch.Tensor, rows: int,
              mu: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``S / exp(c)`` ``(r, p + 1)`` (column 0: the weights), ``c (r,)``, and the
    keys' radius ``max_j ||b_j / s - mu||`` around ``mu`` (balanced coordinates)."""
    r, n = w.shape[0], form.b.shape[0]
    inv = 1.0 / form.scale
    wb = w * inv
    ones = values.new_ones(n, 1)
    c = torch.full((r,), -math.inf, dtype=torch.float64, device=w.device)
    s = values.new_zeros(r, values.shape[1] + 1)
    radius = torch.zeros((), dtype=torch.float64, device=w.device)
    for start in range(0, n, rows):
        blk = slice(start, min(n, start + rows))
        b = form.b[blk]
        lk = _log_features(b, form.bias_b[blk], wb, inv)
        top = torch.maximum(c, lk.detach().amax(0))
        s = s * torch.exp(c - top)[:, None]  # c = -inf before the first block: s is 0
        s = s + _exp_minus(lk, top).T @ torch.cat([ones[blk], values[blk]], 1)
        c = top
        with torch.no_grad():
            radius = torch.maximum(radius, (b * inv - mu).norm(dim=1).max())
    return s, c, radius


def _spreads(g: torch.Tensor, moments: torch.Tensor, t: torch.Tensor,
             r: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Standard errors of the sums ``(mb, p + 1)`` and of the means ``(mb, p)``.

    ``moments`` holds, per feature, ``S^2`` (``p + 1`` columns) and
    ``S_acc S_total`` (``p``), so ``g^2 @ moments`` gives the sums of the
    squared terms and of their cross products. The mean ``acc / total`` is a
    ratio: its error is that of the terms ``X_i - mean Y_i`` (the delta
    method), whose own mean is zero.
    """
    p = t.shape[1] - 1
    sq = g.square() @ moments
    spread = (sq[:, : p + 1] - t.square() / r).clamp_(min=0.0) / (r - 1)
    mean = t[:, 1:] / t[:, :1]
    ratio = (sq[:, 1 : p + 1] - 2 * mean * sq[:, p + 1 :] + mean.square() * sq[:, :1])
    ratio = ratio.clamp_(min=0.0) / (r - 1)
    return (spread / r).sqrt_(), ratio.sqrt_().mul_(r**0.5 / t[:, :1])


def feature_sums(form: ExpDotForm, values: torch.Tensor, w: torch.Tensor) -> Estimate:
    """The sums of every query over every key, divided by ``exp(offset)``.

    Parameters
    ----------
    form : ExpDotForm
        Queries ``(m, e)`` and keys ``(n, e)`` as dot vectors and biases, float64.
    values : torch.Tensor of shape (n, p), float64
    w : torch.Tensor of shape (r, e), float64
        The projections, ``r >= 2``.

    Returns
    -------
    Estimate
        The sums (with their gradients when the inputs record them), their
        offsets and error estimates; results are written block by block
        into tensors of their final size.
    """
    r, p, m = w.shape[0], values.shape[1], form.a.shape[0]
    rows = block_rows(r, p)
    scale = form.scale
    with torch.no_grad():
        mu = form.b.mean(0) / scale
    s, c, radius = _key_pass(form, values, w, rows, mu)
    sd = s.detach()
    moments = torch.cat([sd.square(), sd[:, 1:] * sd[:, :1]], 1)
    wa = w * scale
    grad = torch.is_grad_enabled() and (s.requires_grad or form.a.requires_grad)
    kw = {"dtype": torch.float64, "device": w.device}
    means = [] if grad else torch.empty(m, p + 1, **kw)
    errors, mean_err = torch.empty(m, p + 1, **kw), torch.empty(m, p, **kw)
    offset, spread = torch.empty(m, **kw), torch.empty(m, **kw)
    for start in range(0, m, rows):
        blk = slice(start, min(m, start + rows))
        a = form.a[blk]
        lq = _log_features(a, form.bias_a[blk], wa, scale, c)
        off = lq.detach().amax(1)
        g = _exp_minus(lq, off[:, None])
        t = g @ s
        with torch.no_grad():
            errors[blk], mean_err[blk] = _spreads(g, moments, t, r)
            offset[blk] = off
            spread[blk] = ((a * scale + mu).norm(dim=1) + radius).square()
        if grad:
            means.append(t / r)
        else:
            torch.div(t, r, out=means[blk])
    mean = torch.cat(means) if grad else means
    sums = Sums(mean[:, 0], mean[:, 1:], errors[:, 0], errors[:, 1:])
    return Estimate(sums, offset, mean_err, spread)


def sd_bound(spread: torch.Tensor, features: int) -> torch.Tensor:
    """Proven bound ``(m,)`` on the relative standard deviation of each query's total.

    One feature's relative variance for a key is ``exp(||a + b||^2) - 1`` in
    the balanced dot vectors (Choromanski et al. 2021, Lemma 1; orthogonal
    blocks only lower it, Theorem 2), and ``||a + b_j|| <= ||a + mu|| + R``
    with the keys' mean ``mu`` and radius ``R`` (``spread`` is the square of
    that bound); the mean of ``r`` features has ``1 / r`` of the variance,
    and the standard deviation of a sum is at most the sum of the keys'
    standard deviations. ``inf`` where the bound overflows.
    """
    return torch.sqrt(torch.expm1(spread) / features)


def error_summary(sums: Sums, bound: torch.Tensor) -> dict[str, Any]:
    """Medians and maxima of the relative errors of the totals, for explain."""
    rel = (sums.total_err / sums.total).detach()
    if rel.numel() == 0:
        return {"relative_error_median": 0.0, "relative_error_max": 0.0,
                "sd_bound_median": 0.0, "sd_bound_max": 0.0}
    return {"relative_error_median": float(rel.median()),
            "relative_error_max": float(rel.max()),
            "sd_bound_median": float(bound.median()), "sd_bound_max": float(bound.max())}
