"""Wooldridge's ``wage1``: hourly wages with continuous and categorical regressors."""

from __future__ import annotations

from typing import Any

from .._errors import NadarayaError
from ._base import data_path

__all__ = ["WAGE1_FEATURES", "load_wage1"]

#: The regressors of the np package's example (Racine 2008, Table 4.1).
WAGE1_FEATURES = ["female", "married", "educ", "exper", "tenure"]

_LEVELS = {  # first level first, as in np's copy of the data
    "female": ["Female", "Male"],
    "married": ["Married", "Notmarried"],
    "nonwhite": ["Nonwhite", "White"],
    "smsa": ["Non-SMSA", "SMSA"],
}


def load_wage1(*, return_X_y: bool = False) -> Any:
    """Load the ``wage1`` data: log hourly wages of 526 workers, 1976 (mixed data).

    Hourly wages with years of education, experience and tenure
    (continuous), sex, marital status, race and residence (unordered
    categories) and the number of dependants (ordered: 0 to 6), from the
    1976 US Current Population Survey as compiled by Wooldridge (2000),
    data set WAGE1. It is the mixed-data example of R's np package
    (Hayfield and Racine 2008; Racine 2008, Table 4.1: a local linear fit of
    ``lwage`` on ``female``, ``married``, ``educ``, ``exper`` and ``tenure``).

    Source and licence: the CPS microdata are a work of the US government
    (public domain); the file is taken from the Python package
    ``wooldridge`` 0.5.0 (MIT licence, Copyright (c) 2021 Tetsu Haruyama).
    The CSV's comment header (``DataFrame.attrs["DESCR"]``) says more.

    Parameters
    ----------
    return_X_y : bool, default False
        Return ``(X, y)``: the np example's regressors :data:`WAGE1_FEATURES`
        as a DataFrame of shape (526, 5) and ``lwage`` as a Series.

    Returns
    -------
    frame : pandas DataFrame of shape (526, 10)
        ``lwage``, ``wage``, ``educ``, ``exper``, ``tenure`` (float64);
        ``female``, ``married``, ``nonwhite``, ``smsa`` (unordered
        ``category``); ``numdep`` (ordered ``category`` of the integers 0 to
        6). ``frame.attrs`` holds ``DESCR`` (source and licence) and
        ``filename``.
    (X, y) : tuple
        With ``return_X_y=True``.

    Examples
    --------
    >>> from nadaraya.datasets import load_wage1
    >>> wages = load_wage1()
    >>> wages.shape, str(wages["female"].dtype), bool(wages["numdep"].cat.ordered)
    ((526, 10), 'category', True)
    """
    try:
        import pandas as pd
    except ImportError:
        raise NadarayaError("load_wage1 returns a pandas DataFrame and needs pandas, which is "
                            "not installed; install it with 'pip install pandas'.") from None
    path = data_path("wage1")
    text = path.read_text(encoding="utf-8")
    description = "\n".join(line[2:] for line in text.splitlines() if line.startswith("# "))
    frame = pd.read_csv(path, comment="#", dtype={c: "string" for c in _LEVELS})
    for name in ("lwage", "wage", "educ", "exper", "tenure"):
        frame[name] = frame[name].astype("float64")
    for name, levels in _LEVELS.items():
        frame[name] = pd.Categorical(frame[name], categories=levels)
    frame["numdep"] = pd.Categorical(frame["numdep"], categories=range(7), ordered=True)
    frame.attrs.update(DESCR=description, filename=str(path))
    if return_X_y:
        return frame[WAGE1_FEATURES].copy(), frame["lwage"].copy()
    return frame
