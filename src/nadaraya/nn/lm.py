"""A tiny character-level transformer whose attention kernel is a parameter.

Seed 002 reads a language model as next-token prediction by kernel smoothing:
each position averages the values of the earlier positions, weighted by a
kernel of query and key. :class:`TransformerLM` makes that kernel a choice
(softmax, rbf, laplacian, polynomial, linear, cosine) and the use of position
one of Tsai et al.'s two: ``"absolute"`` (learned embeddings added to the
characters) or ``"product"`` (``k_F(f_q, f_k) * k_P(t_q, t_k)`` in every
layer). :func:`train` fits it with a progress bar; checkpoints are
safetensors files (tensors and a JSON config, no pickle).
"""

from __future__ import annotations

import json
import math
import stat
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .._errors import NadarayaError
from .attention import KernelAttention

if TYPE_CHECKING:
    from .._files import Output

__all__ = ["LMConfig", "TransformerLM", "evaluate", "load_checkpoint", "save_checkpoint",
           "train"]


@dataclass
class LMConfig:
    """Sizes and choices of a :class:`TransformerLM`."""

    vocab_size: int
    kernel: str = "softmax"
    positional: str = "absolute"
    d_model: int = 128
    n_layers: int = 2
    n_heads: int = 4
    context: int = 128
    dropout: float = 0.0
    tie_qk: bool = False
    alphabet: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class _Block(nn.Module):
    def __init__(self, cfg: LMConfig) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.d_model)
        self.attn = KernelAttention(
            cfg.d_model, cfg.n_heads, kernel=cfg.kernel, tie_qk=cfg.tie_qk, dropout=cfg.dropout,
            positional="product" if cfg.positional == "product" else None,
            max_len=cfg.context, batch_first=True)
        self.norm2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(nn.Linear(cfg.d_model, 4 * cfg.d_model), nn.GELU(),
                                 nn.Linear(4 * cfg.d_model, cfg.d_model), nn.Dropout(cfg.dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        a, _ = self.attn(h, h, h, need_weights=False, is_causal=True)
        x = x + a
        return x + self.mlp(self.norm2(x))


class TransformerLM(nn.Module):
    """Character language model: embeddings, kernel-attention blocks, a softmax head.

    Parameters
    ----------
    config : LMConfig, optional
        ``vocab_size``, ``kernel``, ``positional`` (``"absolute"``,
        ``"product"`` or ``"none"``), ``d_model``, ``n_layers``, ``n_heads``,
        ``context`` (longest input), ``dropout``, ``tie_qk``.
    **options
        The same fields as keywords, instead of ``config``.

    Examples
    --------
    >>> import torch
    >>> from nadaraya.nn.lm import TransformerLM
    >>> lm = TransformerLM(vocab_size=10, kernel="rbf", d_model=16, context=8)
    >>> lm(torch.zeros(2, 8, dtype=torch.long)).shape
    torch.Size([2, 8, 10])
    """

    def __init__(self, config: LMConfig | None = None, **options: Any) -> None:
        super().__init__()
        if config is None:
            try:
                config = LMConfig(**options)
            except TypeError as exc:
                raise NadarayaError(f"TransformerLM options: {exc}; the fields are those of "
                                    "LMConfig (vocab_size is required).") from None
        elif options:
            raise NadarayaError("give either a config or keyword options, not both.")
        if config.positional not in ("absolute", "product", "none"):
            raise NadarayaError(f"positional must be 'absolute', 'product' or 'none'; "
                                f"got {config.positional!r}.")
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        if config.positional == "absolute":
            self.pos = nn.Parameter(torch.randn(config.context, config.d_model) * 0.02)
        self.blocks = nn.ModuleList(_Block(config) for _ in range(config.n_layers))
        self.norm = nn.LayerNorm(config.d_model)
        self.head = nn.Linear(config.d_model, config.vocab_size)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Next-character logits ``(B, L, vocab_size)`` for ids ``(B, L)``."""
        L = ids.shape[-1]
        if L > self.config.context:
            raise NadarayaError(f"input has {L} characters, beyond the model's context of "
                                f"{self.config.context}; feed the last {self.config.context}.")
        x = self.embed(ids)
        if self.config.positional == "absolute":
            x = x + self.pos[:L]
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))

    @torch.no_grad()
    def generate(self, ids: torch.Tensor, length: int, *, temperature: float = 1.0,
                 generator: torch.Generator | None = None) -> torch.Tensor:
        """Continue ``ids`` ``(L,)`` by ``length`` sampled characters; returns ``(L + length,)``.

        Parameters
        ----------
        ids : torch.Tensor of shape (L,), int64
            The prompt, at least one character.
        length : int
            Characters to add, >= 0.
        temperature : float, default 1.0
            Finite and > 0: the logits are divided by it before sampling.
        generator : torch.Generator, optional
        """
        try:
            finite = math.isfinite(float(temperature)) and float(temperature) > 0
        except (TypeError, ValueError):
            finite = False
        if not finite:
            raise NadarayaError(f"temperature must be a finite number > 0; got {temperature!r}. "
                                "Use e.g. 0.8 (lower: more predictable text).")
        if isinstance(length, bool) or not isinstance(length, int) or length < 0:
            raise NadarayaError(f"length must be an integer >= 0; got {length!r}.")
        if ids.ndim != 1 or ids.numel() == 0:
            raise NadarayaError(f"ids must hold at least one character id, shape (L,) with L >= "
                                f"1; got shape {tuple(ids.shape)}. Start from a prompt such "
                                "as a newline.")
        out = ids.clone()
        for _ in range(length):
            logits = self(out[-self.config.context:][None])[0, -1].double()
            # shifted by the largest logit first: a tiny temperature then gives weight 1 to the
            # most likely character instead of inf / inf
            scaled = (logits - logits.max()) / float(temperature)
            nxt = torch.multinomial(torch.softmax(scaled, -1), 1, generator=generator)
            out = torch.cat([out, nxt])
        return out


def _batch(data: np.ndarray, batch: int, context: int, rng: np.random.Generator,
           device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    starts = rng.integers(0, data.size - context - 1, size=batch)
    idx = starts[:, None] + np.arange(context + 1)[None, :]
    chunk = torch.as_tensor(data[idx], device=device)
    return chunk[:, :-1], chunk[:, 1:]


@torch.no_grad()
def evaluate(model: TransformerLM, data: np.ndarray, *, max_chars: int | None = None,
             batch: int = 32) -> float:
    """Validation bits per character: non-overlapping windows of the model's context.

    Every character after the first of each window is predicted from the
    characters before it in the window.
    """
    was = model.training
    model.eval()
    device = next(model.parameters()).device
    C = model.config.context
    usable = data if max_chars is None else data[:max_chars]
    n_win = (usable.size - 1) // C
    if n_win < 1:
        raise NadarayaError(f"need more than {C + 1} characters to evaluate; got {usable.size}.")
    total, count = 0.0, 0
    for s in range(0, n_win, batch):
        starts = np.arange(s, min(s + batch, n_win)) * C
        idx = starts[:, None] + np.arange(C + 1)[None, :]
        chunk = torch.as_tensor(usable[idx], device=device)
        logits = model(chunk[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), chunk[:, 1:].reshape(-1),
                               reduction="sum")
        total += loss.item()
        count += chunk[:, 1:].numel()
    model.train(was)
    return total / count / math.log(2)


def train(model: TransformerLM, train_data: np.ndarray, valid_data: np.ndarray | None = None, *,
          steps: int = 1000, batch: int = 32, lr: float = 3e-3, seed: int = 0,
          eval_every: int = 0, eval_chars: int | None = 200_000, progress: bool = True,
          callback: Callable[[int, float], None] | None = None) -> dict[str, Any]:
    """Train on random windows with AdamW and a cosine learning rate.

    Parameters
    ----------
    model : TransformerLM
    train_data, valid_data : ndarray of int64
        Encoded text.
    steps, batch, lr, seed
        Optimisation budget and settings.
    eval_every : int, default 0
        Evaluate validation bits per character every this many steps (0: at
        the end only).
    eval_chars : int, optional
        Characters of validation text used per evaluation.
    progress : bool, default True
        Show a progress bar (tqdm when installed).

    Returns
    -------
    dict
        ``losses`` (training bits per character per step), ``valid`` (list of
        ``(step, bits)``), ``seconds``, ``diverged`` (a non-finite loss stopped
        training).
    """
    device = next(model.parameters()).device
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=max(steps, 1),
                                                pct_start=0.1)
    bar = _progress(steps, progress)
    history: dict[str, Any] = {"losses": [], "valid": [], "diverged": False}
    start = time.perf_counter()
    model.train()
    for step in range(1, steps + 1):
        x, y = _batch(train_data, batch, model.config.context, rng, device)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        if not torch.isfinite(loss):
            history["diverged"] = True
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        bits = loss.item() / math.log(2)
        history["losses"].append(bits)
        if callback is not None:
            callback(step, bits)
        bar(step, bits)
        if valid_data is not None and eval_every and step % eval_every == 0 and step < steps:
            history["valid"].append((step, evaluate(model, valid_data, max_chars=eval_chars)))
    bar(None, None)
    if valid_data is not None and not history["diverged"]:
        history["valid"].append((len(history["losses"]),
                                 evaluate(model, valid_data, max_chars=eval_chars)))
    history["seconds"] = time.perf_counter() - start
    return history


def _progress(total: int, show: bool) -> Callable[[int | None, float | None], None]:
    if not show:
        return lambda step, bits: None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        def plain(step: int | None, bits: float | None) -> None:
            if step is not None and (step % max(total // 20, 1) == 0 or step == total):
                print(f"step {step}/{total}  train {bits:.3f} bits/char", flush=True)
        return plain
    bar = tqdm(total=total, unit="step", dynamic_ncols=True)

    def update(step: int | None, bits: float | None) -> None:
        if step is None:
            bar.close()
            return
        bar.update(1)
        bar.set_postfix(bits=f"{bits:.3f}")
    return update


def save_checkpoint(model: TransformerLM, path: str | Path | Output) -> None:
    """Write the weights and config as a safetensors file (no pickle), safely.

    Parameters
    ----------
    model : TransformerLM
    path : str, path-like or nadaraya._files.Output
        A regular file is replaced atomically (see :mod:`nadaraya._files`):
        a failed write leaves the old checkpoint as it was.
    """
    from .._files import output

    try:
        from safetensors.torch import save
    except ImportError:
        raise NadarayaError("checkpoints need safetensors: pip install 'nadaraya[lm]'.") from None
    target = output(path, option="path")
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    # a tied parameter appears under two names; keep one
    seen: dict[int, str] = {}
    for k in list(state):
        ptr = model.state_dict()[k].data_ptr()
        if ptr in seen:
            del state[k]
        else:
            seen[ptr] = k
    target.write_bytes(save(state, metadata={"config": json.dumps(asdict(model.config))}))


def _not_a_checkpoint(path: Any, why: str) -> NadarayaError:
    return NadarayaError(f"{str(path)!r} is not a nadaraya language-model checkpoint ({why}); "
                         "give a file written by nadaraya lm train --out, or train one.")


def load_checkpoint(path: str | Path, *, device: str | torch.device = "cpu") -> TransformerLM:
    """Rebuild a :class:`TransformerLM` from :func:`save_checkpoint`'s file.

    Raises
    ------
    NadarayaError
        When ``path`` is missing, a folder, or any file that is not such a
        checkpoint (text, another binary, an empty file, another model's
        safetensors).
    """
    try:
        from safetensors import SafetensorError, safe_open
    except ImportError:
        raise NadarayaError("checkpoints need safetensors: pip install 'nadaraya[lm]'.") from None
    file = Path(path)
    try:
        st = file.stat()
    except FileNotFoundError:
        raise NadarayaError(f"checkpoint {str(path)!r} does not exist; train one with "
                            "nadaraya lm train --out FILE.") from None
    except (OSError, ValueError) as exc:  # ValueError: a zero byte in the name
        raise _not_a_checkpoint(path, f"it cannot be read: "
                                      f"{getattr(exc, 'strerror', None) or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise _not_a_checkpoint(path, "it is a folder" if stat.S_ISDIR(st.st_mode)
                                else "not a regular file")
    if st.st_size == 0:
        raise _not_a_checkpoint(path, "it is empty")
    try:
        with safe_open(str(file), framework="pt", device=str(device)) as f:
            meta = f.metadata() or {}
            if "config" not in meta:
                raise _not_a_checkpoint(path, "a safetensors file without a nadaraya config")
            config = _config(path, meta["config"])
            shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
            _check_shapes(path, config, shapes)
            state = {k: f.get_tensor(k) for k in f.keys()}
    except SafetensorError as exc:
        raise _not_a_checkpoint(path, f"not a safetensors file: {exc}") from None
    except OSError as exc:
        raise _not_a_checkpoint(path, f"it cannot be read: {exc.strerror or exc}") from None
    model = TransformerLM(config).to(device)
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as exc:
        raise _not_a_checkpoint(path, f"its tensors do not fit its config: "
                                      f"{' '.join(str(exc).split())}") from None
    tied = {k for k in missing if k.endswith("pos_k_weight") and config.tie_qk}
    if unexpected or set(missing) - tied:
        raise NadarayaError(f"checkpoint {path} does not match its config: missing "
                            f"{sorted(set(missing) - tied)}, unexpected {sorted(unexpected)}.")
    return model.eval()


def _config(path: Any, text: str) -> LMConfig:
    """The checkpoint's config, its fields checked so that building the model is safe."""
    try:
        fields = json.loads(text)
        config = LMConfig(**fields)
    except (TypeError, ValueError) as exc:
        raise _not_a_checkpoint(path, f"its config does not read: {exc}") from None
    sizes = ("vocab_size", "d_model", "n_layers", "n_heads", "context")
    wrong = [name for name in sizes if isinstance(getattr(config, name), bool)
             or not isinstance(getattr(config, name), int) or getattr(config, name) < 1]
    if wrong:
        raise _not_a_checkpoint(path, f"its config has no positive integer "
                                      f"{', '.join(wrong)}")
    if not isinstance(config.alphabet, str) or len(config.alphabet) not in (0,
                                                                             config.vocab_size):
        raise _not_a_checkpoint(path, f"its alphabet does not have vocab_size = "
                                      f"{config.vocab_size} characters")
    return config


def _check_shapes(path: Any, config: LMConfig, shapes: dict[str, tuple[int, ...]]) -> None:
    """Compare the file's tensor shapes with those its config builds, before building it.

    The number of layers is read from the tensor names first, and the model is
    then built on the ``meta`` device (no memory), so that a config naming a
    huge model is refused without allocating it.
    """
    layers = {k.split(".")[1] for k in shapes if k.startswith("blocks.")}
    if len(layers) != config.n_layers:
        raise _not_a_checkpoint(path, f"its config has n_layers = {config.n_layers} but its "
                                      f"tensors hold {len(layers)} layer(s)")
    for name, shape in (("embed.weight", (config.vocab_size, config.d_model)),
                        ("pos", (config.context, config.d_model))):
        if (name != "pos" or config.positional == "absolute") and shapes.get(name) != shape:
            raise _not_a_checkpoint(path, f"its tensor {name} has shape {shapes.get(name)}, "
                                          f"its config says {shape}")
    try:
        with torch.device("meta"):
            expected = {k: tuple(v.shape) for k, v in TransformerLM(config).state_dict().items()}
    except (NadarayaError, TypeError, ValueError, RuntimeError, OverflowError) as exc:
        raise _not_a_checkpoint(path, f"its config does not build a model: "
                                      f"{' '.join(str(exc).split())}") from None
    for name, shape in expected.items():
        if name in shapes and shapes[name] != shape:
            raise _not_a_checkpoint(path, f"its tensor {name} has shape {shapes[name]}, its "
                                          f"config needs {shape}")
