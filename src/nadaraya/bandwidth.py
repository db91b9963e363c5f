"""Rule-of-thumb bandwidths (Scott, Silverman) and bandwidth checking.

Both rules are the multivariate normal-reference rules, per feature, as in
``scipy.stats.gaussian_kde`` (``bw_method="scott"`` / ``"silverman"``): the
sample standard deviation of each feature times ``n^(-1/(d+4))`` (Scott) or
``(n (d + 2) / 4)^(-1/(d+4))`` (Silverman). For one feature Silverman's is
``1.06 sd n^(-1/5)``, the normal-reference rule of kernel-regression software
(statsmodels' ``KernelReg`` / ``KDEMultivariate`` ``"normal_reference"``).
R's ``bw.nrd0`` and statsmodels' univariate ``bw_silverman`` are a different,
density-specific rule, ``0.9 min(sd, IQR / 1.349) n^(-1/5)``, about 15%
narrower on normal data.

Data-driven selection (cross-validation, GCV, AICc) lives with the
estimators; these rules need only the keys.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ._errors import NadarayaError

__all__ = ["resolve_bandwidth", "scott", "silverman"]


def _spread(keys: torch.Tensor) -> torch.Tensor:
    x = keys.detach().to(torch.float64)
    n = x.shape[0]
    sd = x.std(dim=0, correction=1) if n > 1 else torch.zeros(x.shape[1], dtype=x.dtype)
    if bool((sd <= 0).any()):
        cols = torch.nonzero(sd <= 0).flatten().tolist()
        raise NadarayaError(
            f"a rule-of-thumb bandwidth needs spread in every feature; feature(s) {cols} of "
            "keys are constant (or there is a single key). Give bandwidth as a number instead."
        )
    return sd


def scott(keys: torch.Tensor) -> torch.Tensor:
    """Scott's rule per feature: ``sigma * n^(-1 / (d + 4))``.

    ``sigma`` is the sample standard deviation of each feature; this equals
    ``scipy.stats.gaussian_kde``'s ``"scott"`` factor times it.

    Parameters
    ----------
    keys : torch.Tensor of shape (n, d)

    Returns
    -------
    torch.Tensor of shape (d,)
    """
    n, d = keys.shape
    return _spread(keys) * n ** (-1.0 / (d + 4))


def silverman(keys: torch.Tensor) -> torch.Tensor:
    """Silverman's rule per feature: ``(4 / (d + 2))^(1/(d+4)) * sigma * n^(-1/(d+4))``.

    ``sigma`` is the sample standard deviation of each feature; for d = 1 this
    is ``1.06 sigma n^(-1/5)``. It equals ``scipy.stats.gaussian_kde``'s
    ``"silverman"`` factor times each feature's standard deviation.

    Parameters
    ----------
    keys : torch.Tensor of shape (n, d)

    Returns
    -------
    torch.Tensor of shape (d,)
    """
    n, d = keys.shape
    return (4.0 / (d + 2)) ** (1.0 / (d + 4)) * _spread(keys) * n ** (-1.0 / (d + 4))


_RULES = {"scott": scott, "silverman": silverman}


def resolve_bandwidth(bandwidth: Any, keys: torch.Tensor, kernel: Any) -> Any:
    """Turn a rule name into numbers and check numbers; pass None through."""
    if bandwidth is None:
        return bandwidth
    if isinstance(bandwidth, torch.Tensor):
        if bandwidth.layout != torch.strided or bandwidth.is_meta or bandwidth.is_complex():
            raise NadarayaError(
                f"bandwidth must be a dense real tensor with values; got a {bandwidth.layout} "
                f"{bandwidth.dtype} tensor on {bandwidth.device}. Pass a number, or a dense "
                "real tensor on the data's device (e.g. bandwidth.to_dense())."
            )
        return bandwidth
    if isinstance(bandwidth, str):
        try:
            rule = _RULES[bandwidth.lower()]
        except KeyError:
            raise NadarayaError(
                f"bandwidth {bandwidth!r} is not a known rule; use a positive number, one per "
                f"feature, or one of {sorted(_RULES)}."
            ) from None
        return rule(keys).to(keys.dtype)
    try:
        arr = np.asarray(bandwidth, dtype=float) if not np.iscomplexobj(bandwidth) else None
    except (TypeError, ValueError):
        arr = None
    if arr is None or not np.all(np.isfinite(arr)):
        raise NadarayaError(
            f"bandwidth must be finite and > 0; got {bandwidth!r}. Pass e.g. bandwidth=0.3."
        )
    if arr.ndim < 2 and not np.all(arr > 0):
        raise NadarayaError(
            f"bandwidth must be > 0; got {bandwidth!r}. Pass e.g. bandwidth=0.3."
        )
    return arr if arr.ndim else float(arr)
