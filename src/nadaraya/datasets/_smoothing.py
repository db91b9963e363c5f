"""Classic smoothing data sets: Old Faithful, ethanol engine emissions, Canadian wages."""

from __future__ import annotations

from typing import Any

from ._base import load_dataset

__all__ = ["load_cps71", "load_ethanol", "load_faithful"]


def load_faithful(*, return_X_y: bool = False, as_frame: bool = False) -> Any:
    """Load the Old Faithful geyser data: waiting time against eruption length.

    272 eruptions of the Old Faithful geyser (Yellowstone). The waiting time
    to the next eruption (minutes) grows with the length of the eruption
    (minutes) in two clusters, short and long: a regression with a gap in
    the design (Haerdle 1991; R's ``datasets::faithful``).

    Parameters
    ----------
    return_X_y : bool, default False
        Return ``(X, y)`` instead of a :class:`~nadaraya.datasets.Bunch`.
    as_frame : bool, default False
        Give ``X`` as a pandas DataFrame and ``y`` as a Series; needs pandas.

    Returns
    -------
    data : Bunch
        ``data`` (ndarray of shape (272, 1): ``eruptions``), ``target``
        (ndarray of shape (272,): ``waiting``), ``frame``, ``feature_names``,
        ``target_names``, ``DESCR`` (source and licence) and ``filename``.
    (X, y) : tuple
        With ``return_X_y=True``.

    Examples
    --------
    >>> from nadaraya.datasets import load_faithful
    >>> X, y = load_faithful(return_X_y=True)
    >>> X.shape, y.shape
    ((272, 1), (272,))
    """
    return load_dataset("faithful", "waiting", return_X_y=return_X_y, as_frame=as_frame)


def load_ethanol(*, return_X_y: bool = False, as_frame: bool = False) -> Any:
    """Load the ethanol engine data: NOx emissions against compression and mixture.

    88 runs of a single-cylinder engine burning ethanol (Brinkman 1981;
    R's ``lattice::ethanol``). ``NOx`` peaks sharply in the equivalence ratio
    ``E`` and moves a little with the compression ratio ``C``: a one-feature
    smoothing problem (NOx on E) or a two-feature one.

    Parameters
    ----------
    return_X_y : bool, default False
        Return ``(X, y)`` instead of a :class:`~nadaraya.datasets.Bunch`.
    as_frame : bool, default False
        Give ``X`` as a pandas DataFrame and ``y`` as a Series; needs pandas.

    Returns
    -------
    data : Bunch
        ``data`` (ndarray of shape (88, 2): ``C``, ``E``), ``target``
        (ndarray of shape (88,): ``NOx``), ``frame``, ``feature_names``,
        ``target_names``, ``DESCR`` (source and licence) and ``filename``.
    (X, y) : tuple
        With ``return_X_y=True``.

    Examples
    --------
    >>> from nadaraya.datasets import load_ethanol
    >>> data = load_ethanol()
    >>> data.feature_names, data.data.shape
    (['C', 'E'], (88, 2))
    """
    return load_dataset("ethanol", "NOx", return_X_y=return_X_y, as_frame=as_frame)


def load_cps71(*, return_X_y: bool = False, as_frame: bool = False) -> Any:
    """Load the Canadian age-earnings data (1971 census): log wage against age.

    205 men with the same education (grade 13); ages 21 to 65 with many
    ties. The classic example of Pagan and Ullah (1999) and of R's ``np``
    package (``np::cps71``).

    Parameters
    ----------
    return_X_y : bool, default False
        Return ``(X, y)`` instead of a :class:`~nadaraya.datasets.Bunch`.
    as_frame : bool, default False
        Give ``X`` as a pandas DataFrame and ``y`` as a Series; needs pandas.

    Returns
    -------
    data : Bunch
        ``data`` (ndarray of shape (205, 1): ``age``), ``target`` (ndarray of
        shape (205,): ``logwage``), ``frame``, ``feature_names``,
        ``target_names``, ``DESCR`` (source and licence) and ``filename``.
    (X, y) : tuple
        With ``return_X_y=True``.

    Examples
    --------
    >>> from nadaraya.datasets import load_cps71
    >>> X, y = load_cps71(return_X_y=True)
    >>> int(X.min()), int(X.max())
    (21, 65)
    """
    return load_dataset("cps71", "logwage", return_X_y=return_X_y, as_frame=as_frame)
