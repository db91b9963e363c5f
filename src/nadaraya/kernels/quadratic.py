"""The quadratic-form kernel over augmented vectors ``t = [position; value or patch]``.

    K(t_i, t_j) = exp(-(t_i - t_j)^T Q (t_i - t_j)),      Q = blockdiag(Q_x, Q_y)

Milanfar's observation (seed 004): the classic kernel regression, the
bilateral filter, non-local means and LARK are this one kernel; only ``Q``
changes. Here each of them is literally a choice of the blocks:

* classic kernel regression (Takeda, Farsiu, Milanfar 2007):
  ``t = [x]``, ``Q_x = I / (2 h^2)``;
* bilateral filter (Tomasi and Manduchi 1998):
  ``t = [x; y(x)]``, ``Q_x = I / (2 s_x^2)``, ``Q_y = I_c / (2 s_y^2)``;
* non-local means (Buades, Coll and Morel 2005):
  ``t = [x; y(x + u), u in P]``, ``Q_x = 0``, ``Q_y = diag(g) (x) I_c / (c h^2 sum g)``;
* LARK, the steering kernel (Takeda et al. 2007):
  ``t = [x]``, ``Q_x = C_j / (2 h^2)`` for key ``j``.

``x`` is the pixel position (``d`` coordinates), ``y(x)`` its ``c`` channel
values, ``P`` the patch offsets with weights ``g(u)``, ``C_j`` the steering
matrix of key ``j``. Non-local means also takes a noise offset ``tau``
(Buades, Coll and Morel 2011): ``K = exp(-max(r^2 - tau, 0))`` with
``r^2 = (t_i - t_j)^T Q (t_i - t_j)``. LARK weights key ``j`` by
``sqrt(det C_j)`` (Takeda's normalisation), a per-key log-weight.

The form is the Gaussian of the metric ``sqrt(2) L`` with ``L^T L = Q``:
``-(t_i - t_j)^T Q (t_i - t_j) = -||sqrt(2) L (t_i - t_j)||^2 / 2``. So on
explicit vectors ``t`` a :class:`QuadraticKernel` binds as that
:class:`~nadaraya.kernels.Gaussian` (one code for its distances, dot form,
bounds and pairs); the noise offset and LARK's per-key extras are its only
additions (:mod:`nadaraya.kernels._extras`).

:class:`QuadraticKernel` works on explicit vectors ``t`` through
:func:`nadaraya.smooth` (any engine), and its blocks drive the grid engine
(:func:`nadaraya.engine.grid.grid_smooth`), which never forms ``t``: it loops
over window offsets and computes patch distances by filtering.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np
import torch

from .._errors import NadarayaError
from ._bound import BoundKernel
from ._extras import KeyForm, NoiseOffset
from ._kernel import Kernel, select
from ._prepared import PreparedKernel
from .radial import Gaussian, RadialKernel

__all__ = [
    "QuadraticKernel",
    "bilateral_kernel",
    "classic_kernel",
    "gaussian_patch",
    "nlm_kernel",
    "steering_kernel",
]


def _tensor(value: Any, name: str) -> torch.Tensor:
    t = value if isinstance(value, torch.Tensor) else torch.as_tensor(np.asarray(value, float))
    if t.is_complex() or not bool(torch.isfinite(t).all()):
        raise NadarayaError(f"{name} must hold finite real numbers; got {value!r}.")
    return t.detach().to(torch.float64)


def _block(value: Any, size: int | None, name: str) -> torch.Tensor | None:
    """A scalar (times I), a vector (diagonal) or a symmetric PSD matrix, as ``(k, k)``."""
    if value is None:
        return None
    t = _tensor(value, name)
    if t.ndim == 0:
        if size is None:
            return t  # resolved once the number of columns is known
        t = t * torch.eye(size, dtype=t.dtype)
    elif t.ndim == 1:
        t = torch.diag(t)
    elif t.ndim != 2 or t.shape[0] != t.shape[1]:
        raise NadarayaError(
            f"{name} must be a number, a vector (diagonal) or a square matrix; "
            f"got shape {tuple(t.shape)}."
        )
    if size is not None and t.shape[0] != size:
        raise NadarayaError(f"{name} must be {size} x {size}; got {tuple(t.shape)}.")
    if not torch.allclose(t, t.T, rtol=1e-12, atol=0.0):
        raise NadarayaError(f"{name} must be symmetric; got {t.tolist()}. Use (A + A.T) / 2.")
    floor = -1e-12 * max(1.0, float(t.abs().max())) if t.numel() else 0.0
    if t.numel() and float(torch.linalg.eigvalsh(t).min()) < floor:
        raise NadarayaError(
            f"{name} must be positive semi-definite (a quadratic form); it has a negative "
            "eigenvalue. Pass e.g. L.T @ L."
        )
    return t


class QuadraticKernel(Kernel):
    """``K(t_i, t_j) = exp(-max((t_i - t_j)^T Q (t_i - t_j) - noise, 0))``.

    ``t = [x; features]``: the first ``ndim`` columns are the position ``x``,
    the rest the features (a pixel's ``c`` channels, or its patch: ``n_patch``
    pixels times ``c`` channels, patch-pixel major). ``Q`` is given by blocks:

        Q = blockdiag(Q_x, Q_y),     Q_y = diag(patch) (x) Q_value

    Parameters
    ----------
    position : float, array of shape (ndim,) or (ndim, ndim), optional
        ``Q_x``; a number means that number times the identity. None: ``Q_x = 0``.
    value : float, array of shape (c,) or (c, c), optional
        ``Q_value``, the form on one pixel's channels. None: ``Q_y = 0``.
    patch : array of shape (P,) * ndim, optional
        Patch weights ``g(u)``; the features are then the patch around ``x``.
    ndim : int, optional
        Number of position columns; default from ``position``'s shape, else 2.
    noise : float, default 0.0
        The offset ``tau >= 0`` of non-local means (``2 sigma^2 / h^2``).
    position_field : array of shape (n_keys, ndim, ndim), optional
        A ``Q_x`` for each key (LARK); then ``position`` must be None.
    key_log_weight : array of shape (n_keys,), optional
        ``log`` of a per-key factor of ``K`` (LARK's ``sqrt(det C_j)``).

    Examples
    --------
    The bilateral kernel of a gray image, ``s_x = 2`` pixels, ``s_y = 0.1``:

    >>> import torch
    >>> from nadaraya.kernels.quadratic import QuadraticKernel
    >>> k = QuadraticKernel(position=1 / (2 * 2.0**2), value=1 / (2 * 0.1**2))
    >>> t = torch.tensor([[0.0, 0.0, 0.5]], dtype=torch.float64)
    >>> round(float(k.score(t, t + torch.tensor([[2.0, 0.0, 0.1]]))[0, 0]), 6)
    -1.0
    """

    name = "quadratic"

    def __init__(self, position: Any = None, value: Any = None, *, patch: Any = None,
                 ndim: int | None = None, noise: float = 0.0, position_field: Any = None,
                 key_log_weight: Any = None) -> None:
        if ndim is None:
            pos = None if position is None else _tensor(position, "position")
            ndim = int(pos.shape[0]) if pos is not None and pos.ndim >= 1 else 2
        if not isinstance(ndim, int) or ndim < 0:
            raise NadarayaError(f"ndim must be an integer >= 0; got {ndim!r}.")
        self.ndim = ndim
        self.position = _block(position, ndim, "position")
        self.value = _block(value, None, "value")
        self.patch = None
        if patch is not None:
            g = _tensor(patch, "patch")
            if g.ndim != ndim or any(s % 2 == 0 for s in g.shape) or bool((g < 0).any()):
                raise NadarayaError(
                    f"patch must be non-negative weights of odd size in each of the {ndim} "
                    f"dimensions; got shape {tuple(g.shape)}."
                )
            self.patch = g
        noise = float(noise)
        if not (math.isfinite(noise) and noise >= 0):
            raise NadarayaError(f"noise must be a finite number >= 0; got {noise!r}.")
        self.noise = noise
        self.position_field = None
        if position_field is not None:
            if self.position is not None:
                raise NadarayaError("give either position or position_field, not both.")
            f = _tensor(position_field, "position_field")
            if f.ndim < 3 or f.shape[-2:] != (ndim, ndim):
                raise NadarayaError(
                    f"position_field must have shape (n_keys, {ndim}, {ndim}); "
                    f"got {tuple(f.shape)}."
                )
            self.position_field = f
        self.key_log_weight = None if key_log_weight is None else _tensor(
            key_log_weight, "key_log_weight")

    # -- the blocks of Q -----------------------------------------------------
    def position_matrix(self) -> torch.Tensor:
        """``Q_x``, shape ``(ndim, ndim)`` (zeros when not given)."""
        if self.position is None:
            return torch.zeros(self.ndim, self.ndim, dtype=torch.float64)
        return self.position

    def value_matrix(self, channels: int) -> torch.Tensor:
        """``Q_value`` for ``channels`` channels, shape ``(c, c)``."""
        if self.value is None:
            return torch.zeros(channels, channels, dtype=torch.float64)
        if self.value.ndim == 0:
            return self.value * torch.eye(channels, dtype=torch.float64)
        if self.value.shape[0] != channels:
            raise NadarayaError(
                f"value block is {self.value.shape[0]} x {self.value.shape[0]} but the image "
                f"has {channels} channel(s); give one row per channel."
            )
        return self.value

    @property
    def patch_size(self) -> int:
        """Number of pixels in a patch (1 without a patch)."""
        return 1 if self.patch is None else int(self.patch.numel())

    def matrix(self, width: int) -> torch.Tensor:
        """The whole ``Q`` for vectors ``t`` of ``width`` columns, ``(width, width)``."""
        features = width - self.ndim
        if features < 0 or features % self.patch_size:
            raise NadarayaError(
                f"t has {width} column(s); expected {self.ndim} position column(s) followed "
                f"by a multiple of {self.patch_size} feature columns (patch pixels x channels)."
            )
        q = torch.zeros(width, width, dtype=torch.float64)
        q[: self.ndim, : self.ndim] = self.position_matrix()
        channels = features // self.patch_size
        if channels:
            g = torch.ones(1) if self.patch is None else self.patch.flatten()
            q[self.ndim:, self.ndim:] = torch.kron(torch.diag(g), self.value_matrix(channels))
        return q

    # -- the kernel on explicit vectors t ------------------------------------
    @property
    def batched(self) -> bool:  # type: ignore[override]
        return self.position_field is None and self.key_log_weight is None

    def form(self, width: int) -> Kernel:
        """The kernel this one is on vectors ``t`` of ``width`` columns.

        The quadratic form is the Gaussian of the metric ``sqrt(2) L``, with
        ``L^T L = Q``: ``-(t_i - t_j)^T Q (t_i - t_j) = -||sqrt(2) L (t_i - t_j)||^2 / 2``.
        So without a noise offset it *is* a :class:`~nadaraya.kernels.Gaussian`
        (its distances, dot form, bounds and pairs); the noise offset changes
        only the profile, and LARK's per-key position form and log-weight are
        added on top of either.

        Parameters
        ----------
        width : int
            Columns of ``t``: ``ndim`` positions, then the features.

        Returns
        -------
        Kernel
            A :class:`~nadaraya.kernels.Gaussian` with ``metric=`` for the plain
            form; a radial kernel of profile ``-max(r^2 / 2 - noise, 0)`` with a
            noise offset; either wrapped with the per-key extras of LARK.
        """
        qm = self.matrix(width)
        if self.position_field is not None:
            qm[: self.ndim, : self.ndim] = 0.0
        lam, vec = torch.linalg.eigh(qm)
        keep = lam > lam.abs().max().clamp(min=1e-300) * 1e-14
        metric = (vec[:, keep] * (2.0 * lam[keep]).sqrt()).T  # sqrt(2) L, L^T L = Q
        radial: RadialKernel = (Gaussian(None, metric=metric) if not self.noise
                                else NoiseOffset(self.noise, metric=metric))
        if self.batched:
            return radial
        return KeyForm(radial, self.ndim, self.position_field, self.key_log_weight)

    def bind(self, queries: torch.Tensor, keys: torch.Tensor) -> BoundKernel:
        """Bind ``t`` through :meth:`form`: the binding is that kernel's.

        The kernel object itself is never changed.
        """
        q, k = select(queries, self.columns), select(keys, self.columns)
        return self.form(q.shape[-1]).bind(q, k)

    def _prepared(self, q: torch.Tensor, k: torch.Tensor) -> PreparedKernel:
        if not self.batched:
            return super()._prepared(q, k)
        return self.form(q.shape[-1]).prepare(q, k)

    def _params(self) -> str:
        parts = []
        if self.position is not None:
            parts.append("position=...")
        if self.position_field is not None:
            parts.append("position_field=...")
        if self.value is not None:
            parts.append("value=...")
        if self.patch is not None:
            parts.append(f"patch={tuple(self.patch.shape)}")
        if self.noise:
            parts.append(f"noise={self.noise:g}")
        return ", ".join(parts)


# -- each filter as its Q ------------------------------------------------------


def _positive(value: float, name: str) -> float:
    if isinstance(value, torch.Tensor):
        value = value.detach()
    try:
        v = float(value)
    except (TypeError, ValueError, RuntimeError):
        raise NadarayaError(f"{name} must be a positive number; got {value!r}.") from None
    if not (math.isfinite(v) and v > 0):
        raise NadarayaError(f"{name} must be a positive number; got {value!r}.")
    return v


def _square(scale: float, name: str, factor: float, form: str) -> float:
    """``factor * scale^2``, checked so that its reciprocal (an entry of ``Q``) is a normal number.

    ``Q`` holds ``1 / (factor scale^2)``: beyond float64's normal range it would be
    infinite (a division by zero once the square underflows) or zero. The error
    names ``name`` and the range of scales that ``Q`` can represent; ``form`` is
    the denominator as the docs write it (``"2 h^2"``).
    """
    square = factor * scale * scale
    if 1.0 / sys.float_info.max <= square <= 1.0 / sys.float_info.min:
        return square
    low = 1.0 / math.sqrt(sys.float_info.max) / math.sqrt(factor)
    high = 1.0 / math.sqrt(sys.float_info.min) / math.sqrt(factor)
    raise NadarayaError(
        f"{name} must lie between about {low:.3g} and {high:.3g}, where the kernel's "
        f"1 / ({form}) is a normal float64 number; got {name}={scale!r}. (Far below that "
        f"range only exact matches would keep a weight; far above it every neighbour would "
        f"weigh alike.) Choose {name} within it, or rescale the data and {name} together."
    )


def classic_kernel(h: float, ndim: int = 2) -> QuadraticKernel:
    """Classic kernel regression: ``Q_x = I / (2 h^2)``, ``Q_y = 0``.

    The Gaussian of standard deviation ``h`` pixels on positions only; ``h``
    between about 5.3e-155 and 4.7e153 (where ``1 / (2 h^2)`` is a normal
    float64 number), else :class:`~nadaraya.NadarayaError`.
    """
    h = _positive(h, "h")
    return QuadraticKernel(position=1.0 / _square(h, "h", 2.0, "2 h^2"), ndim=ndim)


def bilateral_kernel(sigma_space: float, sigma_color: float, ndim: int = 2) -> QuadraticKernel:
    """Bilateral filter: ``Q_x = I / (2 s_x^2)``, ``Q_y = I_c / (2 s_y^2)``.

    ``t = [x; y(x)]``: Gaussian in position (standard deviation ``s_x``
    pixels) times Gaussian in the pixel's colour (``s_y``, the image's units,
    Euclidean over channels). Both scales lie between about 5.3e-155 and
    4.7e153 (where ``1 / (2 s^2)`` is a normal float64 number), else
    :class:`~nadaraya.NadarayaError`.
    """
    sx = _positive(sigma_space, "sigma_space")
    sy = _positive(sigma_color, "sigma_color")
    return QuadraticKernel(position=1.0 / _square(sx, "sigma_space", 2.0, "2 sigma_space^2"),
                           value=1.0 / _square(sy, "sigma_color", 2.0, "2 sigma_color^2"),
                           ndim=ndim)


def gaussian_patch(patch_size: int, ndim: int = 2) -> torch.Tensor:
    """scikit-image's patch weights: a Gaussian of s.d. ``(patch_size - 1) / 4``.

    Returns
    -------
    torch.Tensor of shape (patch_size,) * ndim
    """
    r = patch_size // 2
    a = max((patch_size - 1) / 4.0, 1e-12)
    u = torch.arange(-r, r + 1, dtype=torch.float64)
    g1 = torch.exp(-(u * u) / (2 * a * a))
    out = g1
    for _ in range(ndim - 1):
        out = out[..., None] * g1
    return out


def nlm_kernel(h: float, patch: Any, channels: int, *, sigma: float = 0.0) -> QuadraticKernel:
    """Non-local means: ``Q_x = 0``, ``Q_y = diag(g) (x) I_c / (c h^2 sum g)``.

    ``t = [x; patch]``: ``r^2`` is the ``g``-weighted mean over patch pixels and
    channels of the squared differences, divided by ``h^2``; with a noise
    level ``sigma`` the weight is ``exp(-max(r^2 - 2 sigma^2 / h^2, 0))``
    (Buades, Coll and Morel 2011; scikit-image's ``sigma``).
    """
    h = _positive(h, "h")
    g = _tensor(patch, "patch")
    ndim = g.ndim
    if float(g.sum()) <= 0:
        raise NadarayaError("patch weights must not all be zero.")
    scale = 1.0 / _square(h, "h", channels * float(g.sum()), "c sum(g) h^2")
    sigma = float(sigma.detach() if isinstance(sigma, torch.Tensor) else sigma)
    if not (math.isfinite(sigma) and sigma >= 0):
        raise NadarayaError(f"sigma must be a number >= 0; got {sigma!r}.")
    ratio = sigma / h
    noise = 2.0 * ratio * ratio
    if not math.isfinite(noise):
        raise NadarayaError(
            f"sigma / h must be below about {math.sqrt(sys.float_info.max / 2):.3g}, where the "
            f"noise offset 2 sigma^2 / h^2 is a float64 number; got sigma={sigma!r} and "
            f"h={h!r}. So large a noise level weighs every patch alike: lower sigma or raise h."
        )
    return QuadraticKernel(None, scale, patch=g, ndim=ndim, noise=noise)


def steering_kernel(h: float, covariance: Any) -> QuadraticKernel:
    """LARK / steering kernel: ``Q_x = C_j / (2 h^2)`` per key, weight ``sqrt(det C_j)``.

    Parameters
    ----------
    h : float
        Global smoothing in pixels.
    covariance : array of shape (n_keys, d, d)
        The steering matrices ``C_j`` (see :mod:`nadaraya.image.steering`).
    """
    h = _positive(h, "h")
    c = _tensor(covariance, "covariance")
    if c.ndim < 2 or c.shape[-1] != c.shape[-2]:
        raise NadarayaError(
            f"covariance must have shape (n_keys, d, d); got {tuple(c.shape)}."
        )
    d = c.shape[-1]
    logdet = 0.5 * torch.logdet(c.reshape(-1, d, d)).reshape(c.shape[:-2])
    if not bool(torch.isfinite(logdet).all()):
        raise NadarayaError(
            "covariance must hold positive-definite matrices (each determinant > 0); some "
            "are singular or indefinite. Regularise them, e.g. C + 1e-6 * I."
        )
    field = c / _square(h, "h", 2.0, "2 h^2")
    if not bool(torch.isfinite(field).all()):
        raise NadarayaError(
            f"covariance / (2 h^2) overflows float64 (h={h!r}, largest entry of covariance "
            f"{float(c.abs().max()):.3g}); raise h or scale the covariance down."
        )
    return QuadraticKernel(position_field=field, ndim=d, key_log_weight=logdet)
