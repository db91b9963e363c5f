"""Image denoising and reconstruction as kernel smoothing on the grid engine.

Every filter here is one kernel, ``K(t_i, t_j) = exp(-(t_i - t_j)^T Q (t_i - t_j))``
over augmented vectors ``t = [position; pixel value or patch]``, with its own
``Q`` (see :mod:`nadaraya.kernels.quadratic`):

* :func:`kernel_regression`: ``Q_x = I / (2 h^2)`` (classic, order 0 or 2);
* :func:`bilateral`: ``Q_x = I / (2 s_x^2)``, ``Q_y = I / (2 s_y^2)``;
* :func:`kernel_filter`: any kernel object of that family, e.g.
  ``Gaussian(s_x).on([0, 1]) * Gaussian(s_y).on([2])``, the same object a
  regressor fits with and an attention module trains;
* :func:`non_local_means`: ``Q_x = 0``, ``Q_y`` = patch weights / ``h^2``;
* :func:`steering_kernel_regression`: ``Q_x = C_j / (2 h^2)`` from local gradients;
* :func:`nl_bayes`: non-local Bayes, Wiener estimates over groups of the
  ``k`` nearest patches (the k-nearest mask on non-local means' patch distance);
* :func:`reconstruct`: kernel regression from scattered samples;
* :func:`denoise`: any of them with parameters set from the noise level,
  estimated by :func:`estimate_noise` when not given.

Images are ``(height, width)`` or ``(height, width, channels)``, uint8 or
float, NumPy or torch (CUDA tensors stay on the GPU); results have the input's
dtype and range. The filters run block by block, each block read with the
halo its pixels depend on, so their temporaries stay within the
working-memory budget (:func:`nadaraya.config_context`) whatever the image's
size, and they accept values anywhere in their dtype's range (a float32
image near ``3e38``, a float64 one from the subnormal numbers to ``1.7e308``).

A dask array (2-D, or ``(height, width, channels)``) gives a dask array,
lazily: each chunk is filtered with the halo its pixels depend on through
:func:`dask.array.map_overlap` (``boundary="none"``, so the filter's own
border rule applies at the image's true border only), and the result equals
the in-memory filter's whatever the chunking (chunks smaller than the halo
are merged with their neighbours first). What a filter would derive from the
whole image is computed once, before the graph is built: the data range of a
float image in one pass, the noise level (:func:`estimate_noise`, the same
number as in memory) in four; the global search of :func:`non_local_means`
(``search_radius=None``) has no halo and is refused.
Dask is imported only when a filter meets a dask array.
"""

from __future__ import annotations

from .bilateral import bilateral
from .denoise import denoise
from .kernel_filter import kernel_filter
from .metrics import psnr
from .nlbayes import nl_bayes
from .nlm import non_local_means
from .noise import estimate_noise
from .reconstruct import reconstruct
from .regression import kernel_regression
from .steering import steering_kernel_regression

__all__ = [
    "bilateral",
    "denoise",
    "estimate_noise",
    "kernel_filter",
    "kernel_regression",
    "nl_bayes",
    "non_local_means",
    "psnr",
    "reconstruct",
    "steering_kernel_regression",
]
