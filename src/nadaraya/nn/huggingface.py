"""Kernel attention inside Hugging Face ``transformers`` models.

:func:`register` adds an attention function named ``"nadaraya"`` to
``transformers.AttentionInterface`` (and the boolean masks of ``sdpa`` to its
``AttentionMaskInterface``), so any model whose attention goes through that
interface (BERT, GPT-2, Llama, Mistral, Qwen2...) runs with a kernel of
:mod:`nadaraya.kernels`::

    model = AutoModel.from_pretrained(path, attn_implementation="nadaraya")

The sum itself is :func:`nadaraya.nn.functional.kernel_attention`. Each
attention module takes the first kernel it finds, in this order:

1. the kernel of an enclosing :func:`use_kernel` context (per thread and task);
2. a kernel module attached to that attention module by
   :func:`attach_kernels` (its submodule ``nadaraya_kernel``): trainable, it
   moves with the model (``.to``), is in ``model.parameters()`` and in its
   ``state_dict`` (attach again before loading such a state);
3. ``model.config.nadaraya_kernel``: a name (``"rbf"``) or a dict
   ``{"name": "rbf", "scale": 0.1}``, saved with the config;
4. ``"softmax"``, which is the model's own attention.

A name takes the module's ``scaling`` (``1 / sqrt(head_dim)`` in most models)
as its scale unless the spec gives one, so ``"softmax"`` reproduces ``eager``
and ``"rbf"`` is the Gaussian of bandwidth ``scaling ** -0.5``.
``import nadaraya`` registers nothing and imports no ``transformers``.

Examples
--------
>>> from transformers import LlamaConfig, LlamaForCausalLM          # doctest: +SKIP
>>> from nadaraya.nn import huggingface
>>> huggingface.register()                                          # doctest: +SKIP
'nadaraya'
>>> config = LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
...                      num_key_value_heads=2, intermediate_size=128, vocab_size=100,
...                      attn_implementation="nadaraya", nadaraya_kernel="rbf")
...                                                                 # doctest: +SKIP
>>> model = LlamaForCausalLM(config)                                # doctest: +SKIP
>>> with huggingface.use_kernel("softmax"):                         # doctest: +SKIP
...     logits = model(input_ids).logits
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from .._errors import NadarayaError
from ..kernels import Kernel, get_attention_kernel
from ._hf_kernels import CONFIG_KEY, SUBMODULE, check_spec, module_kernel, use_kernel
from .functional import kernel_attention

__all__ = [
    "NAME",
    "attach_kernels",
    "attention_forward",
    "attention_modules",
    "detach_kernels",
    "module_kernel",
    "register",
    "set_kernel",
    "use_kernel",
]

#: The attention implementation's default name.
NAME = "nadaraya"
INSTALL = ("transformers is not installed; the Hugging Face attention interface needs it: "
           "pip install 'nadaraya[minilm]'.")
_UNSUPPORTED = {
    "softcap": "logit soft-capping",
    "s_aux": "attention sinks",
    "sinks": "attention sinks",
}

_SOFTPLUS_ONE = math.log(math.expm1(1.0))  # softplus(_SOFTPLUS_ONE) == 1

_registered: set[str] = set()


def _need_weights(kwargs: Mapping[str, Any]) -> bool:
    """Whether the caller asked for the attention weights (``output_attentions``)."""
    if kwargs.get("output_attentions"):
        return True
    try:  # transformers 5 records outputs with hooks; the request lives in its collector
        from transformers.utils.output_capturing import _active_collector
        collected = _active_collector.get()
    except (ImportError, AttributeError, LookupError):
        return False
    return isinstance(collected, Mapping) and "attentions" in collected


def _with_bias(mask: torch.Tensor | None, bias: torch.Tensor, is_causal: bool,
               query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """A position bias folded into the mask as additive log-weights (hidden keys ``-inf``)."""
    bias = bias.to(query.dtype)
    if mask is None:
        if not is_causal:
            return bias
        L, S = query.shape[-2], key.shape[-2]
        mask = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
    if mask.dtype == torch.bool:
        return bias.masked_fill(~mask, float("-inf"))
    return bias + mask.to(query.dtype)


def attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Kernel attention with the signature of ``transformers``' attention functions.

    Parameters
    ----------
    module : torch.nn.Module
        The calling attention module: its kernel (:func:`module_kernel`), its
        ``num_key_value_groups`` (grouped-query attention) and ``is_causal``.
    query : torch.Tensor of shape (batch, heads, L, head_dim)
    key : torch.Tensor of shape (batch, kv_heads, S, head_dim)
    value : torch.Tensor of shape (batch, kv_heads, S, head_dim_v)
    attention_mask : torch.Tensor of shape (batch, 1 or heads, L, S), optional
        Boolean (True attends, the ``sdpa`` masks registered with the
        function) or additive (``eager``'s, ``0`` and a very negative number).
        Sliding windows and padding are in it.
    scaling : float, optional
        The model's scale; a kernel name takes it as its ``scale``.
    dropout : float, default 0.0
        Dropout on the weights (the model passes 0 in evaluation mode).
    **kwargs
        ``is_causal`` (else ``module.is_causal``: causal when no mask is given
        and ``L > 1``, as ``sdpa``), ``output_attentions``, ``position_bias``
        (added to the log-weights); ``softcap`` and attention sinks are refused.

    Returns
    -------
    attn_output : torch.Tensor of shape (batch, L, heads, head_dim_v)
    attn_weights : torch.Tensor of shape (batch, heads, L, S) or None
        The weights when the caller asked for attentions, else None.

    Examples
    --------
    >>> import torch
    >>> from nadaraya.nn.huggingface import attention_forward
    >>> q = k = v = torch.randn(1, 2, 5, 8)
    >>> out, w = attention_forward(torch.nn.Module(), q, k, v, None, output_attentions=True)
    >>> out.shape, w.shape
    (torch.Size([1, 5, 2, 8]), torch.Size([1, 2, 5, 5]))
    """
    for name, what in _UNSUPPORTED.items():
        if kwargs.get(name) is not None:
            raise NadarayaError(
                f"{name} ({what}) was passed by {type(module).__name__}, and the nadaraya "
                "attention has no such term; load this model with attn_implementation='eager'."
            )
    kernel = module_kernel(module, scaling)
    groups = int(getattr(module, "num_key_value_groups", 1) or 1)
    flag = kwargs.get("is_causal")
    is_causal = bool(flag if flag is not None else getattr(module, "is_causal", True))
    # as sdpa: the flag stands for a mask not built; query i sees keys j <= i
    is_causal = is_causal and attention_mask is None and query.shape[-2] > 1
    bias = kwargs.get("position_bias")
    if bias is not None:
        attention_mask = _with_bias(attention_mask, bias, is_causal, query, key)
        is_causal = False
    need = _need_weights(kwargs)
    result = kernel_attention(query, key, value, kernel, attn_mask=attention_mask,
                              dropout_p=float(dropout), is_causal=is_causal,
                              need_weights=need, enable_gqa=groups > 1)
    out, weights = result if need else (result, None)
    assert isinstance(out, torch.Tensor)
    return out.transpose(1, 2).contiguous(), weights


def register(name: str = NAME) -> str:
    """Add the kernel attention to ``transformers`` under ``name`` (again: nothing changes).

    Registers :func:`attention_forward` with ``AttentionInterface`` and
    ``sdpa``'s boolean masks with ``AttentionMaskInterface``.

    Parameters
    ----------
    name : str, default "nadaraya"
        The ``attn_implementation`` name; one of transformers' own names is refused.

    Returns
    -------
    str
        ``name``.

    Examples
    --------
    >>> from nadaraya.nn import huggingface
    >>> huggingface.register()                                      # doctest: +SKIP
    'nadaraya'
    """
    if not isinstance(name, str) or not name or not name.isidentifier():
        raise NadarayaError(f"name must be an identifier such as 'nadaraya'; got {name!r}.")
    if name in _registered:
        return name
    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    except ImportError:
        raise NadarayaError(INSTALL) from None
    taken = ALL_ATTENTION_FUNCTIONS.get(name)
    if name == "eager" or (taken is not None and taken is not attention_forward):
        raise NadarayaError(f"name {name!r} is an attention implementation of transformers "
                            "already; choose another name, e.g. 'nadaraya'.")
    AttentionInterface.register(name, attention_forward)
    AttentionMaskInterface.register(name, sdpa_mask)
    _registered.add(name)
    return name


def attention_modules(model: nn.Module) -> list[nn.Module]:
    """The attention modules of a ``transformers`` model, in order.

    They are the modules with ``config``, a numeric ``scaling`` and
    ``is_causal``: the ones that call the attention interface.

    Examples
    --------
    >>> import torch
    >>> from nadaraya.nn.huggingface import attention_modules
    >>> attention_modules(torch.nn.Linear(2, 2))
    []
    """
    return [m for m in model.modules()
            if hasattr(m, "config") and hasattr(m, "is_causal")
            and isinstance(getattr(m, "scaling", None), int | float)]


def _heads(module: nn.Module) -> int:
    for owner, attr in ((module, "num_attention_heads"), (module, "num_heads"),
                        (getattr(module, "config", None), "num_attention_heads")):
        value = getattr(owner, attr, None)
        if isinstance(value, int) and value > 0:
            return value
    raise NadarayaError(f"{type(module).__name__} does not say its number of heads; pass "
                        "per_head=False to attach_kernels.")


def _use_nadaraya(model: nn.Module, name: str) -> None:
    register(name)
    setter = getattr(model, "set_attn_implementation", None)
    if setter is None:
        raise NadarayaError(f"model must be a transformers PreTrainedModel (it has "
                            f"set_attn_implementation); got {type(model).__name__}.")
    setter(name)


def attach_kernels(model: nn.Module, kernel: str | Kernel = "rbf", *, learnable: bool = True,
                   per_head: bool = True, name: str = NAME) -> list[nn.Module]:
    """Give every attention module of ``model`` its own kernel module, and switch to it.

    Each attention module gets a submodule ``nadaraya_kernel``: for a name,
    ``get_attention_kernel(kernel, scale=module.scaling, learnable=learnable,
    heads=...)`` (one learned factor ``softplus(raw_scale)`` on the scale per
    head with ``per_head``); for a kernel object, a deep copy. The kernels
    are then parameters of the model, so an optimizer over
    ``model.parameters()`` trains their bandwidths. The model's attention
    implementation becomes ``name`` (registered if needed).

    Parameters
    ----------
    model : transformers.PreTrainedModel
        Changed in place.
    kernel : str or Kernel, default "rbf"
    learnable : bool, default True
        With a name: train the scale.
    per_head : bool, default True
        With a learnable name: one factor per head.
    name : str, default "nadaraya"

    Returns
    -------
    list of torch.nn.Module
        The attention modules, each with its ``nadaraya_kernel``.

    Examples
    --------
    >>> from nadaraya.nn.huggingface import attach_kernels
    >>> modules = attach_kernels(model, "rbf")                      # doctest: +SKIP
    >>> modules[0].nadaraya_kernel.raw_scale.shape                  # doctest: +SKIP
    torch.Size([4])
    """
    modules = attention_modules(model)
    if not modules:
        raise NadarayaError(
            f"model ({type(model).__name__}) has no attention module that calls the "
            "transformers attention interface (a module with config, scaling and is_causal); "
            "attach_kernels needs a transformers model such as BertModel or LlamaForCausalLM."
        )
    if isinstance(kernel, str) and not isinstance(learnable, bool):
        raise NadarayaError(f"learnable must be True or False; got {learnable!r}.")
    check_spec(kernel, "kernel")
    if isinstance(kernel, Mapping):
        raise NadarayaError("kernel must be a name or a Kernel object for attach_kernels; "
                            "give the scale through the object, e.g. Gaussian(2.0).")
    _use_nadaraya(model, name)
    for m in modules:
        if isinstance(kernel, Kernel):
            k = copy.deepcopy(kernel)
        else:
            heads = _heads(m) if (learnable and per_head) else None
            k = get_attention_kernel(kernel, scale=float(m.scaling), learnable=learnable,
                                     heads=heads)
        ref = next(m.parameters(), None)
        if ref is not None:
            k = k.to(device=ref.device, dtype=ref.dtype if ref.is_floating_point() else None)
        raw = k._parameters.get("raw_scale")
        if raw is not None and not isinstance(kernel, Kernel):
            with torch.no_grad():  # a factor of exactly one in the model's dtype
                raw.fill_(_SOFTPLUS_ONE)
        setattr(m, SUBMODULE, k)
    return modules


def detach_kernels(model: nn.Module) -> None:
    """Remove the kernels :func:`attach_kernels` added (the config's kernel applies again)."""
    for m in model.modules():
        if isinstance(getattr(m, SUBMODULE, None), Kernel):
            delattr(m, SUBMODULE)


def set_kernel(model: nn.Module, kernel: str | Mapping[str, Any] = "softmax", *,
               name: str = NAME) -> nn.Module:
    """Run ``model`` (in place) with kernel attention: the implementation and its config.

    Sets ``model.config.nadaraya_kernel = kernel`` (saved with the model) and
    the attention implementation ``name`` (registered if needed).

    Parameters
    ----------
    model : transformers.PreTrainedModel
    kernel : str or dict, default "softmax"
        A name or ``{"name": ..., "scale": ...}``; for a kernel object use
        :func:`attach_kernels` (learnable=False for a fixed one) or
        :func:`use_kernel`.
    name : str, default "nadaraya"

    Returns
    -------
    transformers.PreTrainedModel
        ``model``.

    Examples
    --------
    >>> from nadaraya.nn.huggingface import set_kernel
    >>> set_kernel(model, "rbf").config.nadaraya_kernel             # doctest: +SKIP
    'rbf'
    """
    spec = check_spec(kernel, "kernel", objects=False)
    config = getattr(model, "config", None)
    if config is None:
        raise NadarayaError(f"model must be a transformers PreTrainedModel (it has a config); "
                            f"got {type(model).__name__}.")
    _use_nadaraya(model, name)
    for sub in _configs(config):
        setattr(sub, CONFIG_KEY, spec)
    return model


def _configs(config: Any) -> list[Any]:
    """A config and its sub-configs (text, vision...), which their modules read."""
    out, stack = [], [config]
    while stack:
        c = stack.pop()
        if any(c is o for o in out):
            continue
        out.append(c)
        for key in getattr(c, "sub_configs", {}) or {}:
            sub = getattr(c, key, None)
            if sub is not None and hasattr(sub, "to_dict"):
                stack.append(sub)
    return out
