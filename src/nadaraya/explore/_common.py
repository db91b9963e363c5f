"""What every tab of the explorer shares: the Panel import, figures, messages."""

from __future__ import annotations

from typing import Any

from .._errors import NadarayaError

__all__ = ["INSTALL", "figure", "message", "require_panel"]

INSTALL = ("nadaraya explore needs Panel (with Bokeh); install it with "
           "pip install 'nadaraya[explore]'.")


def require_panel() -> Any:
    """The ``panel`` module, or an error that says what to install."""
    try:
        import panel
    except ImportError:
        raise NadarayaError(INSTALL) from None
    return panel


def figure(title: str, **kwargs: Any) -> Any:
    """A Bokeh figure with the explorer's defaults (tap, pan, wheel zoom, reset)."""
    from bokeh.plotting import figure as bokeh_figure

    options: dict[str, Any] = {"height": 320, "sizing_mode": "stretch_width",
                               "tools": "tap,pan,wheel_zoom,box_zoom,reset,save",
                               "toolbar_location": "right"}
    options.update(kwargs)
    fig = bokeh_figure(title=title, **options)
    fig.toolbar.logo = None
    return fig


def message(exc: BaseException) -> str:
    """One line for the status bar of a tab."""
    return " ".join(str(exc).split()) or type(exc).__name__
