"""Naive formulas the attention tests compare against."""

from __future__ import annotations

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
