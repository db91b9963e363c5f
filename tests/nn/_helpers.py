"""Naive formulas the attention tests compare against."""

from __future__ import annotations

import numpy as np
import torch


def naive_attention(scores: torch.Tensor, values: torch.Tensor, visible: torch.Tensor | None = None,
                    log_domain: bool = True) -> torch.Tensor:
    """``sum_j w_ij v_j / sum_j w_ij`` from a full score (or weight) matrix, by a double loop."""
    *lead, m, n = scores.shape
    s = scores.reshape(-1, m, n)
    v = values.reshape(-1, n, values.shape[-1])
    vis = None if visible is None else torch.broadcast_to(visible, scores.shape).reshape(-1, m, n)
    out = torch.zeros(s.shape[0], m, v.shape[-1], dtype=s.dtype)
    for g in range(s.shape[0]):
        for i in range(m):
            keep = torch.ones(n, dtype=torch.bool) if vis is None else vis[g, i]
            if not keep.any():
                continue
            row = s[g, i, keep]
            w = torch.exp(row - row.max()) if log_domain else row
            out[g, i] = (w[:, None] * v[g, keep]).sum(0) / w.sum()
    return out.reshape(*lead, m, v.shape[-1])


def sqdist(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return ((q[..., :, None, :] - k[..., None, :, :]) ** 2).sum(-1)


def normal(rng: np.random.Generator, *shape: int, dtype=torch.float64) -> torch.Tensor:
    """Standard normal entries of ``shape`` from ``rng``."""
    return torch.as_tensor(rng.standard_normal(shape), dtype=dtype)


def grads(out: torch.Tensor, inputs, g: torch.Tensor):
    """Gradients of ``out`` for ``inputs`` along ``g`` (None for an unused input)."""
    return torch.autograd.grad(out, inputs, g, allow_unused=True)


def naive_laplacian(q, k, v, h, bias=None):
    """Naive Laplacian attention: distances from the differences, one softmax."""
    r = ((q[..., :, None, :] - k[..., None, :, :]) ** 2).sum(-1).sqrt()
    s = -r / h if bias is None else bias - r / h
    return torch.softmax(s, -1) @ v


def tied_points(rng: np.random.Generator, lead: tuple[int, ...], m: int, e: int,
                offset: float) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 queries ``(*lead, m, e)`` near ``offset``, and keys ``(*lead, 3 m, e)``: the
    queries themselves, the queries moved by about 1e-3, and other points near ``offset``."""
    q = normal(rng, *lead, m, e, dtype=torch.float32) + offset
    k = torch.cat([q, q + 1e-3 * normal(rng, *lead, m, e, dtype=torch.float32),
                   normal(rng, *lead, m, e, dtype=torch.float32) + offset], -2)
    return q, k
