"""The protocol every kernel object follows: a torch module with scikit-learn's parameters.

:class:`ParameterModule` is a :class:`torch.nn.Module` (as in gpytorch) that

* records the arguments given to ``__init__`` when the object is made, so
  that ``get_params`` returns them whatever the class stores, ``set_params``
  rebuilds the object from them and ``sklearn.base.clone`` gives an
  untrained copy with the same arguments (and columns);
* may carry a learned factor ``softplus(raw_scale)`` (``raw_scale`` a
  parameter initialised so that the factor is one), one per head with
  ``heads=H`` (inputs ``(..., H, L, E)``): the kernel's scale given to
  ``__init__`` stays as it was and the factor multiplies it.
"""

from __future__ import annotations

import copy
import inspect
import math
from typing import Any

import torch
from torch import nn

from .._errors import NadarayaError

__all__ = ["ParameterModule", "own_copy"]

_SOFTPLUS_ONE = math.log(math.expm1(1.0))  # softplus(_SOFTPLUS_ONE) == 1


def own_copy(module: nn.Module) -> Any:
    """A shallow copy of ``module`` whose dictionaries (parameters, children...) are its own."""
    other = copy.copy(module)
    for name, value in list(other.__dict__.items()):
        if type(value) in (dict, type(module._parameters)):
            other.__dict__[name] = copy.copy(value)
    return other


def _clone_value(value: Any) -> Any:
    if isinstance(value, ParameterModule):
        return value.__sklearn_clone__()
    if isinstance(value, list | tuple) and any(isinstance(v, ParameterModule) for v in value):
        return type(value)(_clone_value(v) for v in value)
    return copy.deepcopy(value)


class ParameterModule(nn.Module):
    """A module that records its ``__init__`` arguments and may learn a scale factor.

    Attributes
    ----------
    heads : int or None
        With a learned factor, the number of heads it has one factor for.
    """

    heads: int | None = None

    def __new__(cls, *args: Any, **kwargs: Any) -> ParameterModule:
        obj = super().__new__(cls)
        # the module machinery first, so that subclasses may set parameters at once; through
        # super() (nn.Module is next in every kernel's MRO), which torch.compile traces, so a
        # kernel built inside a compiled function (a new attention scale) breaks no graph
        super(ParameterModule, obj).__init__()
        try:
            bound = inspect.signature(cls.__init__).bind(None, *args, **kwargs)
        except TypeError:
            bound = None  # __init__ itself will say what is wrong
        if bound is not None:
            bound.apply_defaults()
            params = dict(bound.arguments)
            params.pop(next(iter(params)))  # self
            obj.__dict__["_init_params"] = {
                k: v for k, v in params.items()
                if inspect.signature(cls.__init__).parameters[k].kind
                not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)}
        return obj

    def __init__(self) -> None:
        """Nothing to do: ``__new__`` set up the module (subclasses may omit this call)."""

    # -- parameters (scikit-learn protocol) --------------------------------
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The arguments this kernel was made with (scikit-learn's protocol).

        Parameters
        ----------
        deep : bool, default True
            Accepted for scikit-learn; kernel arguments are returned as given.

        Returns
        -------
        dict of str to object
        """
        return dict(self.__dict__.get("_init_params", {}))

    def set_params(self, **params: Any) -> ParameterModule:
        """Rebuild this kernel, in place, with some arguments changed.

        The learned factor of a learnable kernel starts again at one; the
        columns stay.

        Examples
        --------
        >>> from nadaraya.kernels import Gaussian
        >>> Gaussian(1.0).set_params(bandwidth=0.5)
        Gaussian(bandwidth=0.5)
        """
        current = self.get_params()
        for key in params:
            if key not in current:
                raise NadarayaError(
                    f"{key!r} is not a parameter of {type(self).__name__}; its parameters are "
                    f"{', '.join(current) or 'none'}."
                )
        fresh = type(self)(**{**current, **params})
        columns = self.__dict__.get("columns")
        self.__dict__.clear()
        self.__dict__.update(fresh.__dict__)
        if columns is not None:
            self.__dict__["columns"] = columns
        return self

    def __sklearn_clone__(self) -> ParameterModule:
        """An untrained copy with the same arguments and columns (``sklearn.base.clone``)."""
        fresh = type(self)(**{k: _clone_value(v) for k, v in self.get_params().items()})
        if "columns" in self.__dict__:
            fresh.__dict__["columns"] = copy.deepcopy(self.columns)
        return fresh

    # -- the learned factor ---------------------------------------------------
    def _learn(self, learnable: bool, heads: int | None) -> None:
        """Register ``raw_scale`` (the learned factor ``softplus(raw_scale)``) if asked."""
        if not isinstance(learnable, bool):
            raise NadarayaError(f"learnable must be True or False; got {learnable!r}.")
        if heads is not None and (isinstance(heads, bool) or not isinstance(heads, int)
                                  or heads < 1):
            raise NadarayaError(f"heads must be a positive integer or None; got {heads!r}.")
        self.learnable = learnable
        self.heads = heads
        if learnable:
            shape = () if heads is None else (heads,)
            self.raw_scale = nn.Parameter(torch.full(shape, _SOFTPLUS_ONE))

    def _factor(self, like: torch.Tensor) -> torch.Tensor | None:
        """The learned factor for points like ``like`` ``(..., L, E)``, or None if fixed.

        Per head it has shape ``(heads, 1, 1)``, which needs inputs
        ``(..., heads, L, E)``.
        """
        raw = self._parameters.get("raw_scale")
        if raw is None:
            return None
        f = nn.functional.softplus(raw).to(like)
        if self.heads is not None:
            if like.ndim < 3 or like.shape[-3] != self.heads:
                raise NadarayaError(
                    f"this kernel has one scale per head ({self.heads} heads) and needs inputs "
                    f"(..., {self.heads}, L, E); got shape {tuple(like.shape)}. Build it "
                    "without heads= to use it on other shapes."
                )
            f = f[:, None, None]
        return f
