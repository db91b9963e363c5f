"""The ``nadaraya`` command line: ``nadaraya <command> [options]``.

Each command is a module of this package with a docstring (its help text),
``add_arguments(parser)``, ``run(args) -> int`` and, when it reads or writes
files, ``files(args) -> (inputs, outputs)``: the input paths, and the output
paths by option name (``MAKES_FOLDERS`` lists the outputs whose missing
folders are made rather than refused, ``FIGURES`` the outputs that are
figures, whose format is checked from the suffix before the work starts).
Registering a command is one entry in :data:`COMMANDS`; its module is
imported only to build the parser, and heavy imports happen inside ``run``.

Before a command runs, every output it names is checked (see
:mod:`nadaraya._files`): not a folder, not an input, in a folder that exists
and can be written. The checked targets reach ``run`` as ``args.outputs``,
so a long job never starts when its result could not be saved. Errors are
one line on standard error (exit status 1; 2 for usage errors), never a
traceback; running out of memory is such an error, and a command's
``MEMORY_HINT`` says which options to make smaller. Warnings raised while a
command runs are shown as one line each after it succeeds (and left out when
it fails: the error says what went wrong). Text that standard output cannot
encode (a file name with undecodable bytes) is written with backslash
escapes instead of failing.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import signal
import sys
import threading
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from .._errors import NadarayaError

__all__ = ["COMMANDS", "build_parser", "main"]

#: Command name -> module of :mod:`nadaraya.cli` implementing it.
COMMANDS: dict[str, str] = {
    "demo": "demo",
    "denoise": "denoise",
    "attention": "attention",
    "lm": "lm",
    "fit": "fit",
    "explore": "explore",
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
        command.set_defaults(run=module.run, files=getattr(module, "files", None),
                             makes_folders=getattr(module, "MAKES_FOLDERS", ()),
                             figure_outputs=getattr(module, "FIGURES", ()),
                             memory_hint=getattr(module, "MEMORY_HINT", None))
    return parser


class _Stopped(BaseException):
    """A termination signal, raised so that partial outputs are cleaned up."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _stop(signum: int, frame: Any) -> None:
    raise _Stopped(signum)


@contextlib.contextmanager
def _stoppable() -> Iterator[None]:
    """SIGTERM (and SIGHUP) unwind the command like Ctrl-C instead of killing it mid-write."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    names = [name for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)]
    saved = {}
    for name in names:
        number = getattr(signal, name)
        if signal.getsignal(number) is signal.SIG_DFL:
            saved[number] = signal.signal(number, _stop)
    try:
        yield
    finally:
        for number, handler in saved.items():
            signal.signal(number, handler)


def _one_line(exc: BaseException | Warning | str) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


@contextlib.contextmanager
def _collected_warnings() -> Iterator[list[warnings.WarningMessage]]:
    """Warnings raised inside, kept to be shown as one line each (main thread only).

    :func:`warnings.catch_warnings` changes process-wide state, so a command
    run from another thread leaves warnings to Python's usual display.
    """
    if threading.current_thread() is not threading.main_thread():
        yield []
        return
    with warnings.catch_warnings(record=True) as caught:
        yield caught


def _show_warnings(name: str, caught: list[warnings.WarningMessage]) -> None:
    for text in dict.fromkeys(_one_line(w.message) for w in caught):
        print(f"{name}: warning: {text}", file=sys.stderr)


@contextlib.contextmanager
def _escaped_output() -> Iterator[None]:
    """Standard output writes what it cannot encode with backslash escapes, as stderr does."""
    stream = sys.stdout
    reconfigure = getattr(stream, "reconfigure", None)
    errors = getattr(stream, "errors", None)
    if reconfigure is None or errors != "strict":
        yield
        return
    reconfigure(errors="backslashreplace")
    try:
        yield
    finally:
        with contextlib.suppress(ValueError, OSError):  # closed meanwhile
            reconfigure(errors=errors)


def _out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` says an allocation failed (numpy's MemoryError, torch's allocators)."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("can't allocate memory" in text
                                              or "out of memory" in text.lower())


def _memory_message(exc: BaseException, hint: str | None) -> str:
    text = _one_line(exc)
    size = re.search(r"allocate ([\d.]+ [KMGTPE]?i?B)\b", text)  # numpy
    count = re.search(r"allocate (\d+) bytes", text)  # torch
    if size is not None:
        asked = f": it asked for {size.group(1)}"
    elif count is not None:
        asked = f": it asked for {int(count.group(1)) / 2**30:.3g} GiB"
    else:
        asked = ""
    fix = hint or "give smaller inputs or options"
    return f"not enough memory for this job{asked}; {fix}."


def _check_files(args: argparse.Namespace) -> None:
    from .. import _files

    args.outputs = {}
    if args.files is None:
        return
    inputs, targets = args.files(args)
    args.outputs = _files.outputs(targets, inputs, parents=args.makes_folders)
    figures = [args.outputs.get(option) for option in args.figure_outputs]
    if any(figures):
        from ..plot import figure_format

        for target in figures:
            if target is not None:
                figure_format(target)


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
        printed on standard error), 2 for a usage error, 130 when interrupted
        (Ctrl-C) and 128 + the signal number when stopped by a signal.
    """
    from .._files import reserve_stdout

    parser = build_parser()
    args = parser.parse_args(argv)
    name = f"nadaraya {args.command}"
    try:
        with _stoppable(), _escaped_output(), reserve_stdout():
            with _collected_warnings() as caught:
                _check_files(args)
                status = int(args.run(args) or 0)
            if status == 0:
                _show_warnings(name, caught)
            return status
    except BrokenPipeError:
        # The reader of our output went away (``nadaraya demo | head``): stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except (NadarayaError, OSError) as exc:
        print(f"{name}: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except (MemoryError, RuntimeError) as exc:
        if not _out_of_memory(exc):
            raise
        print(f"{name}: error: {_memory_message(exc, args.memory_hint)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{name}: interrupted; no partial output was left behind.", file=sys.stderr)
        return 130
    except _Stopped as stop:
        print(f"{name}: stopped by {signal.Signals(stop.signum).name}; no partial output was "
              "left behind.", file=sys.stderr)
        return 128 + stop.signum
