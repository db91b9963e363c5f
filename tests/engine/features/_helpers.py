"""Shared set-up of the random-feature tests: problems, the exact oracle, the estimate."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

import nadaraya
from nadaraya.engine._api import build_job
from nadaraya.engine.features import random_feature_sums


def attention_problem(m: int, n: int, d: int, p: int, spread: float,
                      seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Queries ``(m, d)``, keys ``(n, d)`` with N(0, spread^2) entries; values ``(n, p)``."""
    gen = np.random.default_rng(seed)
    q = torch.from_numpy(gen.standard_normal((m, d)) * spread)
    k = torch.from_numpy(gen.standard_normal((n, d)) * spread)
    v = torch.from_numpy(gen.standard_normal((n, p)))
    return q, k, v


def exact(q: Any, k: Any, v: Any, kernel: Any,
          bandwidth: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``log sum_j K (m,)`` and ``sum_j K v_j (m, p)`` from the float64 dense engine."""
    acc, lse = nadaraya.smooth(q, k, v, kernel, bandwidth=bandwidth, engine="dense",
                               normalize=False, return_lse=True)
    return lse, acc


def estimate(q: Any, k: Any, v: Any, kernel: Any, features: int, seed: int | None,
             bandwidth: Any = None) -> dict[str, Any]:
    """The estimate in absolute terms: ``total``, ``acc``, ``mean``, their errors, ``lse``."""
    job, _ = build_job(q, k, v, kernel, None, bandwidth)
    sums, info = random_feature_sums(job, features, seed)
    scale = torch.exp(info["offset"])
    return {"total": sums.total * scale, "acc": sums.acc * scale[:, None],
            "total_err": sums.total_err * scale, "acc_err": sums.acc_err * scale[:, None],
            "mean": sums.acc / sums.total[:, None], "mean_err": info["mean_err"],
            "lse": info["offset"] + torch.log(sums.total), "sums": sums, "info": info}
