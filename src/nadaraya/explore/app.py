"""The explorer's page (four tabs) and its server, all resources served locally."""

from __future__ import annotations

import errno
import os
import socket
from typing import Any

from .._errors import NadarayaError
from ._common import require_panel

__all__ = ["TABS", "Explorer", "build_app", "check_port", "serve"]

TABS = ("Regression", "Attention", "Images", "Scale")


class Explorer:
    """The four tabs of ``nadaraya explore`` in one :class:`panel.Tabs`.

    A tab whose content needs a model or a filter run computes it the first
    time it is shown, so the page opens without loading transformers.

    Attributes
    ----------
    regression, attention, images, scale
        The tabs (:class:`~nadaraya.explore.regression.RegressionTab`, ...).
    tabs : panel.Tabs
        The page; ``tabs.active`` is the index of the tab shown.

    Examples
    --------
    >>> import panel as pn                                   # doctest: +SKIP
    >>> pn.extension(); Explorer().tabs                      # doctest: +SKIP
    """

    def __init__(self) -> None:
        pn = require_panel()
        from .attention import AttentionTab
        from .images import ImageTab
        from .regression import RegressionTab
        from .scale import ScaleTab

        self.regression = RegressionTab()
        self.attention = AttentionTab()
        self.images = ImageTab()
        self.scale = ScaleTab()
        self._shown: set[int] = {0}
        self.tabs = pn.Tabs(*(tab.panel for tab in self.tabs_in_order()), dynamic=False,
                            sizing_mode="stretch_width", name="explore-tabs")
        self.tabs.param.watch(lambda event: self.show(event.new), "active")

    def tabs_in_order(self) -> list[Any]:
        return [self.regression, self.attention, self.images, self.scale]

    def show(self, index: int) -> None:
        """Compute what tab ``index`` needs the first time it is shown."""
        if index in self._shown:
            return
        self._shown.add(index)
        if index == 1:
            self.attention.compute()
        elif index == 2:
            self.images.compute()
        elif index == 3:
            self.scale.run()


def build_app() -> Any:
    """The explorer's page, a :class:`panel.Tabs` (display it in Jupyter after ``pn.extension()``).

    Returns
    -------
    panel.Tabs
    """
    return Explorer().tabs


def check_port(port: int, address: str = "127.0.0.1") -> int:
    """``port`` if it can be listened on at ``address``; 0 gives a free port.

    Raises
    ------
    NadarayaError
        The port is out of range or in use.
    """
    if not isinstance(port, int) or not 0 <= port <= 65535:
        raise NadarayaError(f"--port must be an integer 0 to 65535; got {port!r}.")
    if not isinstance(address, str) or not address or len(address) > 253:
        raise NadarayaError(f"--address must be a host name or IP address; got {address!r}.")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((address, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise NadarayaError(f"--port {port} is already in use on {address}; choose "
                                    "another --port, or --port 0 for a free one.") from None
            why = exc.strerror or " ".join(str(exc).split())
            raise NadarayaError(f"cannot listen on --address {address!r} --port {port} "
                                f"({why}); give an address of this machine, e.g. "
                                "127.0.0.1.") from None
        except (UnicodeError, ValueError, TypeError, OverflowError) as exc:
            raise NadarayaError(f"--address must be a host name or IP address; got "
                                f"{address!r} ({' '.join(str(exc).split())}).") from None
        return int(sock.getsockname()[1])


def serve(port: int = 5006, address: str = "127.0.0.1", show: bool = True,
          ready: Any = None) -> None:
    """Serve the explorer until interrupted; JavaScript and CSS come from the server.

    Parameters
    ----------
    port : int, default 5006
        0: a free port.
    address : str, default "127.0.0.1"
    show : bool, default True
        Open the page in the default web browser.
    ready : callable, optional
        Called with the URL once the server listens.
    """
    os.environ["BOKEH_RESOURCES"] = "server"
    pn = require_panel()
    pn.config.inline = False
    port = check_port(port, address)
    local = address in ("127.0.0.1", "localhost", "::1")
    origins = [f"127.0.0.1:{port}", f"localhost:{port}"] if local else ["*"]
    server = pn.serve({"/": lambda: Explorer().tabs}, port=port, address=address, show=show,
                      start=False, title="nadaraya explore", threaded=False,
                      websocket_origin=origins)
    url = f"http://{address}:{port}/"
    if ready is not None:
        ready(url)
    server.start()
    server.io_loop.start()
