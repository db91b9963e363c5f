"""The command line, walked: its commands, their options, and one quick valid run of each.

``leaf_commands`` walks ``nadaraya.cli.build_parser()``, so tests built on it
cover a new option or command without being edited; a new command needs one
entry in :data:`BASE`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nadaraya.cli import build_parser

__all__ = ["BASE", "HEAVY", "WORK", "Command", "action_for", "argv_for", "declared", "is_flag",
           "label", "leaf_commands", "options", "workdir"]

Command = tuple[str, ...]


def leaf_commands(parser: argparse.ArgumentParser | None = None,
                  path: Command = ()) -> Iterator[tuple[Command, argparse.ArgumentParser]]:
    """Every runnable command (``("lm", "train")``) and its parser."""
    parser = parser or build_parser()
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for action in subs:
        for name, sub in action.choices.items():
            yield from leaf_commands(sub, (*path, name))


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The options and positionals of a command, without --help and --version."""
    return [a for a in parser._actions
            if not isinstance(a, (argparse._HelpAction, argparse._VersionAction,
                                  argparse._SubParsersAction))]


def is_flag(action: argparse.Action) -> bool:
    return action.nargs == 0


def label(action: argparse.Action) -> str:
    return action.option_strings[-1] if action.option_strings else str(action.metavar)


#: One quick, valid invocation of each command, by destination: a string, a list (repeated
#: or nargs="+" options), True for a flag. File names refer to the files of ``workdir``.
BASE: dict[Command, dict[str, Any]] = {
    ("demo",): {"repeat": "1", "bandwidth": "2", "no_figures": True},
    ("fit",): {"data": "data.csv", "x": ["x"], "y": "y", "bandwidth": "2"},
    ("denoise",): {"input": "noisy.png", "output": "out.png", "method": "bilateral",
                   "sigma": "20"},
    ("attention",): {"text": "The cat sat."},
    ("lm", "train"): {"steps": "1", "batch": "1", "d_model": "4", "heads": "1", "layers": "1",
                      "context": "4", "eval_chars": "10", "out": "lm.safetensors"},
    ("lm", "sample"): {"checkpoint": "model.safetensors", "length": "2"},
    ("lm", "ngram"): {"order": ["1"]},
    ("explore",): {"check": True, "no_browser": True, "port": "0"},
}
#: Commands that take more than a second a run (a model to load).
HEAVY = {("attention",), ("explore",)}
#: Counts of work (not of memory): a huge one is a long job the user asked for, not an error.
WORK = {("demo",): {"repeat"}, ("lm", "train"): {"steps", "layers"},
        ("lm", "sample"): {"length"}}


def argv_for(command: Command, parser: argparse.ArgumentParser,
             values: dict[str, Any]) -> list[str]:
    """The argument list that gives each destination its value."""
    argv = list(command)
    for action in options(parser):
        if action.dest not in values:
            continue
        value = values[action.dest]
        if not action.option_strings:
            argv += value if isinstance(value, list) else [value]
        elif isinstance(action, argparse.BooleanOptionalAction):
            argv.append(action.option_strings[0 if value else 1])
        elif is_flag(action):
            argv += [action.option_strings[0]] * (value if isinstance(value, int) else 1)
        elif action.nargs in ("+", "*"):
            argv += [action.option_strings[0], *value]
        elif isinstance(value, list):
            for v in value:
                argv += [action.option_strings[0], v]
        else:
            argv += [action.option_strings[0], value]
    return argv


def action_for(parser: argparse.ArgumentParser, option: str) -> argparse.Action:
    """The action an option string or a positional's metavar names."""
    return next(a for a in options(parser) if option in a.option_strings or a.metavar == option)


def declared(command: Command) -> tuple[list[str], dict[str, Any]]:
    """The inputs and outputs the base invocation of ``command`` declares."""
    parser = dict(leaf_commands())[command]
    args = build_parser().parse_args(argv_for(command, parser, BASE[command]))
    if args.files is None:
        return [], {}
    inputs, outputs = args.files(args)
    return [str(p) for p in inputs if p is not None], outputs


@contextlib.contextmanager
def workdir(assets: Path) -> Iterator[Path]:
    """A fresh folder, made the working directory, holding the assets and some odd entries."""
    with tempfile.TemporaryDirectory() as name, contextlib.chdir(name):
        folder = Path(name)
        for file in assets.iterdir():
            shutil.copyfile(file, folder / file.name)
        (folder / "folder").mkdir()
        os.symlink("loop", folder / "loop")
        os.symlink("nowhere/file.csv", folder / "dangling")
        yield folder
