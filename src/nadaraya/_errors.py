"""The one exception type of the library."""

from __future__ import annotations

__all__ = ["NadarayaError"]


class NadarayaError(ValueError):
    """Invalid input or an impossible request.

    Every message names the parameter, what was expected, what was given and
    how to fix it. It derives from :class:`ValueError` so code that already
    catches ``ValueError`` (scikit-learn's checks, for example) keeps working.
    """
