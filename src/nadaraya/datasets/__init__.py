"""Small real data sets shipped with nadaraya (no download needed).

Each loader returns a :class:`Bunch` with ``data`` (features), ``target``,
``feature_names``, ``target_names``, ``DESCR`` (source and licence) and
``filename``, or ``(X, y)`` with ``return_X_y=True``. The CSV files lie in
``nadaraya/datasets/data/``, each with its source and licence in a comment header.
"""

from __future__ import annotations

from ._base import Bunch, data_path
from ._mcycle import load_mcycle
from ._smoothing import load_cps71, load_ethanol, load_faithful
from ._wages import load_wage1

__all__ = ["Bunch", "data_path", "load_cps71", "load_ethanol", "load_faithful", "load_mcycle",
           "load_wage1"]
