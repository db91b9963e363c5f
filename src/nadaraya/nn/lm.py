"""A tiny character-level transformer whose attention kernel is a parameter.

Seed 002 reads a language model as next-token prediction by kernel smoothing:
each position averages the values of the earlier positions, weighted by a
kernel of query and key. :class:`TransformerLM` makes that kernel a choice
(softmax, rbf, laplacian, polynomial, linear, cosine) and the use of position
one of Tsai et al.'s two: ``"absolute"`` (learned embeddings added to the
characters) or ``"product"`` (``k_F(f_q, f_k) * k_P(t_q, t_k)`` in every
layer). :func:`train` fits it by a :class:`Recipe` (AdamW without decay on biases
and norms, warmup and a cosine decay to a floor, gradient clipping) within a
step or a time budget, whose schedule follows the clock when time is the
budget; it draws the learning curve, shows a progress line and writes
checkpoints as it goes. Checkpoints are safetensors files (tensors and a JSON
config, no pickle); one written during training continues exactly
(:func:`load_training`, ``train(..., resume=)``).

Examples
--------
>>> import numpy as np
>>> from nadaraya.nn.lm import TransformerLM, train
>>> lm = TransformerLM(vocab_size=4, d_model=8, n_heads=2, context=8, tie_embeddings=True)
>>> history = train(lm, np.arange(400) % 4, np.arange(100) % 4, steps=5, batch=4,
...                 progress=False)
>>> history["steps"], len(history["curve"])
(5, 1)
"""

from __future__ import annotations

from ._lmcheckpoint import TrainingState, load_checkpoint, load_training, save_checkpoint
from ._lmmodel import LMConfig, TransformerLM, evaluate
from ._lmrecipe import CLOCKS, Recipe, cosine_schedule
from ._lmtrain import train

__all__ = ["CLOCKS", "LMConfig", "Recipe", "TrainingState", "TransformerLM", "cosine_schedule",
           "evaluate", "load_checkpoint", "load_training", "save_checkpoint", "train"]
