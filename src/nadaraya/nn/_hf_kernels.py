"""Which kernel a ``"nadaraya"`` attention module runs with: specs, the context, the config.

A kernel spec is a name of :data:`nadaraya.kernels.ATTENTION_NAMES`, a dict
``{"name": ..., "scale": ...}`` (the form saved in a model's config) or a
:class:`~nadaraya.kernels.Kernel`. :func:`module_kernel` resolves the order
documented in :mod:`nadaraya.nn.huggingface`: the :func:`use_kernel` context,
the module's attached kernel, ``config.nadaraya_kernel``, softmax.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Iterator, Mapping
from typing import Any

from torch import nn

from .._errors import NadarayaError
from ..kernels import ATTENTION_NAMES, Kernel, get_attention_kernel

__all__ = ["CONFIG_KEY", "SUBMODULE", "check_spec", "module_kernel", "use_kernel"]

#: The config attribute that names the kernel.
CONFIG_KEY = "nadaraya_kernel"
#: The submodule :func:`nadaraya.nn.huggingface.attach_kernels` adds to each attention module.
SUBMODULE = "nadaraya_kernel"

_SPEC_KEYS = ("name", "scale")
_context: contextvars.ContextVar[Any] = contextvars.ContextVar("nadaraya_kernel", default=None)


def _choices() -> str:
    return (f"one of {', '.join(map(repr, ATTENTION_NAMES))}, a dict "
            "{'name': ..., 'scale': ...} or a nadaraya.kernels.Kernel")


def check_spec(spec: Any, source: str, *, objects: bool = True) -> Any:
    """Refuse a kernel spec that is not a known name, a spec dict or (if allowed) a kernel."""
    if isinstance(spec, Kernel):
        if not objects:
            raise NadarayaError(
                f"{source} must be a kernel name or a dict {{'name': ..., 'scale': ...}} (it is "
                f"saved with the config as JSON); got a {type(spec).__name__} object. Give the "
                "object to nadaraya.nn.huggingface.attach_kernels or use_kernel instead."
            )
        return spec
    if isinstance(spec, Mapping):
        extra = sorted(set(spec) - set(_SPEC_KEYS))
        if extra or "name" not in spec:
            raise NadarayaError(
                f"{source} as a dict takes the keys 'name' (required: one of "
                f"{', '.join(ATTENTION_NAMES)}) and 'scale'; got keys {sorted(spec)}. "
                "Example: {'name': 'rbf', 'scale': 0.125}."
            )
        scale = spec.get("scale")
        if scale is not None and (isinstance(scale, bool) or not isinstance(scale, int | float)):
            raise NadarayaError(f"{source}['scale'] must be a positive number (the kernel's "
                                f"scale, as SDPA's); got {scale!r}.")
        _resolve(spec["name"], None if scale is None else float(scale), source)
        return dict(spec)
    if isinstance(spec, str):
        _resolve(spec, None, source)
        return spec
    raise NadarayaError(f"{source} must be {_choices()}; got {type(spec).__name__} {spec!r}.")


@functools.lru_cache(maxsize=256)
def _resolve_name(name: Any, scale: float | None, source: str) -> Kernel:
    """The kernel of a name and scale, made once per (name, scale)."""
    try:
        return get_attention_kernel(name, scale=scale)
    except NadarayaError as exc:
        if source == "kernel":
            raise
        raise NadarayaError(f"{source}: {exc}") from None


def _resolve(name: Any, scale: float | None, source: str) -> Kernel:
    if not isinstance(name, str):
        raise NadarayaError(f"{source} must name a kernel ({_choices()}); got {name!r}.")
    return _resolve_name(name, scale, source)


def _from_spec(spec: Any, scaling: float | None, source: str) -> Kernel:
    if isinstance(spec, Kernel):
        return spec
    if isinstance(spec, Mapping):
        scale = spec.get("scale")
        scale = scaling if scale is None else scale
        return _resolve(spec["name"], None if scale is None else float(scale), source)
    return _resolve(spec, None if scaling is None else float(scaling), source)


def module_kernel(module: nn.Module, scaling: float | None = None) -> Kernel:
    """The kernel an attention module runs with now (context, attached, config, softmax).

    Parameters
    ----------
    module : torch.nn.Module
        An attention module of a ``transformers`` model (it has ``config``).
    scaling : float, optional
        The scale a kernel name takes; the module's ``scaling`` by default.

    Returns
    -------
    Kernel
        A kernel made from a name is made once per (name, scale) and shared
        by every module that asks for it: copy it before changing it.

    Examples
    --------
    >>> import torch
    >>> from nadaraya.nn.huggingface import module_kernel, use_kernel
    >>> with use_kernel("rbf"):
    ...     module_kernel(torch.nn.Module(), scaling=0.25)
    Gaussian(bandwidth=2.0)
    """
    if scaling is None:
        scaling = getattr(module, "scaling", None)
    spec = _context.get()
    if spec is not None:
        return _from_spec(spec, scaling, "use_kernel(kernel)")
    attached = getattr(module, SUBMODULE, None)
    if isinstance(attached, Kernel):
        return attached
    config = getattr(module, "config", None)
    spec = getattr(config, CONFIG_KEY, None)
    if spec is not None:
        check_spec(spec, f"config.{CONFIG_KEY}", objects=False)
        return _from_spec(spec, scaling, f"config.{CONFIG_KEY}")
    return _from_spec("softmax", scaling, "kernel")


@contextlib.contextmanager
def use_kernel(kernel: str | Mapping[str, Any] | Kernel) -> Iterator[None]:
    """Run every ``"nadaraya"`` attention inside the block with ``kernel``.

    It overrides attached kernels and ``config.nadaraya_kernel``; the previous
    choice comes back on exit, also after an error. The choice is a
    :class:`contextvars.ContextVar`, so threads and asyncio tasks each keep
    their own.

    Parameters
    ----------
    kernel : str, dict or Kernel
        A name (scale: the module's ``scaling``), ``{"name": ..., "scale": ...}``
        or a kernel object (used as it is by every layer).

    Examples
    --------
    >>> from nadaraya.nn.huggingface import use_kernel
    >>> with use_kernel("laplacian"):
    ...     pass
    """
    spec = check_spec(kernel, "use_kernel(kernel)")
    token = _context.set(spec)
    try:
        yield
    finally:
        _context.reset(token)
