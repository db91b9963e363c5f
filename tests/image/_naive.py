"""Naive per-pixel double loops: the oracles of the image tests.

Written with NumPy and :mod:`math` only, pixel by pixel and key by key,
without the library's kernels, windows or engine, so they can disagree with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

Weight = Callable[[int, int, int, int], float]


def pad(img: np.ndarray, r: int, mode: str = "reflect") -> np.ndarray:
    """Pad the two spatial axes of ``img`` (H, W) or (H, W, C) by ``r``."""
    widths = [(r, r), (r, r)] + [(0, 0)] * (img.ndim - 2)
    return np.pad(img, widths, mode=mode)


def weighted_mean(img: np.ndarray, weight: Weight, radius: int, *, outside: bool = False,
                  mode: str = "reflect", disk: bool = False) -> np.ndarray:
    """``sum_j w(i, j) y_j / sum_j w(i, j)`` over a window of each pixel.

    ``weight(r, c, r2, c2)`` gets the query pixel and the key pixel in padded
    coordinates; keys outside the image are skipped unless ``outside``.
    """
    h, w = img.shape[:2]
    p = pad(img, radius, mode)
    out = np.zeros(img.shape, dtype=np.float64)
    for i in range(h):
        for j in range(w):
            num, den = 0.0, 0.0
            for a in range(-radius, radius + 1):
                for b in range(-radius, radius + 1):
                    if disk and a * a + b * b > radius * radius:
                        continue
                    y, x = i + a, j + b
                    if not outside and not (0 <= y < h and 0 <= x < w):
                        continue
                    k = weight(i + radius, j + radius, y + radius, x + radius)
                    num = num + k * p[y + radius, x + radius]
                    den += k
            out[i, j] = num / den
    return out


def bilateral(img: np.ndarray, sigma_space: float, sigma_color: float, radius: int,
              disk: bool = True) -> np.ndarray:
    """Gaussian in position times Gaussian in colour (Euclidean over channels)."""
    p = pad(img.astype(np.float64), radius)

    def weight(i: int, j: int, y: int, x: int) -> float:
        d2 = (i - y) ** 2 + (j - x) ** 2
        c2 = float(np.sum((p[i, j] - p[y, x]) ** 2))
        return math.exp(-d2 / (2 * sigma_space**2) - c2 / (2 * sigma_color**2))

    return weighted_mean(img.astype(np.float64), weight, radius, outside=True, disk=disk)


def nlm(img: np.ndarray, h: float, g: np.ndarray, radius: int, sigma: float = 0.0,
        mode: str = "reflect") -> np.ndarray:
    """Non-local means with patch weights ``g``: mean over pixels and channels."""
    img = img.astype(np.float64)
    pr = g.shape[0] // 2
    p = pad(img, pr + radius, mode)
    gg = g if img.ndim == 2 else g[:, :, None]
    channels = 1 if img.ndim == 2 else img.shape[2]
    norm = g.sum() * channels

    def weight(i: int, j: int, y: int, x: int) -> float:
        i, j, y, x = i + pr, j + pr, y + pr, x + pr
        a = p[i - pr:i + pr + 1, j - pr:j + pr + 1]
        b = p[y - pr:y + pr + 1, x - pr:x + pr + 1]
        d2 = float(np.sum(gg * (a - b) ** 2)) / norm
        return math.exp(-max(d2 - 2 * sigma**2, 0.0) / h**2)

    return weighted_mean(img, weight, radius)


def local_polynomial(img: np.ndarray, weight: Weight, radius: int, order: int,
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Weighted least squares of a polynomial in (dr, dc) per pixel (gray images).

    Returns the fitted values and the gradients ``(2, H, W)`` (zero for order 0).
    """
    h, w = img.shape
    out = np.zeros((h, w))
    grad = np.zeros((2, h, w))
    for i in range(h):
        for j in range(w):
            rows, ws, ys = [], [], []
            for a in range(-radius, radius + 1):
                for b in range(-radius, radius + 1):
                    y, x = i + a, j + b
                    if 0 <= y < h and 0 <= x < w:
                        basis = [1.0]
                        if order >= 1:
                            basis += [a, b]
                        if order >= 2:
                            basis += [a * a, a * b, b * b]
                        rows.append(basis)
                        ws.append(weight(i, j, y, x))
                        ys.append(img[y, x])
            xm, wv, yv = np.array(rows, float), np.array(ws), np.array(ys)
            beta = np.linalg.solve(xm.T @ (wv[:, None] * xm), xm.T @ (wv * yv))
            out[i, j] = beta[0]
            if order >= 1:
                grad[:, i, j] = beta[1:3]
    return out, grad


def scattered_polynomial(points: np.ndarray, values: np.ndarray, shape: tuple[int, int],
                         h: float, order: int, radius: int, clip: bool = False) -> np.ndarray:
    """Classic kernel regression at each pixel from samples whose nearest pixel is
    within ``radius`` (per axis); ``clip``: clamped to those samples' range."""
    cells = np.clip(np.rint(points), 0, np.array(shape) - 1)
    out = np.zeros(shape)
    for i in range(shape[0]):
        for j in range(shape[1]):
            sel = (np.abs(cells[:, 0] - i) <= radius) & (np.abs(cells[:, 1] - j) <= radius)
            d = points[sel] - np.array([i, j])
            wv = np.exp(-(d**2).sum(1) / (2 * h * h))
            cols = [np.ones(len(d))]
            if order >= 1:
                cols += [d[:, 0], d[:, 1]]
            if order >= 2:
                cols += [d[:, 0] ** 2, d[:, 0] * d[:, 1], d[:, 1] ** 2]
            xm = np.column_stack(cols)
            beta = np.linalg.solve(xm.T @ (wv[:, None] * xm), xm.T @ (wv * values[sel]))
            out[i, j] = beta[0]
            if clip:
                out[i, j] = min(max(beta[0], values[sel].min()), values[sel].max())
    return out


def psnr(ref: np.ndarray, img: np.ndarray, peak: float) -> float:
    return 10 * math.log10(peak**2 / float(np.mean((ref.astype(float) - img) ** 2)))


def bilateral_volume(vol: np.ndarray, sigma_spatial: float, sigma_color: float, radius: int,
                     disk: bool = True) -> np.ndarray:
    """The bilateral filter of a volume (D, H, W) or (D, H, W, C), voxel by voxel;
    keys beyond the border are the volume mirrored without repeating the edge."""
    vol = vol.astype(np.float64)
    d, h, w = vol.shape[:3]
    widths = [(radius, radius)] * 3 + [(0, 0)] * (vol.ndim - 3)
    p = np.pad(vol, widths, mode="reflect")
    out = np.zeros(vol.shape)
    for i in range(d):
        for j in range(h):
            for k in range(w):
                centre = p[i + radius, j + radius, k + radius]
                num, den = 0.0, 0.0
                for a in range(-radius, radius + 1):
                    for b in range(-radius, radius + 1):
                        for c in range(-radius, radius + 1):
                            d2 = a * a + b * b + c * c
                            if disk and d2 > radius * radius:
                                continue
                            key = p[i + radius + a, j + radius + b, k + radius + c]
                            c2 = float(np.sum((centre - key) ** 2))
                            wgt = math.exp(-d2 / (2 * sigma_spatial**2)
                                           - c2 / (2 * sigma_color**2))
                            num = num + wgt * key
                            den += wgt
                out[i, j, k] = num / den
    return out


def nlm_volume(vol: np.ndarray, h: float, g: np.ndarray, radius: int,
               sigma: float = 0.0) -> np.ndarray:
    """Non-local means of a volume (D, H, W) or (D, H, W, C) with cubic patch weights
    ``g``, voxel by voxel: keys inside the volume only, patches mirrored at the border."""
    vol = vol.astype(np.float64)
    d, h_, w = vol.shape[:3]
    pr = g.shape[0] // 2
    widths = [(pr, pr)] * 3 + [(0, 0)] * (vol.ndim - 3)
    p = np.pad(vol, widths, mode="reflect")
    gg = g if vol.ndim == 3 else g[..., None]
    norm = g.sum() * (1 if vol.ndim == 3 else vol.shape[3])

    def patch(i: int, j: int, k: int) -> np.ndarray:
        return p[i:i + 2 * pr + 1, j:j + 2 * pr + 1, k:k + 2 * pr + 1]

    out = np.zeros(vol.shape)
    for i in range(d):
        for j in range(h_):
            for k in range(w):
                mine = patch(i, j, k)
                num, den = 0.0, 0.0
                for a in range(max(0, i - radius), min(d, i + radius + 1)):
                    for b in range(max(0, j - radius), min(h_, j + radius + 1)):
                        for c in range(max(0, k - radius), min(w, k + radius + 1)):
                            d2 = float(np.sum(gg * (mine - patch(a, b, c)) ** 2)) / norm
                            wgt = math.exp(-max(d2 - 2 * sigma**2, 0.0) / h**2)
                            num = num + wgt * vol[a, b, c]
                            den += wgt
                out[i, j, k] = num / den
    return out
