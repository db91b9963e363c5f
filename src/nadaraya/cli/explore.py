"""Open the explorer: a local web application over the engine, in the browser.

Four tabs: Regression (a data set or an uploaded CSV; kernel and bandwidth
move the fit live; the CV curve; click to see a query's weights), Attention
(all-MiniLM-L6-v2's heads as Nadaraya-Watson weights under softmax, rbf or
laplacian kernels), Images (denoising and one pixel's kernel over its
window) and Scale (which engine runs a problem of a given size, why, how
fast). Everything is served from the installed packages: no network needed.
Stop it with Ctrl-C.

Needs Panel: pip install 'nadaraya[explore]'.

Examples:
  nadaraya explore --port 5006 --no-browser
  nadaraya explore --check
"""

from __future__ import annotations

import argparse

__all__ = ["add_arguments", "run"]


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer 0 to 65535; got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected an integer 0 to 65535; got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``nadaraya explore`` to ``parser``."""
    parser.add_argument("--port", type=_port, default=5006, metavar="N",
                        help="port to listen on (default 5006; 0: a free port)")
    parser.add_argument("--address", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1: this machine only)")
    parser.add_argument("--no-browser", action="store_true",
                        help="do not open the page in a web browser")
    parser.add_argument("--check", action="store_true",
                        help="build the page once, say whether the port is free, and exit "
                             "without serving (a quick test of the installation)")


def run(args: argparse.Namespace) -> int:
    from ..explore import TABS, Explorer, check_port, serve

    port = check_port(args.port, args.address)
    if args.check:
        Explorer()
        print(f"nadaraya explore: the page builds ({len(TABS)} tabs: {', '.join(TABS)}); "
              f"{args.address} port {port} is free to serve it.")
        return 0
    serve(args.port, args.address, show=not args.no_browser,
          ready=lambda url: print(f"nadaraya explore: serving {url} (Ctrl-C to stop)",
                                  flush=True))
    return 0
