"""The linear kernel ``K(q, k) = q^T M k``: a signed kernel.

Linear regression is a smoother with this kernel: with ``M = (X^T X)^-1``
the fitted values ``X (X^T X)^-1 X^T y`` are ``sum_j K(x, x_j) y_j``, the
same form ``X M X^T`` as self-attention's ``softmax(X W_q W_k^T X^T / sqrt(d))``
without the softmax.

Its weights can be negative, so it has no log-weight: it is *signed*. A
signed kernel says so with ``signed = True`` and gives weight blocks through
``_weights_block(q, k)``; the engine sums them directly (the weight domain)
instead of through the online log-sum-exp.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .._errors import NadarayaError
from ._kernel import Kernel
from ._prepared import PreparedKernel

__all__ = ["LinearKernel", "SignedKernel"]

_METRICS = ("identity", "whitened")


class SignedKernel(Kernel):
    """Base of kernels whose weights may be negative (no log-weight exists).

    Subclasses implement :meth:`_weights_block`, the weights ``K`` of a
    block of prepared queries and keys. Their rank (used to find the most
    similar key) is the weight itself.
    """

    signed = True
    log_domain = False

    def _weights_block(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """Weights ``K`` ``(mb, nb)`` of prepared queries ``(mb, e)`` and keys ``(nb, e)``."""
        raise NotImplementedError

    def _weights_pairs(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """Weights ``(mb, K)`` of prepared queries ``(mb, e)`` against their keys ``(mb, K, e)``."""
        rows = [self._weights_block(q[i:i + 1], k[i])[0] for i in range(q.shape[0])]
        return torch.stack(rows) if rows else q.new_zeros(0, k.shape[1])

    def _block(self, q: torch.Tensor, k: torch.Tensor,
               out: torch.Tensor | None = None) -> torch.Tensor:
        raise NadarayaError(
            f"kernel {self!r} is signed: its weights can be negative, so it has no "
            "log-weights. Use it with nadaraya.smooth (which sums weights directly), not in "
            "a product or sum with log-domain kernels nor in nadaraya.weights; the weight "
            "matrix itself is nadaraya.smooth(queries, keys, np.eye(n_keys), kernel, "
            "normalize=False)."
        )

    def _rank(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return self._weights_block(q, k)

    def weights(self, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """Weights ``K(q, k)`` of every query ``(m, d)`` against every key ``(n, d)``."""
        bound = self.bind(queries, keys)
        return self._weights_block(bound.q, bound.k)


def _whitener(k: torch.Tensor) -> torch.Tensor:
    """``W`` ``(d, r)`` with ``W W^T = (K^T K)^+``, from the SVD of the keys ``K``.

    Working from ``K`` rather than ``K^T K`` keeps the condition number
    unsquared; singular values below ``max(n, d) * eps * s_max`` (NumPy's
    ``matrix_rank`` rule) count as zero, so a rank-deficient ``K`` gives the
    pseudo-inverse.
    """
    _, s, vh = torch.linalg.svd(k, full_matrices=False)
    # the rank is a decision, not a function of the keys: read from detached values
    top = float(s[0].detach()) if s.numel() else 0.0
    if top == 0.0:
        return k.new_zeros(k.shape[1], 0)
    tol = top * max(k.shape) * torch.finfo(k.dtype).eps
    r = int((s.detach() > tol).sum())
    return vh[:r].T / s[:r]


class LinearKernel(SignedKernel):
    """Linear kernel ``K(q, k) = q^T M k`` (signed: weights may be negative).

    Parameters
    ----------
    metric : None, "identity", "whitened", array of shape (n_features, n_features)
        The matrix ``M``. ``None`` or ``"identity"``: the plain dot product.
        ``"whitened"``: the pseudo-inverse of the keys' scatter matrix
        ``(K^T K)^+`` (the inverse covariance divided by ``n_keys``), so that
        ``nadaraya.smooth(X, X, y, LinearKernel("whitened"), normalize=False)``
        is the least-squares fit ``X (X^T X)^+ X^T y``. An array (or a torch
        tensor, which may require grad) is used as ``M`` itself; it need not
        be symmetric (attention's ``W_q W_k^T / sqrt(d)``).
    intercept : bool, default False
        Centre queries and keys on the keys' mean ``c`` and add ``1 / n_keys``:
        ``K(q, k) = 1 / n + (q - c)^T M (k - c)`` (with ``"whitened"``, ``M``
        is computed from the centred keys). This is the hat matrix of least
        squares with an intercept; its rows sum to one.
    scale : float, optional
        A factor ``s`` of the weights, ``s q^T M k`` (1 when None). It cancels
        in the normalisation; it is there to train (``learnable``), as the
        scale of attention's linear kernel (Tsai et al.), one per head with
        ``heads``.
    learnable, heads
        Train ``s`` (``s * softplus(raw_scale)``), one per head with ``heads``.

    Notes
    -----
    With ``normalize=True`` (the default of :func:`nadaraya.smooth`) the
    weighted sum is divided by the signed row sum ``sum_j K(q, k_j)``; a row
    whose sum is zero is an empty row (``empty=`` policy). With
    ``intercept=True`` every row sums to one, so both settings agree.

    Examples
    --------
    >>> import numpy as np, nadaraya
    >>> from nadaraya.kernels.linear import LinearKernel
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20, 3)); y = X @ [1.0, -2.0, 0.5] + 3.0
    >>> fit = nadaraya.smooth(X, X, y, LinearKernel("whitened", intercept=True),
    ...                       normalize=False)
    >>> bool(np.allclose(fit, y))
    True
    """

    name = "linear"

    def __init__(self, metric: Any = None, *, intercept: bool = False, scale: Any = None,
                 learnable: bool = False, heads: int | None = None) -> None:
        from .dot import check_scale

        check_scale(scale)
        if metric is None or (isinstance(metric, str) and metric.lower() == "identity"):
            metric = "identity"
        elif isinstance(metric, str):
            if metric.lower() not in _METRICS:
                raise NadarayaError(
                    f"metric {metric!r} is not known; use 'identity', 'whitened' or a "
                    "(n_features, n_features) matrix M."
                )
            metric = metric.lower()
        else:
            m = metric if isinstance(metric, torch.Tensor) else torch.as_tensor(
                np.asarray(metric, dtype=float))
            if m.ndim != 2 or m.shape[0] != m.shape[1]:
                raise NadarayaError(
                    f"metric must be a square (n_features, n_features) matrix M; got shape "
                    f"{tuple(m.shape)}."
                )
            if not bool(torch.isfinite(m).all()):
                raise NadarayaError("metric must hold finite numbers; it has NaN or infinity.")
        if not isinstance(intercept, bool | np.bool_):
            raise NadarayaError(f"intercept must be True or False; got {intercept!r}.")
        self.metric = metric
        self.intercept = bool(intercept)
        self.scale = scale
        self._learn(learnable, heads)

    @property
    def batched(self) -> bool:  # type: ignore[override]
        return isinstance(self.metric, str) and self.metric == "identity" and not self.intercept

    def _scaled(self, q: torch.Tensor) -> torch.Tensor:
        factor = self._factor(q)
        if self.scale is not None:
            q = q * self.scale
        return q if factor is None else q * factor

    def _prepared(self, q: torch.Tensor, k: torch.Tensor) -> PreparedKernel:
        if not self.batched:
            return super()._prepared(q, k)
        qs = self._scaled(q)
        return PreparedKernel(qs, k, self._weights_block, log_domain=False, is_dot=True,
                              homogeneous=True, name=self.name)

    def _matrix(self, like: torch.Tensor) -> torch.Tensor:
        m = self.metric
        m = m if isinstance(m, torch.Tensor) else torch.as_tensor(np.asarray(m, dtype=float))
        return m.to(dtype=like.dtype, device=like.device)

    def _check(self, q: torch.Tensor, k: torch.Tensor) -> None:
        if isinstance(self.metric, str):
            return
        d = q.shape[1]
        if self._matrix(q).shape[0] != d:
            raise NadarayaError(
                f"metric must be ({d}, {d}) for {d} feature(s); got shape "
                f"{tuple(self._matrix(q).shape)}."
            )

    def _prepare(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n = k.shape[0]
        if self.intercept:
            centre = k.mean(dim=0)
            q, k = q - centre, k - centre
        if isinstance(self.metric, str) and self.metric == "identity":
            qp, kp = q, k
        elif isinstance(self.metric, str):
            w = _whitener(k)
            qp, kp = q @ w, k @ w
        else:
            qp, kp = q @ self._matrix(q), k
        qp = self._scaled(qp)
        if self.intercept:
            # 1/n as one more coordinate: q'.k' = 1/n + (q - c)^T M (k - c)
            c = 1.0 / np.sqrt(max(n, 1))
            qp = torch.cat([qp, qp.new_full((qp.shape[0], 1), c)], dim=1)
            kp = torch.cat([kp, kp.new_full((kp.shape[0], 1), c)], dim=1)
        return qp, kp

    def _weights_block(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return q @ k.mT

    def _weights_pairs(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return (k * q[:, None, :]).sum(-1)

    def _params(self) -> str:
        m = self.metric if isinstance(self.metric, str) else "M"
        parts = [] if m == "identity" else [repr(m) if isinstance(self.metric, str) else "M"]
        if self.intercept:
            parts.append("intercept=True")
        if self.scale is not None:
            parts.append(f"scale={self.scale!r}")
        return ", ".join(parts)
