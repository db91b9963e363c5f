"""The kernel algebra's base names, from the modules that define them.

:class:`Kernel` (``_kernel``) on the module and parameter protocol
(``_module``), :class:`BoundKernel` (``_bound``) and the composites
:class:`ProductKernel` and :class:`SumKernel` (``_composite``).
"""

from __future__ import annotations

from ._bound import BoundKernel
from ._composite import ProductKernel, SumKernel
from ._kernel import Kernel

__all__ = ["BoundKernel", "Kernel", "ProductKernel", "SumKernel"]
