"""Reading numeric columns of a CSV file in whatever encoding it was saved in.

The encoding is the one given (``--encoding``), else found from the bytes:
a byte-order mark (UTF-8, UTF-16, UTF-32), else UTF-8 when the file decodes
as UTF-8, else UTF-16 without a mark when every other byte is zero, else
Windows-1252 (cp1252, the usual "ANSI" of spreadsheets), else Latin-1 (which
reads any byte). The reader reports which one it used.
"""

from __future__ import annotations

import codecs
import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .._errors import NadarayaError

__all__ = ["Table", "decode", "read_columns"]

_MISSING = {"", "na", "nan", "n/a", "null", "none", "."}
_BOMS = (  # UTF-32 first: its little-endian mark starts with UTF-16's
    (codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


@dataclass
class Table:
    """Numeric columns read from a CSV file.

    Attributes
    ----------
    columns : dict of str to list of float
        The requested columns.
    dropped : int
        Rows dropped for missing values (``drop_missing=True``).
    lines : list of int
        The file line of each row kept.
    encoding : str
        The text encoding the file was read with.
    """

    columns: dict[str, list[float]]
    dropped: int
    lines: list[int]
    encoding: str


def _utf16_without_mark(data: bytes) -> str | None:
    if len(data) < 4 or len(data) % 2:
        return None
    even, odd = data[0::2], data[1::2]
    zeros_even, zeros_odd = even.count(0) / len(even), odd.count(0) / len(odd)
    if zeros_odd > 0.3 and zeros_even < 0.05:
        return "utf-16-le"
    if zeros_even > 0.3 and zeros_odd < 0.05:
        return "utf-16-be"
    return None


def decode(data: bytes, encoding: str | None = None, *, what: str = "the file") -> tuple[str, str]:
    """Text of ``data`` and the encoding used (given, or found as the module says).

    Raises
    ------
    NadarayaError
        An unknown ``encoding``, bytes that are not valid in it, or a binary
        file (zero bytes that are not UTF-16).
    """
    if encoding is not None:
        try:
            name = codecs.lookup(encoding).name
        except LookupError:
            raise NadarayaError(f"--encoding {encoding!r} is not an encoding Python knows; "
                                "use e.g. utf-8, cp1252, latin-1 or utf-16.") from None
        if name == "utf-8" and data.startswith(codecs.BOM_UTF8):
            name = "utf-8-sig"
        try:
            return data.decode(name), encoding
        except UnicodeDecodeError as exc:
            raise NadarayaError(
                f"{what} is not valid {encoding}: byte 0x{data[exc.start]:02x} at offset "
                f"{exc.start} cannot be decoded. Leave out --encoding to detect it, or give "
                "the encoding the file was saved in."
            ) from None
    for mark, name in _BOMS:
        if data.startswith(mark):
            try:
                return data.decode(name), name.removesuffix("-sig")
            except UnicodeDecodeError:
                break
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    name = _utf16_without_mark(data)
    if name is not None:
        try:
            return data.decode(name), name
        except UnicodeDecodeError:
            pass
    if b"\x00" in data:
        raise NadarayaError(f"{what} is a binary file, not text (it holds zero bytes); give a "
                            "CSV file, or its encoding with --encoding.")
    try:
        return data.decode("cp1252"), "cp1252"
    except UnicodeDecodeError:
        return data.decode("latin-1"), "latin-1"


def _describe(lines: list[int], samples: list[str] | None = None) -> str:
    shown = lines[:8]
    if samples is None:
        text = ", ".join(map(str, shown))
    else:
        text = ", ".join(f"{line} ({value!r})" for line, value in zip(shown, samples,
                                                                       strict=False))
    more = f" and {len(lines) - len(shown)} more" if len(lines) > len(shown) else ""
    return f"line{'s' if len(lines) > 1 else ''} {text}{more}"


def read_columns(path: Path, columns: Sequence[str], *, drop_missing: bool = False,
                 role: str = "DATA.csv", encoding: str | None = None) -> Table:
    """Read the named numeric columns of a CSV file.

    Parameters
    ----------
    path : pathlib.Path
    columns : sequence of str
        The columns to read, by their header names.
    drop_missing : bool, default False
        Drop rows with a missing value instead of raising.
    role : str, default "DATA.csv"
        How messages name the file.
    encoding : str, optional
        The text encoding; found from the bytes when not given (see the module).

    Returns
    -------
    Table

    Raises
    ------
    NadarayaError
        For a missing file or column, an empty or binary file, non-numeric
        values, or missing values (unless ``drop_missing``), naming the rows.
    """
    if not path.is_file():
        raise NadarayaError(f"{role} {path} does not exist or is not a file.")
    text, used = decode(path.read_bytes(), encoding, what=f"{role} {path}")
    rows = [(i, row) for i, row in enumerate(csv.reader(io.StringIO(text, newline="")), start=1)
            if row and not row[0].lstrip().startswith("#") and any(cell.strip() for cell in row)]
    if not rows:
        raise NadarayaError(f"{role} {path} is empty: it needs a header line of column names "
                            "and rows of numbers.")
    header = [name.strip() for name in rows[0][1]]
    body = rows[1:]
    if not body:
        raise NadarayaError(f"{role} {path} has a header but no data rows.")
    index = {}
    for name in columns:
        if name not in header:
            raise NadarayaError(
                f"column {name!r} is not in {role} {path} (read as {used}); its columns are: "
                f"{', '.join(header)}."
            )
        index[name] = header.index(name)
    table: dict[str, list[float]] = {name: [] for name in columns}
    missing: dict[str, list[int]] = {name: [] for name in columns}
    bad: dict[str, list[tuple[int, str]]] = {name: [] for name in columns}
    keep_lines, dropped = [], 0
    for line, row in body:
        values, row_missing = {}, False
        for name, j in index.items():
            cell = row[j].strip() if j < len(row) else ""
            if cell.lower() in _MISSING:
                missing[name].append(line)
                row_missing = True
                continue
            try:
                value = float(cell)
            except ValueError:
                bad[name].append((line, cell))
                continue
            if not math.isfinite(value):
                bad[name].append((line, cell))
            values[name] = value
        if row_missing and drop_missing:
            dropped += 1
            continue
        keep_lines.append(line)
        for name, value in values.items():
            table[name].append(value)
    for name in columns:
        if bad[name]:
            lines = [line for line, _ in bad[name]]
            raise NadarayaError(
                f"column {name!r} of {role} {path} has {len(lines)} value(s) that are not finite "
                f"numbers, at {_describe(lines, [v for _, v in bad[name]])}. Fix or remove "
                "those rows."
            )
    for name in columns:
        if missing[name] and not drop_missing:
            raise NadarayaError(
                f"column {name!r} of {role} {path} has {len(missing[name])} missing value(s) "
                f"(empty or NA) at {_describe(missing[name])}. Remove those rows or pass "
                "--drop-missing."
            )
    if not keep_lines:
        raise NadarayaError(f"every row of {role} {path} has a missing value in the columns "
                            f"{', '.join(columns)}; nothing is left to fit.")
    return Table(table, dropped, keep_lines, used)
