"""The grid engine: keys on a regular grid seen through a window of offsets.

What image filters and regular series need from it, and all they may use:

* :func:`grid_smooth`, the smooth itself (state or means, moments for local
  polynomial fits), with the borders in :data:`BORDERS`;
* :func:`window_offsets`, :func:`pad` and :func:`monomials`, the window, the
  padding and the monomials of the displacement;
* :func:`run_blocks` and :class:`Block`, an image (or a volume, any number
  of axes) larger than the working memory cut into blocks with the halo a
  filter reads (:func:`blocks` lists them);
* :func:`nearest_patches`, the ``k`` nearest patches of reference patches
  within a search window (patch grouping, as in non-local Bayes);
* :func:`peak_exponent` and :func:`scale_pow2`, exact scaling by powers of
  two that keeps any image's range inside the dtype.
"""

from __future__ import annotations

from ._blocks import BLOCK_SHARE, Block, blocks, run_blocks
from ._lattice import monomials, pad, window_offsets
from ._patches import nearest_patches
from ._plan import peak_exponent, scale_pow2
from ._smooth import BORDERS, grid_smooth

__all__ = [
    "BLOCK_SHARE",
    "BORDERS",
    "Block",
    "blocks",
    "grid_smooth",
    "monomials",
    "nearest_patches",
    "pad",
    "peak_exponent",
    "run_blocks",
    "scale_pow2",
    "window_offsets",
]
