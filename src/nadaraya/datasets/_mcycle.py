"""The motorcycle crash data (Silverman 1985), R's ``MASS::mcycle``."""

from __future__ import annotations

from typing import Any

from ._base import load_dataset

__all__ = ["load_mcycle"]


def load_mcycle(*, return_X_y: bool = False, as_frame: bool = False) -> Any:
    """Load the motorcycle crash data: head acceleration after a simulated impact.

    133 measurements of head acceleration (in g) against time after impact
    (in milliseconds), from tests of crash helmets. The curve is flat, dips
    sharply, overshoots and settles, and the noise grows after the impact: the
    classic test of a smoother (Silverman 1985; R's ``MASS::mcycle``). Several
    measurements share one time.

    Parameters
    ----------
    return_X_y : bool, default False
        Return ``(X, y)`` instead of a :class:`~nadaraya.datasets.Bunch`.
    as_frame : bool, default False
        Give ``X`` as a pandas DataFrame (column ``times``) and ``y`` as a
        Series (``accel``); needs pandas.

    Returns
    -------
    data : Bunch
        With ``data`` (ndarray of shape (133, 1), float64: ``times`` in ms),
        ``target`` (ndarray of shape (133,), float64: ``accel`` in g),
        ``frame`` (DataFrame of both columns, or None unless ``as_frame``),
        ``feature_names`` (``["times"]``), ``target_names`` (``["accel"]``),
        ``DESCR`` (source and licence) and ``filename`` (the shipped CSV).
    (X, y) : tuple
        With ``return_X_y=True``: ``X`` of shape (133, 1) and ``y`` of shape (133,).

    References
    ----------
    Silverman, B. W. (1985) Some aspects of the spline smoothing approach to
    non-parametric curve fitting. Journal of the Royal Statistical Society,
    Series B 47, 1-52.

    Examples
    --------
    >>> from nadaraya.datasets import load_mcycle
    >>> X, y = load_mcycle(return_X_y=True)
    >>> X.shape, y.shape
    ((133, 1), (133,))
    >>> float(X.min()), float(X.max())
    (2.4, 57.6)
    """
    return load_dataset("mcycle", "accel", return_X_y=return_X_y, as_frame=as_frame)
