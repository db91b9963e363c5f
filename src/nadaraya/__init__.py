"""nadaraya: kernel regression and attention are the same operator.

    out(q) = sum_{j in M(q)} K(q, k_j) v_j / sum_{j in M(q)} K(q, k_j)

:func:`smooth` computes it exactly, in bounded memory, on CPU or GPU;
:func:`weights` gives rows of the smoother matrix; :func:`explain` says which
engine runs a problem and why. Heavy dependencies load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._config import config_context, get_config, set_config
from ._errors import NadarayaError

__version__ = "0.1.0"

__all__ = [
    "NadarayaError",
    "RandomFeatures",
    "__version__",
    "config_context",
    "explain",
    "get_config",
    "kernels",
    "masks",
    "set_config",
    "smooth",
    "weights",
]

_LAZY = {
    "smooth": ("nadaraya.engine", "smooth"),
    "weights": ("nadaraya.engine", "weights"),
    "explain": ("nadaraya.engine", "explain"),
    "RandomFeatures": ("nadaraya.engine", "RandomFeatures"),
    "kernels": ("nadaraya.kernels", None),
    "masks": ("nadaraya.masks", None),
    "engine": ("nadaraya.engine", None),
    "datasets": ("nadaraya.datasets", None),
    "memory": ("nadaraya.memory", None),
    "estimators": ("nadaraya.estimators", None),
    "image": ("nadaraya.image", None),
    "nn": ("nadaraya.nn", None),
    "plot": ("nadaraya.plot", None),
}

if TYPE_CHECKING:  # pragma: no cover
    from . import kernels, masks
    from .engine import RandomFeatures, explain, smooth, weights


def __getattr__(name: str) -> Any:
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'nadaraya' has no attribute {name!r}") from None
    mod = importlib.import_module(module)
    value = mod if attr is None else getattr(mod, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
