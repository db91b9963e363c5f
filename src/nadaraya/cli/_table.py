"""Reading numeric columns of a CSV file in whatever encoding it was saved in.

The encoding is the one given (``--encoding``), else found from the bytes:
a byte-order mark (UTF-8, UTF-16, UTF-32), else UTF-16 without a mark when
every other byte is zero, else UTF-8 when the file decodes as UTF-8, else
Windows-1252 (cp1252, the usual "ANSI" of spreadsheets), else Latin-1 (which
reads any byte). Text never holds zero bytes, so a file with zero bytes that
is not UTF-16 is refused as binary. The reader reports which one it used.

The cells are separated by commas, or by tabs or semicolons when the header
line has no comma but one of those (TSV files, spreadsheets saved with a
decimal comma). The file may be a FIFO (``<(command)`` in a shell) or a
character device; it is read once, whole.
"""

from __future__ import annotations

import codecs
import csv
import io
import math
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .._errors import NadarayaError

__all__ = ["Table", "decode", "read_columns"]

_MISSING = {"", "na", "nan", "n/a", "null", "none", "."}
#: Longest text of a cell or column name quoted in a message.
_SHOWN = 40
_DELIMITERS = (",", "\t", ";")
#: Bytes read at a time.
_BLOCK = 1 << 20
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
    missing_by_column : dict of str to int
        Missing cells of each column (with ``drop_missing=True``).
    """

    columns: dict[str, list[float]]
    dropped: int
    lines: list[int]
    encoding: str
    missing_by_column: dict[str, int] = field(default_factory=dict)


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
        return _decode_as(data, encoding, what), encoding
    for mark, name in _BOMS:
        if data.startswith(mark):
            try:
                return data.decode(name), name.removesuffix("-sig")
            except UnicodeDecodeError:
                break
    if b"\x00" in data:
        name = _utf16_without_mark(data)
        if name is not None:
            try:
                return data.decode(name), name
            except UnicodeDecodeError:
                pass
        raise NadarayaError(f"{what} is a binary file, not text (it holds zero bytes); give a "
                            "CSV file, or its encoding with --encoding.")
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        return data.decode("cp1252"), "cp1252"
    except UnicodeDecodeError:
        return data.decode("latin-1"), "latin-1"


def _decode_as(data: bytes, encoding: str, what: str) -> str:
    """``data`` decoded with the text encoding the user named."""
    fix = "use e.g. utf-8, cp1252, latin-1 or utf-16."
    try:
        info = codecs.lookup(encoding)
    except (LookupError, ValueError):  # ValueError: a zero byte in the name
        raise NadarayaError(f"--encoding {_shown(encoding)} is not an encoding Python knows; "
                            f"{fix}") from None
    if not getattr(info, "_is_text_encoding", True):  # base64, zlib, rot13: bytes to bytes
        raise NadarayaError(f"--encoding {_shown(encoding)} is not a text encoding; {fix}")
    name = info.name
    if name == "utf-8" and data.startswith(codecs.BOM_UTF8):
        name = "utf-8-sig"
    try:
        return data.decode(name)
    except UnicodeDecodeError as exc:
        raise NadarayaError(
            f"{what} is not valid {encoding}: byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start} cannot be decoded. Leave out --encoding to detect it, or give "
            "the encoding the file was saved in."
        ) from None
    except UnicodeError as exc:  # codecs such as punycode raise their own errors
        raise NadarayaError(f"{what} cannot be read as {encoding} ({exc}). Leave out "
                            "--encoding to detect it, or give the encoding the file was saved "
                            "in.") from None


def _shown(text: str) -> str:
    """``text`` quoted for a message, cut to a few dozen characters."""
    if len(text) <= _SHOWN:
        return repr(text)
    return f"{text[:_SHOWN]!r}... ({len(text)} characters)"


def _describe(lines: list[int], samples: list[str] | None = None) -> str:
    shown = lines[:8]
    if samples is None:
        text = ", ".join(map(str, shown))
    else:
        text = ", ".join(f"{line} ({_shown(value)})" for line, value in zip(shown, samples,
                                                                              strict=False))
    more = f" and {len(lines) - len(shown)} more" if len(lines) > len(shown) else ""
    return f"line{'s' if len(lines) > 1 else ''} {text}{more}"


def _read_bytes(path: Path, role: str, encoding: str | None) -> bytes:
    """The whole content of ``path``: a regular file, a FIFO or a character device.

    Reading stops at the first block when that block is binary (zero bytes,
    not UTF-16 or UTF-32) and no encoding was given, so that an endless device
    such as ``/dev/zero`` or a large binary file is refused at once.
    """
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise NadarayaError(f"{role} {path} is a folder; give the path of a CSV file in it.")
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode)
                or stat.S_ISCHR(st.st_mode)):
            raise NadarayaError(f"{role} {path} is neither a file, a FIFO nor a character "
                                "device; give the path of a CSV file.")
        blocks = []
        with open(path, "rb") as f:
            while block := f.read(_BLOCK):
                if not blocks and encoding is None and _binary(block):
                    raise NadarayaError(f"{role} {path} is a binary file, not text (it holds "
                                        "zero bytes); give a CSV file, or its encoding with "
                                        "--encoding.")
                blocks.append(block)
    except NadarayaError:
        raise
    except FileNotFoundError:
        raise NadarayaError(f"{role} {path} does not exist; give the path of a CSV "
                            "file.") from None
    except (OSError, ValueError) as exc:  # ValueError: a zero byte in the name
        reason = getattr(exc, "strerror", None) or str(exc)
        raise NadarayaError(f"{role} {path} cannot be read ({reason}); give a CSV file this "
                            "user can read.") from None
    return b"".join(blocks)


def _binary(block: bytes) -> bool:
    """Whether the first block of a file shows binary data rather than text."""
    if b"\x00" not in block or any(block.startswith(mark) for mark, _ in _BOMS):
        return False
    return _utf16_without_mark(block[: len(block) - len(block) % 2]) is None


def _delimiter(text: str) -> str:
    """Comma; or tab or semicolon when the header line has no comma but one of those."""
    for line in io.StringIO(text, newline=""):
        if line.strip() and not line.lstrip().startswith("#"):
            return next((d for d in _DELIMITERS if d in line), ",")
    return ","


def _rows(text: str, role: str, path: Path) -> list[tuple[int, list[str]]]:
    """The non-empty, non-comment rows of ``text`` with their line numbers."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=_delimiter(text))
    rows = []
    while True:
        line = reader.line_num + 1  # where the next row starts
        try:
            row = next(reader)
        except StopIteration:
            return rows
        except csv.Error as exc:
            raise NadarayaError(f"{role} {path} is not a CSV file of numbers: the row at line "
                                f"{line} cannot be read ({exc}). Give a file of comma-separated "
                                "numbers under a header line.") from None
        if row and not row[0].lstrip().startswith("#") and any(c.strip() for c in row):
            rows.append((line, row))


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
    text, used = decode(_read_bytes(path, role, encoding), encoding, what=f"{role} {path}")
    rows = _rows(text, role, path)
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
            names = ", ".join(h if len(h) <= _SHOWN else f"{h[:_SHOWN]}..." for h in header[:20])
            more = f" and {len(header) - 20} more" if len(header) > 20 else ""
            raise NadarayaError(
                f"column {_shown(name)} is not in {role} {path} (read as {used}); its columns "
                f"are: {names}{more}."
            )
        if header.count(name) > 1:
            raise NadarayaError(
                f"column {_shown(name)} appears {header.count(name)} times in the header of "
                f"{role} {path}; rename the copies so that each column has its own name."
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
                f"those rows, or pass --categorical {name} if they are levels."
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
    return Table(table, dropped, keep_lines, used,
                 {name: len(missing[name]) for name in columns if missing[name]})
