"""``KernelAttention``: ``torch.nn.MultiheadAttention`` with the kernel as a parameter."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from .._errors import NadarayaError
from ..kernels import Kernel, get_attention_kernel
from ..masks import Causal, Mask, Predicate, get_mask
from ._arguments import check_arguments
from ._mha import (
    additive,
    append_keys,
    check_inputs,
    merge_masks,
    mha_bias,
    pad_bias,
    renest,
    unnest,
)
from .functional import check_overflow, kernel_attention

__all__ = ["KernelAttention"]



class KernelAttention(nn.Module):
    """Multi-head attention whose similarity is any kernel: a kernel smoother per head.

    A drop-in for :class:`torch.nn.MultiheadAttention`: its constructor and
    forward arguments, in its order and with its defaults (this module's own
    arguments follow, keyword-only), its returns, ``merge_masks``, and,
    untied, its parameter and attribute names, so
    ``KernelAttention(E, H).load_state_dict(mha.state_dict())`` works (or use
    :meth:`from_multihead`) and it can replace the ``self_attn`` or
    ``multihead_attn`` of ``nn.TransformerEncoderLayer``,
    ``TransformerDecoderLayer`` and ``nn.Transformer``. With
    ``kernel="softmax"`` it computes what ``MultiheadAttention`` computes.

    Parameters
    ----------
    embed_dim : int
        Model dimension ``E``.
    num_heads : int
        Number of heads; ``embed_dim`` must be a multiple of it.
    dropout : float, default 0.0
        Dropout on the attention weights during training.
    bias : bool, default True
        Biases on the input and output projections.
    add_bias_kv : bool, default False
        Append a learned key and value (``bias_k``, ``bias_v``, ``(1, 1, E)``)
        to every sequence of keys, visible to every query.
    add_zero_attn : bool, default False
        Append a zero key and value to every head (after ``bias_k``).
    kdim, vdim : int, optional
        Feature sizes of keys and values (``embed_dim`` by default).
    batch_first : bool, default False
        Inputs are ``(batch, length, E)`` (else ``(length, batch, E)``), as
        in ``nn.MultiheadAttention``. The default used to be True; callers
        that pass ``(batch, length, E)`` tensors must now say
        ``batch_first=True`` (a module swapped in for ``MultiheadAttention``
        would otherwise mix the batch and sequence axes).
    device, dtype : optional
        Where and in which floating dtype the parameters are made.
    kernel : str or Kernel, default "softmax"
        Keyword-only. ``"softmax"``, ``"rbf"``, ``"laplacian"``,
        ``"polynomial"``, ``"linear"``, ``"cosine"`` (see
        :func:`nadaraya.kernels.get_attention_kernel`), or a
        :class:`nadaraya.kernels.Kernel` (shared by the heads; its parameters
        become this module's).
    num_kv_heads : int, optional
        Grouped-query attention: key and value projections of
        ``num_kv_heads * head_dim`` features, each key/value head shared by
        ``num_heads // num_kv_heads`` query heads (1: multi-query attention;
        ``num_heads``, the default: multi-head attention).
    tie_qk : bool, default False
        Use one projection for queries and keys (``W_q = W_k``): the kernel
        becomes symmetric, ``K(x_i, x_j) = K(x_j, x_i)``.
    positional : {None, "absolute", "product"}, default None
        Tsai et al.'s two ways to use token positions. ``"absolute"`` adds a
        learned embedding ``t`` to the inputs (``x = f + t``, values included);
        ``"product"`` multiplies the content kernel by a kernel on positions,
        ``k_F(f_q W_q, f_k W_k) * k_P(t_q P_q, t_k P_k)``, values from the
        content only.
    mask : Mask, str or callable, optional
        A :mod:`nadaraya.masks` mask applied in every call (``Window(16)``,
        ``KNearest(8)``, ``"causal"``...), or FlexAttention's
        ``mask_mod(b, h, q_idx, kv_idx)``, evaluated per batch element and
        head (:class:`nadaraya.masks.MaskMod`).
    scale : float, optional
        The kernel's scale (``1 / sqrt(head_dim)`` by default).
    learn_scale : bool, default False
        Train one scale per head: a factor ``softplus(raw_scale)``
        (``kernel.raw_scale``, one per head) multiplies the kernel's scale (its
        bandwidth for ``"rbf"`` and ``"laplacian"``).
    max_len : int, default 512
        Longest sequence with ``positional`` set.
    positional_kernel : str, default "softmax"
        ``k_P`` of the product positional kernel.
    empty : {"zero", "nan", "raise"}, default "zero"
        Output of a query that sees no key (every key hidden by the masks):
        zero, as ``scaled_dot_product_attention`` returns, with zero
        gradients through it; ``"nan"`` gives ``nn.MultiheadAttention``'s NaN
        there; ``"raise"`` an error.
    engine : {"auto", "fused", "distance", "streamed", "dense"}, default "auto"
        How the smoothing is computed (see
        :func:`nadaraya.nn.functional.explain_attention`).

    Notes
    -----
    NaN and infinities in ``query``, ``key`` and ``value`` are not checked
    (a check would synchronise the device, and mixed-precision training
    relies on them reaching the loss, as with
    ``scaled_dot_product_attention``); they propagate: an output row is NaN
    when its query row, or any key or value row of its batch element, holds
    NaN or an infinity, whichever engine computes it. (The fused kernel
    alone, on some backends, returns zeros for a NaN query.) Finite inputs
    give finite outputs and gradients wherever the float64 computation does;
    scores beyond the range of the inputs' dtype are computed in float64.

    ``nn.TransformerEncoderLayer`` in evaluation has a fused fast path that
    computes softmax attention from ``in_proj_weight`` itself, whatever the
    module; it is skipped for modules with hooks, so this module carries a
    forward pre-hook that does nothing, and its kernel is always the one
    used. ``nn.TransformerEncoder`` in evaluation may pass the sequences as
    a nested tensor (with ``batch_first=True`` and a padding mask); the
    module pads it and returns a nested output, as the layer expects.

    Examples
    --------
    >>> import torch
    >>> from nadaraya.nn import KernelAttention
    >>> attn = KernelAttention(16, 4, kernel="rbf", batch_first=True)
    >>> x = torch.randn(2, 5, 16)
    >>> out, w = attn(x, x, x)
    >>> out.shape, w.shape
    (torch.Size([2, 5, 16]), torch.Size([2, 5, 5]))
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device: Any = None,
        dtype: torch.dtype | None = None,
        *,
        kernel: str | Kernel = "softmax",
        num_kv_heads: int | None = None,
        tie_qk: bool = False,
        positional: str | None = None,
        mask: Mask | str | Any = None,
        scale: float | None = None,
        learn_scale: bool = False,
        max_len: int = 512,
        positional_kernel: str | Kernel = "softmax",
        empty: str = "zero",
        engine: str = "auto",
    ) -> None:
        super().__init__()
        kv_heads = check_arguments(
            embed_dim=embed_dim, num_heads=num_heads, dropout=dropout, add_bias_kv=add_bias_kv,
            add_zero_attn=add_zero_attn, kdim=kdim, vdim=vdim, dtype=dtype,
            num_kv_heads=num_kv_heads, tie_qk=tie_qk, positional=positional, max_len=max_len,
            empty=empty, engine=engine)
        kw = {"device": device, "dtype": dtype}
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.num_kv_heads = kv_heads
        Ekv = kv_heads * self.head_dim  # features of the projected keys and values
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self.tie_qk = tie_qk
        self.positional = positional
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.add_zero_attn = bool(add_zero_attn)
        self.max_len = max_len
        self.empty = empty
        self.engine = engine
        self.mask = get_mask(mask)
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        E = embed_dim
        own: tuple[str, ...]
        if tie_qk:
            self.qk_proj_weight = nn.Parameter(torch.empty(E, E, **kw))
            own = ("v_proj_weight",)
            nbias = 2 * E
        elif self._qkv_same_embed_dim:
            self.in_proj_weight = nn.Parameter(torch.empty(E + 2 * Ekv, E, **kw))
            own = ("in_proj_weight",)
            nbias = E + 2 * Ekv
        else:
            self.q_proj_weight = nn.Parameter(torch.empty(E, E, **kw))
            self.k_proj_weight = nn.Parameter(torch.empty(Ekv, self.kdim, **kw))
            own = ("q_proj_weight", "k_proj_weight", "v_proj_weight")
            nbias = E + 2 * Ekv
        if "v_proj_weight" in own:
            self.v_proj_weight = nn.Parameter(torch.empty(Ekv, self.vdim, **kw))
        for name in ("in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight"):
            if name not in own:  # None, as in nn.MultiheadAttention
                self.register_parameter(name, None)
        self.in_proj_bias = nn.Parameter(torch.empty(nbias, **kw)) if bias else None
        self.out_proj = nn.Linear(E, E, bias=bias, **kw)
        if add_bias_kv:
            self.bias_k = nn.Parameter(torch.empty(1, 1, Ekv, **kw))
            self.bias_v = nn.Parameter(torch.empty(1, 1, Ekv, **kw))
        else:
            self.bias_k = self.bias_v = None
        heads = num_heads if learn_scale else None
        content = get_attention_kernel(kernel, scale=scale, learnable=learn_scale, heads=heads)
        if positional is not None:
            self.pos_embedding = nn.Parameter(torch.empty(max_len, E, **kw))
        if positional == "product":
            self.pos_q_weight = nn.Parameter(torch.empty(E, E, **kw))
            self.pos_k_weight = (self.pos_q_weight if tie_qk else
                                 nn.Parameter(torch.empty(E, E, **kw)))
            pos = get_attention_kernel(positional_kernel, learnable=learn_scale, heads=heads)
            hd = self.head_dim
            self.kernel: Kernel = (content.on(slice(0, hd)) *  # type: ignore[assignment]
                                            pos.on(slice(hd, 2 * hd)))
        else:
            self.kernel = content
        self._reset_parameters()
        # nn.TransformerEncoderLayer skips its fused fast path (softmax attention computed
        # from in_proj_weight, whatever the kernel) for a module with hooks: this one
        # does nothing but keep the kernel in charge
        self.register_forward_pre_hook(_own_forward)

    def _reset_parameters(self) -> None:
        for name in ("in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight",
                     "qk_proj_weight", "pos_q_weight", "pos_k_weight"):
            p = getattr(self, name, None)
            if p is not None:
                nn.init.xavier_uniform_(p)
        if self.in_proj_bias is not None:
            nn.init.zeros_(self.in_proj_bias)
        if self.out_proj.bias is not None:
            nn.init.zeros_(self.out_proj.bias)
        if self.bias_k is not None and self.bias_v is not None:
            nn.init.xavier_normal_(self.bias_k)
            nn.init.xavier_normal_(self.bias_v)
        if self.positional is not None:
            nn.init.normal_(self.pos_embedding, std=0.02)

    @classmethod
    def from_multihead(cls, mha: nn.MultiheadAttention,
                       kernel: str | Kernel = "softmax", **kwargs: Any) -> KernelAttention:
        """A ``KernelAttention`` carrying the weights of a ``MultiheadAttention``.

        Examples
        --------
        >>> import torch
        >>> mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
        >>> attn = KernelAttention.from_multihead(mha)
        >>> x = torch.randn(1, 3, 8)
        >>> torch.allclose(attn(x, x, x)[0], mha(x, x, x)[0], atol=1e-6)
        True
        """
        attn = cls(mha.embed_dim, mha.num_heads, mha.dropout, mha.in_proj_bias is not None,
                   mha.bias_k is not None, mha.add_zero_attn, mha.kdim, mha.vdim,
                   mha.batch_first, mha.out_proj.weight.device, mha.out_proj.weight.dtype,
                   kernel=kernel, **kwargs)
        missing, unexpected = attn.load_state_dict(mha.state_dict(), strict=False)
        own = {n for n, _ in attn.named_parameters() if n.startswith(("kernel.", "pos_"))}
        if unexpected or set(missing) - own:
            raise NadarayaError(f"could not carry the weights over: missing {missing}, "
                                f"unexpected {unexpected}.")
        return attn

    # -- projections -----------------------------------------------------------
    def _weights(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        E = self.embed_dim
        if self.tie_qk:
            return self.qk_proj_weight, self.qk_proj_weight, self.v_proj_weight
        if self.in_proj_weight is not None:
            w, Ekv = self.in_proj_weight, self.num_kv_heads * self.head_dim
            return w[:E], w[E:E + Ekv], w[E + Ekv:]
        return self.q_proj_weight, self.k_proj_weight, self.v_proj_weight

    def _biases(self) -> tuple[torch.Tensor | None, ...]:
        b, E = self.in_proj_bias, self.embed_dim
        if b is None:
            return None, None, None
        if self.tie_qk:
            return b[:E], b[:E], b[E:]
        Ekv = self.num_kv_heads * self.head_dim
        return b[:E], b[E:E + Ekv], b[E + Ekv:]

    def _heads(self, x: torch.Tensor, heads: int | None = None) -> torch.Tensor:
        """``(B, L, heads * head_dim)`` as ``(B, heads, L, head_dim)``."""
        B, L, _ = x.shape
        return x.reshape(B, L, heads or self.num_heads, self.head_dim).transpose(1, 2)

    def _positions(self, n: int, name: str) -> torch.Tensor:
        if n > self.max_len:
            raise NadarayaError(f"{name} has length {n}, beyond max_len={self.max_len} of the "
                                "positional embedding; build the module with a larger max_len.")
        return self.pos_embedding[:n]

    # -- masks ------------------------------------------------------------------
    def merge_masks(self, attn_mask: torch.Tensor | None, key_padding_mask: torch.Tensor | None,
                    query: torch.Tensor) -> tuple[torch.Tensor | None, int | None]:
        """``nn.MultiheadAttention.merge_masks``: one mask and its type.

        Parameters
        ----------
        attn_mask : torch.Tensor of shape (L, L) or (B * num_heads, L, L), optional
        key_padding_mask : torch.Tensor of shape (B, L), optional
        query : torch.Tensor of shape (B, L, E)

        Returns
        -------
        merged_mask : torch.Tensor or None
            ``key_padding_mask`` alone; else ``attn_mask`` expanded to
            ``(B, num_heads, L, L)``, plus the padding mask if given.
        mask_type : int or None
            1 for a padding mask alone, 2 with an ``attn_mask``, None for
            neither, as ``MultiheadAttention`` returns them.
        """
        return merge_masks(self.num_heads, attn_mask, key_padding_mask, query)

    # -- forward ------------------------------------------------------------------
    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        key_padding_mask: torch.Tensor | None = None,
        need_weights: bool = True,
        attn_mask: torch.Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
        *,
        mask: Mask | str | Any = None,
        attn_bias: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from ``query`` to ``key`` and ``value``, as ``MultiheadAttention.forward``.

        Parameters
        ----------
        query : torch.Tensor of shape (B, L, E), (L, B, E) or (L, E)
        key : torch.Tensor of shape (B, S, kdim), (S, B, kdim) or (S, kdim)
        value : torch.Tensor of shape (B, S, vdim), (S, B, vdim) or (S, vdim)
        key_padding_mask : torch.Tensor of shape (B, S), optional
            True (or -inf) marks keys to ignore. Floating masks (here and in
            ``attn_mask``, ``attn_bias``) must hold no NaN or ``+inf``: an
            error names the mask.
        need_weights : bool, default True
            Also return the attention weights (materialised).
        attn_mask : torch.Tensor of shape (L, S) or (B * num_heads, L, S), optional
            True (or -inf) hides a key from a query; floats are added.
        average_attn_weights : bool, default True
            Average the returned weights over heads.
        is_causal : bool, default False
            Query ``i`` sees keys ``j <= i`` (applied when ``attn_mask`` is None;
            otherwise a hint, as in ``MultiheadAttention``).
        mask : Mask, str or callable, optional
            A further :mod:`nadaraya.masks` mask for this call.
        attn_bias : torch.Tensor, optional
            Additive log-weights broadcastable to ``(B, num_heads, L, S)``
            (``scaled_dot_product_attention``'s float ``attn_mask``; Hugging
            Face's extended attention masks).

        Returns
        -------
        attn_output : torch.Tensor shaped like ``query``
        attn_weights : torch.Tensor of shape (B, L, S) or (B, H, L, S), or None
        """
        nested = None
        if isinstance(query, torch.Tensor) and query.is_nested:
            query, key, value, key_padding_mask, nested = unnest(
                query, key, value, key_padding_mask, self.batch_first)
        unbatched = query.dim() == 2
        check_inputs(query, key, value, (self.embed_dim, self.kdim, self.vdim),
                     self.out_proj.weight.dtype, self.batch_first)
        if unbatched:
            query, key, value = query[None], key[None], value[None]
            if key_padding_mask is not None and key_padding_mask.dim() == 1:
                key_padding_mask = key_padding_mask[None]
        elif not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        B, L, _ = query.shape
        S = key.shape[1]
        if key.shape[0] != B or value.shape[0] != B or value.shape[1] != S:
            raise NadarayaError(
                f"query, key and value must share the batch size and key and value the "
                f"length; got {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)} "
                f"(batch_first={self.batch_first})."
            )
        if self.positional == "absolute":
            query = query + self._positions(L, "query")
            key = key + self._positions(S, "key")
            value = value + self._positions(S, "value")
        wq, wk, wv = self._weights()
        bq, bk, bv = self._biases()
        k, v = append_keys(F.linear(key, wk, bk), F.linear(value, wv, bv), self.bias_k,
                           self.bias_v, self.add_zero_attn)
        extra = k.shape[1] - S
        q = self._heads(F.linear(query, wq, bq))
        k, v = self._heads(k, self.num_kv_heads), self._heads(v, self.num_kv_heads)
        if self.positional == "product":
            tq = self._heads(F.linear(self._positions(L, "query"), self.pos_q_weight)[None])
            tk = self._heads(F.linear(self._positions(S, "key"), self.pos_k_weight)[None])
            q = torch.cat([q, tq.expand(B, -1, -1, -1)], -1)
            k = torch.cat([k, tk.expand(B, -1, -1, -1)], -1)
        bias = mha_bias(key_padding_mask, attn_mask, B, self.num_heads, L, S, q.dtype)
        if attn_bias is not None:
            if not attn_bias.is_floating_point():
                raise NadarayaError(f"attn_bias must be a floating tensor of additive "
                                    f"log-weights; got dtype {attn_bias.dtype}. Pass boolean "
                                    "masks as attn_mask (True hides).")
            added = additive(attn_bias, "attn_bias", q.dtype)
            if bias is None:
                bias = added
            else:
                bias = bias + added
                check_overflow(bias, "the sum of attn_bias and the other masks")
        bias = pad_bias(bias, extra)
        engine_mask = self._engine_mask(mask, is_causal and attn_mask is None, S, extra)
        result = kernel_attention(
            q, k, v, self.kernel, engine_mask, attn_mask=bias,
            dropout_p=self.dropout if self.training else 0.0, need_weights=need_weights,
            engine="dense" if need_weights else self.engine, empty=self.empty,
            enable_gqa=self.num_kv_heads != self.num_heads)
        out, weights = result if need_weights else (result, None)
        out = self.out_proj(out.transpose(1, 2).reshape(B, L, self.embed_dim))
        if weights is not None and average_attn_weights:
            weights = weights.mean(dim=1)
        if unbatched:
            out = out[0]
            weights = weights[0] if weights is not None else None
        elif nested is not None:
            out = renest(out, nested)
        elif not self.batch_first:
            out = out.transpose(0, 1)
        return out, weights

    def _engine_mask(self, mask: Any, causal: bool, S: int, extra: int) -> Mask | None:
        """The module's mask, this call's, and causality; the appended keys stay visible."""
        engine_mask = self.mask
        given = get_mask(mask)
        if given is not None:
            engine_mask = given if engine_mask is None else engine_mask & given
        if causal:  # is_causal is a hint when attn_mask is given, as in MultiheadAttention
            engine_mask = Causal() if engine_mask is None else engine_mask & Causal()
        if engine_mask is not None and extra:
            engine_mask = engine_mask | Predicate(lambda i, j: j >= S)
        return engine_mask

    def extra_repr(self) -> str:
        parts = [f"embed_dim={self.embed_dim}", f"num_heads={self.num_heads}"]
        if self.num_kv_heads != self.num_heads:
            parts.append(f"num_kv_heads={self.num_kv_heads}")
        if self.tie_qk:
            parts.append("tie_qk=True")
        if self.positional:
            parts.append(f"positional={self.positional!r}")
        if self.mask is not None:
            parts.append(f"mask={self.mask!r}")
        return ", ".join(parts)



def _own_forward(module: nn.Module, args: tuple[Any, ...]) -> None:
    """A forward pre-hook that does nothing (see ``KernelAttention.__init__``)."""
