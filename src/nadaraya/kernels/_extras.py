"""What the quadratic form adds to the Gaussian: a noise offset and LARK's per-key form.

:class:`~nadaraya.kernels.QuadraticKernel` is the Gaussian of the metric
``sqrt(2) L`` (``L^T L = Q``); its two additions are written here, on top of
the radial kernels' own distances:

* :class:`NoiseOffset`, non-local means' offset ``tau`` (Buades, Coll and
  Morel 2011): the profile ``-max(r^2 / 2 - tau, 0)`` in place of the
  Gaussian's ``-r^2 / 2``;
* :class:`KeyForm`, LARK's per-key position form ``Q_j`` and log-weight
  ``w_j`` (Takeda et al. 2007): ``profile(r^2 + 2 dx^T Q_j dx) + w_j``.
"""

from __future__ import annotations

import torch

from .._errors import NadarayaError
from ._bound import BoundKernel
from ._distance import sqdist
from ._kernel import Kernel
from .radial import RadialKernel

__all__ = ["KeyForm", "NoiseOffset"]


class NoiseOffset(RadialKernel):
    """The Gaussian less a noise offset: ``K = exp(-max(r^2 / 2 - noise, 0))``.

    Parameters
    ----------
    noise : float
        The offset ``tau >= 0`` (non-local means' ``2 sigma^2 / h^2``).
    metric : torch.Tensor of shape (n_out, n_features)
        ``L`` of ``r = ||L (q - k)||``.
    """

    name = "quadratic"

    def __init__(self, noise: float, *, metric: torch.Tensor) -> None:
        super().__init__(None, metric=metric)
        self.noise = float(noise)

    def profile(self, r2: torch.Tensor) -> torch.Tensor:
        if r2.requires_grad:
            return -(0.5 * r2 - self.noise).clamp(min=0.0)
        return r2.mul_(0.5).sub_(self.noise).clamp_(min=0.0).neg_()

    def _params(self) -> str:
        return f"noise={self.noise:g}, metric=..."


class KeyForm(Kernel):
    """A radial kernel plus a position form ``Q_j`` and a log-weight ``w_j`` per key.

    ``s(q, k_j) = profile(r^2 + 2 dx^T Q_j dx) + w_j``, ``dx`` the first
    ``ndim`` columns of ``q - k_j`` (the position) and ``r`` the radial
    kernel's distance. With the Gaussian's profile ``-r^2 / 2`` this adds
    ``-dx^T Q_j dx`` to its score.

    Parameters
    ----------
    radial : RadialKernel
        The form on all columns (its metric may leave the position out).
    ndim : int
        Number of position columns.
    field : torch.Tensor of shape (n_keys, ndim, ndim), optional
        ``Q_j``; None means zero.
    log_weight : torch.Tensor of shape (n_keys,), optional
        ``w_j``; None means zero.
    """

    name = "quadratic"

    def __init__(self, radial: RadialKernel, ndim: int, field: torch.Tensor | None,
                 log_weight: torch.Tensor | None) -> None:
        self.radial = radial
        self.ndim = ndim
        self.field = field
        self.log_weight = log_weight

    def bind(self, queries: torch.Tensor, keys: torch.Tensor) -> BoundKernel:
        """Bind the radial part, then append positions, ``Q_j`` and ``w_j`` as columns.

        Bound queries are ``[radial coordinates, position, zeros]`` and bound
        keys ``[radial coordinates, position, Q_j (flattened), w_j]``.
        """
        inner = self.radial.bind(queries, keys)
        n, d = keys.shape[0], self.ndim
        field = self.field
        if field is None:
            field = torch.zeros(n, d, d, dtype=torch.float64)
        logw = self.log_weight
        if logw is None:
            logw = torch.zeros(n, dtype=torch.float64)
        field, logw = field.reshape(-1, d, d), logw.reshape(-1)
        if field.shape[0] != n or logw.shape[0] != n:
            raise NadarayaError(
                f"position_field and key_log_weight need one entry per key ({n}); got "
                f"{field.shape[0]} and {logw.shape[0]}."
            )
        centre = keys[:, :d].detach().median(dim=0).values if n else 0.0
        qx, kx = queries[:, :d] - centre, keys[:, :d] - centre
        layout = KeyForm(inner.kernel, d, self.field, self.log_weight)
        layout._width = inner.q.shape[1]
        pad = queries.new_zeros(queries.shape[0], d * d + 1)
        qp = torch.cat([inner.q, qx.to(inner.q), pad.to(inner.q)], 1)
        kp = torch.cat([inner.k, kx.to(inner.k), field.reshape(n, -1).to(inner.k),
                        logw[:, None].to(inner.k)], 1)
        return BoundKernel(layout, qp, kp)

    def _block(self, q: torch.Tensor, k: torch.Tensor,
               out: torch.Tensor | None = None) -> torch.Tensor:
        w, d = self._width, self.ndim
        r2 = sqdist(q[:, :w], k[:, :w])
        dx = q[:, None, w:w + d] - k[None, :, w:w + d]  # (mb, nb, d)
        field = k[:, w + d:w + d + d * d].reshape(-1, d, d)
        r2 = r2 + 2.0 * torch.einsum("ija,jab,ijb->ij", dx, field, dx)
        return self.radial.profile(r2) + k[None, :, -1]

    def _bound(self, q: torch.Tensor, bound: BoundKernel) -> torch.Tensor | None:
        top = float(bound.k[:, -1].max()) if bound.k.shape[0] else 0.0
        return q.new_full((q.shape[0],), top)

    def _params(self) -> str:
        return f"{self.radial!r}, ndim={self.ndim}"
