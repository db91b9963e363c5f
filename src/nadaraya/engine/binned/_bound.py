r"""The proven error bound of the binned sums, and its assembly for each query.

Setting. Kernel coordinates (unit bandwidth): ``K(z) = f(||z||)``, ``d`` = 1
or 2. Nodes ``g = o + i delta``. For one column with weights ``w_j`` (1, or
``v_jc`` with ``|v_jc| <= V_c = max_j |v_jc|``) the exact sum at a query is
``S(q) = sum_j w_j K(q - k_j)``; ``u = 2^-53``.

1. Binning. Key ``k_j`` spreads over the corners ``g`` of its cell with the
   multilinear (hat) weights ``lam_jg >= 0``, ``sum_g lam_jg = 1``. Masses
   ``c_g = sum_j w_j lam_jg`` and ``|c|_g = sum_j |w_j| lam_jg <= V c0_g`` (``c0``
   the masses of the weights 1). The binned sum
   ``S_b(x) = sum_g c_g K(x - g) = sum_j w_j (I K(x - .))(k_j)`` replaces each
   term by its multilinear interpolant ``I`` over the key's cell.

2. One cell. On one axis, linear interpolation of ``phi`` over a cell of
   side ``delta`` errs by at most ``delta^2 / 8 max|phi''|`` where ``phi`` is
   C^2, plus ``J delta / 4`` for each kink where ``phi'`` jumps by ``J`` (write
   ``phi = smooth + J (t - t0)_+``; the ramp's interpolant is off by at most
   ``J t0 (delta - t0) / delta``). Multilinear interpolation is ``I_1 I_2`` and
   ``f - I_1 I_2 f = (f - I_1 f) + I_1 (f - I_2 f)`` with ``|I_1 g| <= max|g|``:
   the axes' errors add. Along an axis ``d2K/dz_i^2 = f'' a_i + (f'/r)(1 - a_i)``
   with ``a_i = (z_i / r)^2 in [0, 1]``, so ``|d2K/dz_i^2| <= D_d(r)``
   (``D_1 = |f''|``, ``D_2 = max(|f''|, |f'| / r)``). A line meets a kink sphere
   of radius ``rho`` at most twice, the directional jump at most ``J``, and when
   both meets lie on one cell's side their chord is at most ``delta`` and each
   jump at most ``J delta / (2 rho)``: the jumps on one side add to at most
   ``J kappa``, ``kappa = max(1, min(2, delta / rho))`` (1 for a point kink,
   :func:`._envelope.crossings`). The interpolant is also a convex combination
   of corner values, each within ``sqrt(d) delta Lmax`` (Lipschitz). So for a
   cell whose offsets have radii in ``[lo, hi]``::

       |K - I K| <= c = min(d (delta^2 / 8 Dmax + delta / 4 Jin), sqrt(d) delta Lmax)

   with ``Dmax``, ``Lmax`` (``|f'|``) the maxima over ``[lo, hi]`` and ``Jin`` the
   sum of ``J kappa`` over the kinks inside (:mod:`._profiles`). The Lipschitz
   form serves the Laplacian's apex in 2-D, where ``D_2`` is unbounded.

3. Key term. A query ``q`` sits in a cell with corners ``g'``. For a key in
   the cell with corner ``g`` and any ``y`` in that cell,
   ``q - y in (g' - g) + [-w, w]^d`` with ``w = 2 delta + 2 pos_err``. So the
   key's error is at most ``c(g' - g)`` for each of its corners, hence at most
   ``sum_g lam_jg c(g' - g)``, and ``|S(q) - S_b(q)| <= sum_g |c|_g c(g' - g)``.

4. Query term. The sum is read off the nodes by the same interpolation:
   ``S_b - I S_b = sum_g c_g (K(. - g) - I K(. - g))``, and over the query's
   cell ``x - g in (g' - g) + [-w, w]^d``: ``|S_b(q) - I S_b(q)| <= sum_g |c|_g c(g' - g)``.

5. Positions. ``(x - o) / delta`` (plus ``P``) is rounded, so binning and
   interpolation act at points within ``pos_err`` (per coordinate) of the
   true ones, inside the cells they are assigned to: ``w`` above includes it,
   and the move costs ``sqrt(d) pos_err Lmax`` per key and per query.

6. Node values. The convolution is truncated to offsets ``|s_i| <= L_i``: the
   rest weighs at most ``W f(L delta)`` (``W = sum_j |w_j|``,
   ``L = min L_i``) and nothing at a node within ``L_i`` cells of every key
   node on every axis ("whole"). A node's mass adds ``2^d`` sums (one per
   corner role), each of at most ``crowd`` products in order (``np.bincount``;
   ``crowd`` bounds the keys in a cell), a product of weight and hat weights
   rounded at most four times: ``|c^_g - c_g| <= eta |c|_g`` with
   ``eta = (crowd + 2^d + 8) u``. The
   kernel samples err by ``sample_error`` (:mod:`._profiles`). The FFT
   convolution ``y = IFFT(FFT x . FFT k)`` errs, per entry, by at most
   ``||y^ - y||_2 <= eps (2.5 ||x||_2 ||k||_1 + ||x||_1 ||k||_2)`` (from
   ``||fl(FFT x) - FFT x||_2 <= eps sqrt(N) ||x||_2`` and
   ``||FFT k||_inf <= ||k||_1``; the product and the inverse transform add
   ``(eps + 3 u) ||x||_2 ||k||_1`` and ``eps^2 sqrt(N) ||x||_2 ||k||_2``, covered by
   the factor ``1 + eps sqrt(N)``), with ``eps = 32 u (log2 N + 2 d)``. Higham
   (Accuracy and Stability of Numerical Algorithms, 2nd ed., Thm. 24.2) gives
   ``log2 N (mu + gamma_4 (sqrt 2 + mu))``, about ``6.7 u`` per factor of two,
   for radix-2 Cooley-Tukey with twiddles accurate to ``mu ~ u``; the ``32 u``
   leaves room for pocketfft's radix-3, 4 and 5 butterflies on the 2, 3,
   5-smooth lengths used here (each a small DFT of at most 5 points and one
   twiddle product), and the ``2 d`` for the passes of a multi-dimensional
   transform. The tests check every bound against exact sums.
   Node errors reach a query through the interpolation weights (a convex
   combination).

7. Assembly. Every offset-dependent term goes into one envelope kernel
   (:mod:`._envelope`), sampled at the offsets ``s``::

       E(s) = 2 c(s) + 2 sqrt(d) pos_err Lmax(s) + eta f(lo(s)) + sample_error(s)

   and ``B = max(c0^ * E, 0) + rho_E`` is computed by the same FFT (``rho_E`` its
   rounding). Each corner ``g'`` gives a valid bound, so their interpolation
   does too. With ``E_tail`` the envelope beyond the truncation, ``rho_c`` the
   FFT rounding of column ``c``, ``F = 1 + 2 eta + 2^-30`` (the masses behind
   ``B`` are computed ones; the bound's own arithmetic) and ``out = 1 - whole``::

       total_err = F (I B + rho_0 + out n (f(L delta) + E_tail)) + 16 u (|total| + 2 e_0)
       acc_err_c = F (V_c (I B + out n E_tail) + rho_c + out W_c f(L delta))
                   + 16 u (V_c (|total| + e_0) + 2 e_c)

   the last terms the rounding of the interpolation itself (``e_0``, ``e_c``
   the preceding parts). A query beyond the nodes' box gets ``total = acc = 0``
   and the bounds ``n f(r_q)``, ``W_c f(r_q)``, ``r_q`` its distance to the keys'
   box: correct, and never proven, so the dispatcher recomputes it.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..certified import Sums
from ._envelope import SLACK, box_radii, envelope
from ._plan import Grid
from ._profiles import Profile

__all__ = ["assemble", "fft_rounding"]

_U = 2.0**-53


def fft_rounding(x: torch.Tensor, kernel: tuple[float, float], size: int, d: int) -> float:
    """Bound on each entry's rounding error in the FFT convolution of ``x`` with a kernel.

    ``kernel`` holds the kernel's ``(||k||_1, ||k||_2)``; ``size`` is the FFT's length.
    """
    eps = 32.0 * _U * (math.log2(size) + 2.0 * d)
    x1, x2 = (float(torch.linalg.vector_norm(x, ord=o)) for o in (1, 2))
    k1, k2 = kernel
    return eps * (2.5 * x2 * k1 + x1 * k2) * (1.0 + eps * math.sqrt(size)) * (1.0 + SLACK)


def assemble(profile: Profile, grid: Grid, box: tuple[torch.Tensor, torch.Tensor],
             queries: torch.Tensor, weight: list[float], vmax: list[float],
             rounding: list[float], mass_rel: float, inside: torch.Tensor, sums: torch.Tensor,
             whole: torch.Tensor) -> Sums:
    """The sums and their bounds for every query (step 7 of the module docstring).

    Every tensor is float64 (``inside`` and ``whole`` bool) on the queries' device.

    Parameters
    ----------
    box : (torch.Tensor, torch.Tensor) of shape (d,) each
        The keys' smallest and largest coordinates.
    queries : torch.Tensor of shape (m, d)
    weight : list of float, length p + 1
        ``W``: ``n`` for the weights 1, then ``sum_j |v_jc|`` per column.
    vmax : list of float, length p
        ``V_c = max_j |v_jc|``.
    rounding : list of float, length p + 1
        ``rho_c``: the FFT rounding of each convolved column.
    mass_rel : float
        ``eta``, the relative rounding of the masses.
    inside : torch.Tensor of shape (m,), bool
        Queries on the nodes' box.
    sums : torch.Tensor of shape (p + 2, m_inside)
        Their interpolated ``total``, ``acc_c``, then the bound ``I B``.
    whole : torch.Tensor of shape (m_inside,), bool
        Whether the truncation left nothing out at the query's corners.
    """
    m, p = queries.shape[0], len(weight) - 1
    d, delta, n = grid.d, grid.delta, float(weight[0])
    device = queries.device
    factor = 1.0 + 2.0 * mass_rel + SLACK
    radius = min(grid.reach) * delta
    cut = float(profile.value(np.float64(radius * radius))) * (1.0 + SLACK)
    lo, _ = box_radii([np.float64((min(grid.reach) + 1) * delta)], 2 * delta + 2 * grid.pos_err)
    tail = float(envelope(profile, lo, np.float64(np.inf), lo * lo, delta, d, grid.pos_err,
                          mass_rel))
    everywhere = bool(inside.all())
    partial = not bool(whole.all())
    out = (~whole).to(torch.float64) if partial else None
    total = sums[0] if everywhere else queries.new_zeros(m)
    acc = queries.new_zeros(p, m)
    total_err, acc_err = queries.new_empty(m), queries.new_empty(p, m)

    # queries on the grid: e_0 = F (I B + rho_0 + out n (cut + tail)), then rounding
    bound, size = sums[-1], sums[0].abs()
    e0 = bound + rounding[0]
    if out is not None:
        e0 += out * (n * (cut + tail))
    e0 *= factor
    err = size * (16.0 * _U)
    err += e0 * (1.0 + 32.0 * _U)
    _put(total_err, inside, everywhere, err)
    if not everywhere:
        total[inside] = sums[0]
    size += e0
    for c in range(p):
        ec = bound * (factor * vmax[c])
        ec += factor * rounding[1 + c]
        if out is not None:
            ec += out * (factor * (vmax[c] * n * tail + weight[1 + c] * cut))
        err = size * (16.0 * _U * vmax[c])
        err += ec * (1.0 + 32.0 * _U)
        _put(acc_err[c], inside, everywhere, err)
        _put(acc[c], inside, everywhere, sums[1 + c])

    if not everywhere:
        # beyond the grid: nothing computed, bounded by the nearest possible key
        far = queries[~inside]
        low, high = box
        gap = torch.maximum(torch.maximum(low - far, far - high), far.new_zeros(()))
        r2 = (gap.square().sum(dim=1) * (1.0 - 1e-12)).cpu().numpy()
        near = torch.from_numpy(profile.value(r2) * factor).to(device)
        total_err[~inside] = n * near
        acc_err[:, ~inside] = torch.tensor(weight[1:], dtype=torch.float64,
                                           device=device)[:, None] * near
    return Sums(total, acc.T.contiguous(), total_err, acc_err.T.contiguous())


def _put(out: torch.Tensor, rows: torch.Tensor, everywhere: bool, x: torch.Tensor) -> None:
    if everywhere:
        out[:] = x
    else:
        out[rows] = x
