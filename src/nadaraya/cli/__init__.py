"""The ``nadaraya`` command line: ``nadaraya <command> [options]``.

Each command is a module of this package with a docstring (its help text),
``add_arguments(parser)`` and ``run(args) -> int``. Registering a command is
one entry in :data:`COMMANDS`; its module is imported only to build the
parser, and heavy imports happen inside ``run``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from .._errors import NadarayaError

__all__ = ["COMMANDS", "build_parser", "main"]

#: Command name -> module of :mod:`nadaraya.cli` implementing it.
COMMANDS: dict[str, str] = {
    "demo": "demo",
    "denoise": "denoise",
    "attention": "attention",
    "lm": "lm",
    "fit": "fit",
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with one sub-parser per registered command."""
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog="nadaraya",
        description="Kernel regression and attention as one exact, memory-bounded operator.",
    )
    parser.add_argument("--version", action="version", version=f"nadaraya {__version__}")
    sub = parser.add_subparsers(dest="command", title="commands", required=True)
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(f"{__name__}.{module_name}")
        doc = (module.__doc__ or "").strip()
        command = sub.add_parser(
            name, help=doc.splitlines()[0] if doc else None, description=doc,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(command)
        command.set_defaults(run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``nadaraya`` command line.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after the program name; default ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit status: 0 on success, 1 when the command failed (the reason is
        printed on standard error), 2 for a usage error.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except BrokenPipeError:
        # The reader of our output went away (``nadaraya demo | head``): stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except (NadarayaError, OSError) as exc:
        print(f"nadaraya {args.command}: error: {exc}", file=sys.stderr)
        return 1
