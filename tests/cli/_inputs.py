"""A guard for command-line tests: no command may change a byte of its input files.

Use it in every module that runs ``nadaraya.cli.main``::

    @pytest.fixture(autouse=True)
    def _inputs_unchanged(monkeypatch):
        yield from guard_inputs(monkeypatch)

Each parsed command then hashes its inputs before it runs and again after
(whether it succeeded or failed), and the test fails if any input changed.
The inputs are the files the command declares (its ``files(args)``) and every
other existing file named on the command line that is not one of its outputs.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from nadaraya import cli


def digest(path: Path) -> str:
    """SHA-256 of the file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def input_files(args: Any, argv: Sequence[str]) -> list[Path]:
    """The inputs of a parsed command: declared ones, and other named files not outputs."""
    files = getattr(args, "files", None)
    declared, targets = files(args) if files is not None else ([], {})
    outputs = {os.path.realpath(p) for p in targets.values() if p is not None and str(p) != "-"}
    found = [Path(p) for p in declared if p is not None and str(p) != "-"]
    found += [Path(a) for a in argv if os.path.isfile(a) and os.path.realpath(a) not in outputs]
    unique = {os.path.realpath(p): p for p in found if os.path.isfile(p)}
    return list(unique.values())


def guard_inputs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[Path, str]]]:
    """Make every command parsed during the test check that its inputs are unchanged.

    Yields the list of ``{input: digest}`` records, one per command run.
    """
    build = cli.build_parser
    records: list[dict[Path, str]] = []

    def guarded_parser() -> Any:
        parser = build()
        parse = parser.parse_args

        def parse_args(argv: Sequence[str] | None = None, namespace: Any = None) -> Any:
            args = parse(argv, namespace)
            run = args.run

            def guarded_run(parsed: Any) -> Any:
                before = {p: digest(p) for p in input_files(parsed, list(argv or []))}
                records.append(before)
                try:
                    return run(parsed)
                finally:
                    changed = [str(p) for p, h in before.items()
                               if not os.path.isfile(p) or digest(p) != h]
                    if changed:
                        raise AssertionError(f"nadaraya {parsed.command} changed its input "
                                             f"file(s): {', '.join(changed)}")

            args.run = guarded_run
            return args

        parser.parse_args = parse_args
        return parser

    monkeypatch.setattr(cli, "build_parser", guarded_parser)
    yield records
