"""Checkpoints of :mod:`nadaraya.nn.lm`: safetensors files, written atomically, no pickle.

A checkpoint holds the weights and the model's config; one written during
training also holds what continuing the run exactly needs (a
:class:`TrainingState`): the optimiser's moments, the random generators'
states, the step, the clocks, the recipe and the learning curve. Those
tensors are stored under names starting with ``train/`` and their settings in
the ``training`` metadata entry, so :func:`load_checkpoint` reads such a file
as a plain model.
"""

from __future__ import annotations

import json
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from .._errors import NadarayaError
from ._lmmodel import LMConfig, TransformerLM
from ._lmrecipe import Recipe

if TYPE_CHECKING:
    from .._files import Output

__all__ = ["TrainingState", "load_checkpoint", "load_training", "save_checkpoint"]

_PREFIX = "train/"


@dataclass
class TrainingState:
    """Where a training run stands: enough to continue it exactly.

    Attributes
    ----------
    recipe : Recipe
    step : int
        Optimisation steps done.
    seconds, cpu_seconds : float
        Wall and CPU seconds of training so far (evaluations not counted).
    optimizer : dict
        The AdamW ``state_dict``.
    numpy_rng : dict
        State of the generator that draws the training windows.
    torch_rng : torch.Tensor
        ``torch.get_rng_state()`` (dropout).
    losses : list of float
        Training bits per character of every step.
    curve : list of dict
        One row per evaluation: ``step``, ``seconds``, ``cpu_seconds``, ``lr``,
        ``train_bits`` (mean since the previous row), ``valid_bits``.
    finished : bool
        Whether the run reached its step or time budget.
    """

    recipe: Recipe
    step: int
    seconds: float
    cpu_seconds: float
    optimizer: dict[str, Any]
    numpy_rng: dict[str, Any]
    torch_rng: torch.Tensor
    losses: list[float] = field(default_factory=list)
    curve: list[dict[str, float]] = field(default_factory=list)
    finished: bool = False


def _training_tensors(state: TrainingState) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    tensors = {f"{_PREFIX}torch_rng": state.torch_rng.clone(),
               f"{_PREFIX}losses": torch.tensor(state.losses, dtype=torch.float64)}
    opt_state: dict[str, list[str]] = {}
    for index, values in state.optimizer["state"].items():
        opt_state[str(index)] = sorted(values)
        for name, value in values.items():
            tensors[f"{_PREFIX}optim/{index}/{name}"] = torch.as_tensor(value).detach().cpu()
    meta = {"recipe": state.recipe.to_dict(), "step": state.step, "seconds": state.seconds,
            "cpu_seconds": state.cpu_seconds, "numpy_rng": state.numpy_rng,
            "curve": state.curve, "finished": state.finished,
            "param_groups": state.optimizer["param_groups"], "optim_state": opt_state}
    return tensors, meta


def save_checkpoint(model: TransformerLM, path: str | Path | Output, *,
                    training: TrainingState | None = None) -> None:
    """Write the weights and config (and a training state) as a safetensors file, safely.

    Parameters
    ----------
    model : TransformerLM
    path : str, path-like or nadaraya._files.Output
        A regular file is replaced atomically (see :mod:`nadaraya._files`):
        a failed or interrupted write leaves the old checkpoint as it was.
    training : TrainingState, optional
        Saved with the model so that :func:`load_training` can continue the run.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from nadaraya.nn.lm import TransformerLM, save_checkpoint, load_checkpoint
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "lm.safetensors"
    >>> save_checkpoint(TransformerLM(vocab_size=5, d_model=8, n_heads=2, context=4), path)
    >>> load_checkpoint(path).config.d_model
    8
    """
    from .._files import output

    try:
        from safetensors.torch import save
    except ImportError:
        raise NadarayaError("checkpoints need safetensors: pip install 'nadaraya[lm]'.") from None
    target = output(path, option="path")
    params = model.state_dict()
    state: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for k, v in params.items():  # a tied tensor appears under two names; keep the first
        if v.data_ptr() in seen:
            continue
        seen.add(v.data_ptr())
        state[k] = v.detach().cpu().contiguous()
    metadata = {"config": json.dumps(asdict(model.config))}
    if training is not None:
        tensors, meta = _training_tensors(training)
        state.update(tensors)
        metadata["training"] = json.dumps(meta)
    target.write_bytes(save(state, metadata=metadata))


def _not_a_checkpoint(path: Any, why: str) -> NadarayaError:
    return NadarayaError(f"{str(path)!r} is not a nadaraya language-model checkpoint ({why}); "
                         "give a file written by nadaraya lm train --out, or train one.")


def _read(path: str | Path, device: str | torch.device,
          ) -> tuple[LMConfig, dict[str, torch.Tensor], dict[str, str]]:
    """The config, every tensor and the metadata of a checkpoint, its shapes checked."""
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
            names = [k for k in f.keys() if not k.startswith(_PREFIX)]
            shapes = {k: tuple(f.get_slice(k).get_shape()) for k in names}
            _check_shapes(path, config, shapes)
            state = {k: f.get_tensor(k) for k in f.keys()}
    except SafetensorError as exc:
        raise _not_a_checkpoint(path, f"not a safetensors file: {exc}") from None
    except OSError as exc:
        raise _not_a_checkpoint(path, f"it cannot be read: {exc.strerror or exc}") from None
    return config, state, meta


def _build(path: Any, config: LMConfig, state: dict[str, torch.Tensor],
           device: str | torch.device) -> TransformerLM:
    weights = {k: v for k, v in state.items() if not k.startswith(_PREFIX)}
    model = TransformerLM(config).to(device)
    try:
        missing, unexpected = model.load_state_dict(weights, strict=False)
    except RuntimeError as exc:
        raise _not_a_checkpoint(path, f"its tensors do not fit its config: "
                                      f"{' '.join(str(exc).split())}") from None
    tied = {k for k in missing if (k.endswith("pos_k_weight") and config.tie_qk)
            or (k == "head.weight" and config.tie_embeddings)}
    if unexpected or set(missing) - tied:
        raise NadarayaError(f"checkpoint {path} does not match its config: missing "
                            f"{sorted(set(missing) - tied)}, unexpected {sorted(unexpected)}.")
    return model


def load_checkpoint(path: str | Path, *, device: str | torch.device = "cpu") -> TransformerLM:
    """Rebuild a :class:`TransformerLM` from :func:`save_checkpoint`'s file (in eval mode).

    Raises
    ------
    NadarayaError
        When ``path`` is missing, a folder, or any file that is not such a
        checkpoint (text, another binary, an empty file, another model's
        safetensors).
    """
    config, state, _ = _read(path, device)
    return _build(path, config, state, device).eval()


def load_training(path: str | Path, *, device: str | torch.device = "cpu",
                  ) -> tuple[TransformerLM, TrainingState]:
    """The model and the :class:`TrainingState` of a checkpoint written during training.

    Pass both to :func:`~nadaraya.nn.lm.train` (``resume=``) to continue the run.

    Raises
    ------
    NadarayaError
        As :func:`load_checkpoint`, and when the file holds a model without a
        training state (written by :func:`save_checkpoint` without ``training``).
    """
    config, state, meta = _read(path, device)
    if "training" not in meta:
        raise NadarayaError(f"checkpoint {str(path)!r} holds a model but no training state "
                            "(optimiser, random generators, step), so its run cannot be "
                            "continued; give a checkpoint written by nadaraya lm train, or "
                            "train anew without --resume.")
    try:
        info = json.loads(meta["training"])
        recipe = Recipe.from_dict(info["recipe"])
        opt_state = {int(i): {name: state[f"{_PREFIX}optim/{i}/{name}"] for name in names}
                     for i, names in info["optim_state"].items()}
        training = TrainingState(
            recipe=recipe, step=int(info["step"]), seconds=float(info["seconds"]),
            cpu_seconds=float(info["cpu_seconds"]),
            optimizer={"state": opt_state, "param_groups": info["param_groups"]},
            numpy_rng=info["numpy_rng"], torch_rng=state[f"{_PREFIX}torch_rng"].cpu(),
            losses=state[f"{_PREFIX}losses"].tolist(), curve=info["curve"],
            finished=bool(info["finished"]))
    except (KeyError, TypeError, ValueError, NadarayaError) as exc:
        raise _not_a_checkpoint(path, f"its training state does not read: {exc}") from None
    return _build(path, config, state, device), training


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
