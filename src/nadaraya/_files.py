"""Writing files safely: the one helper behind every file nadaraya writes.

* A regular file is written to a temporary file in its own folder, flushed to
  disk (``fsync``) and renamed over the target with :func:`os.replace`: a
  reader sees the old file or the complete new one, never a partial file. A
  failed or interrupted write leaves the old file as it was and no temporary
  file behind. A replaced file keeps its permission bits; a new one gets
  ``0o666`` less the umask.
* A symbolic link is followed: the file it points to is replaced, the link
  stays a link (a dangling link creates its target).
* A FIFO, a character device (``/dev/null``, a terminal) or ``-`` (standard
  output) is streamed to, never replaced by a regular file. A path that is the
  process's standard output (``/dev/stdout``, ``/proc/self/fd/1``) is the
  same as ``-``.
* A target that is, or resolves to, one of the inputs of the same job (the
  same path, a symbolic link to it, or a hard link: the same device and inode)
  is refused, as is a folder, a symbolic-link loop, a missing or read-only
  folder.

:func:`output` checks a target once, before a long job starts, and returns
an :class:`Output` that checks again and writes at the end. A command that
writes to standard output runs inside :func:`reserve_stdout`, so its messages
go to standard error and the data stays clean.

Examples
--------
>>> import tempfile, pathlib
>>> from nadaraya._files import output
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> out = output(folder / "fit.csv", option="--out")
>>> out.write_text("x,y\\n1,2\\n")
>>> (folder / "fit.csv").read_text()
'x,y\\n1,2\\n'
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from ._errors import NadarayaError

__all__ = ["Output", "WriteError", "check_folder", "output", "outputs", "reserve_stdout",
           "write_or_rescue"]

PathLike = str | os.PathLike[str]

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)

#: Standard output streams reserved for data by :func:`reserve_stdout` (innermost last).
_reserved: list[Any] = []


@contextlib.contextmanager
def reserve_stdout() -> Iterator[None]:
    """Keep standard output for data: once an :class:`Output` claims it, messages go to stderr.

    Inside this context, creating an :class:`Output` for ``-`` (or a path that
    is the process's standard output) points ``sys.stdout`` at ``sys.stderr``,
    so ``print`` calls no longer mix with the data; the data is written to the
    standard output that was current on entry. ``sys.stdout`` is restored on
    exit.
    """
    saved = sys.stdout
    _reserved.append(saved)
    try:
        yield
    finally:
        _reserved.pop()
        sys.stdout = saved


def _claim_stdout() -> Any:
    """The stream that carries data to standard output; moves messages to stderr if reserved."""
    if not _reserved:
        return sys.stdout
    data = _reserved[-1]
    if sys.stdout is data:
        data.flush()
        sys.stdout = sys.stderr
    return data


def _is_stdout(st: os.stat_result) -> bool:
    try:
        fd = sys.__stdout__.fileno() if sys.__stdout__ is not None else 1
        out = os.fstat(fd)
    except (OSError, ValueError, AttributeError):
        return False
    return (st.st_dev, st.st_ino) == (out.st_dev, out.st_ino)


def _describe(path: PathLike) -> str:
    return "standard output" if str(path) == "-" else str(path)


class WriteError(OSError):
    """A failed write, its message naming the target and the fix; ``errno`` is the cause's."""

    def __str__(self) -> str:
        return str(self.strerror)


_FIXES = {errno.ENOSPC: "Free some space or write elsewhere.",
          errno.EDQUOT: "Free some space or write elsewhere.",
          errno.EACCES: "Choose a place this user can write to.",
          errno.EPERM: "Choose a place this user can write to.",
          errno.EROFS: "The file system is read-only; write elsewhere."}


class Output:
    """A checked place to write one file: a regular file, a stream, or standard output.

    Build it with :func:`output`. The checks run again at write time, since
    the file system may change during a long job.

    Attributes
    ----------
    path : pathlib.Path
        The target as given (``Path("-")`` for standard output).
    option : str
        How the caller named it (``"--out"``, ``"OUT"``, ``"path"``), used in messages.
    kind : {"file", "stream", "stdout"}
        Replaced atomically, streamed to (FIFO, character device), or standard output.
    real : pathlib.Path or None
        For ``"file"``: the file that is replaced (symbolic links resolved).
    inputs : tuple of pathlib.Path
        Files the target must not be.
    parents : bool
        Whether a missing folder of the target is made when it is written.
    """

    def __init__(self, path: PathLike, *, option: str = "path",
                 inputs: Iterable[PathLike | None] = (), parents: bool = False) -> None:
        self.path = Path(path)
        self.option = option
        self.inputs = tuple(Path(p) for p in inputs if p is not None and str(p) != "-")
        self.parents = parents
        self.kind = "file"
        self.real: Path | None = None
        self.check()

    def __repr__(self) -> str:
        return f"Output({str(self.path)!r}, option={self.option!r}, kind={self.kind!r})"

    def __str__(self) -> str:
        return _describe(self.path)

    @property
    def suffix(self) -> str:
        """The target's suffix, lower case (``".png"``); empty for standard output."""
        return "" if self.kind == "stdout" else self.path.suffix.lower()

    # -- checks ------------------------------------------------------------------
    def _fail(self, problem: str, fix: str) -> NadarayaError:
        return NadarayaError(f"{self.option} {_describe(self.path)} {problem}; {fix}")

    def check(self) -> None:
        """Check the target again; raises :class:`NadarayaError` naming what is wrong."""
        if str(self.path) == "-":
            self.kind, self.real = "stdout", None
            _claim_stdout()
            return
        try:
            st: os.stat_result | None = os.stat(self.path)
        except FileNotFoundError:
            st = None
        except ValueError:  # a zero byte, or text no file name can hold
            raise self._fail("is not a file name this system can use (it holds a zero byte or "
                             "a character that cannot be encoded)", "give another "
                             "path.") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise self._fail("is a symbolic link loop (it never reaches a file)",
                                 "remove the link or give another path.") from None
            if exc.errno == errno.ENOTDIR:
                raise self._fail("goes through a file as if it were a folder",
                                 "check the path.") from None
            raise self._fail(f"cannot be checked ({exc.strerror})", "give another path.") from None
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise self._fail("is a folder", f"give a file name inside it, such as "
                                            f"{self.path / ('result' + self.path.suffix)}.")
        if st is not None and _is_stdout(st):
            self.kind, self.real = "stdout", None
            _claim_stdout()
        elif st is not None and (stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode)):
            self.kind, self.real = "stream", None
        elif st is not None and not stat.S_ISREG(st.st_mode):
            raise self._fail("is neither a regular file, a FIFO nor a character device",
                             "give a file name.")
        else:
            self.kind, self.real = "file", Path(os.path.realpath(self.path))
            folder = self.real.parent
            if not folder.is_dir() and self.parents:
                check_folder(folder, option=f"{self.option} {self.path}: the folder")
            elif not folder.is_dir():
                raise self._fail(f"is in the folder {folder}, which does not exist",
                                 f"create it first (mkdir -p {folder}) or give another path.")
            elif not os.access(folder, os.W_OK | os.X_OK):
                raise self._fail(f"is in the folder {folder}, where this user cannot write",
                                 "choose a folder you can write to.")
            if st is not None and not os.access(self.real, os.W_OK):
                raise self._fail("is read-only", "make it writable (chmod u+w) or give "
                                                 "another name.")
        self._check_inputs(st)

    def _check_inputs(self, st: os.stat_result | None) -> None:
        for source in self.inputs:
            try:
                source_real = Path(os.path.realpath(source))
                hard = st is not None and source.exists() and os.path.samefile(source,
                                                                               self.path)
            except (OSError, ValueError):  # a name no file has (too long, a zero byte)
                continue
            if self.real is not None and source_real == self.real:
                same = ("the same file as" if Path(os.path.abspath(self.path))
                        == Path(os.path.abspath(source)) else "a symbolic link to")
            elif hard:
                same = "a hard link to" if self.kind == "file" else "the same file as"
            else:
                continue
            raise NadarayaError(
                f"{self.option} {self.path} is {same} the input {source}; nadaraya never "
                "writes over an input. Give the output another name."
            )

    # -- writing -----------------------------------------------------------------
    def _explain(self, exc: OSError) -> OSError:
        """``exc`` with a message naming the target and the fix (a broken pipe stays as it is)."""
        if isinstance(exc, (WriteError, BrokenPipeError)):
            return exc
        fix = _FIXES.get(exc.errno or 0, "Check the path and the disk.")
        return WriteError(exc.errno, f"cannot write {self.option} {self}: "
                                     f"{exc.strerror or exc}. {fix}")

    def _temporary(self, folder: Path, suffix: str) -> tuple[int, Path]:
        name = self.real.name if self.real is not None else "output"
        for _ in range(100):
            tmp = folder / f".{name}.{secrets.token_hex(4)}.tmp{suffix}"
            if len(os.fsencode(tmp.name)) > 255:
                tmp = folder / f".nadaraya.{secrets.token_hex(4)}.tmp{suffix}"
            try:
                fd = os.open(tmp, _CREATE, 0o666)
            except FileExistsError:
                continue
            return fd, tmp
        raise NadarayaError(f"cannot create a temporary file in {folder}.")  # pragma: no cover

    def _mode(self, fd: int) -> int:
        """Permission bits of the result: the replaced file's, else those just created."""
        assert self.real is not None
        try:
            return stat.S_IMODE(os.stat(self.real).st_mode)
        except FileNotFoundError:
            return stat.S_IMODE(os.fstat(fd).st_mode)

    def _commit(self, tmp: Path) -> None:
        assert self.real is not None
        os.replace(tmp, self.real)
        with contextlib.suppress(OSError):
            dir_fd = os.open(self.real.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    @contextlib.contextmanager
    def open(self, mode: str = "wb", *, encoding: str | None = None,
             newline: str | None = None) -> Iterator[IO[Any]]:
        """A file object to write to; the target is complete when the ``with`` block ends.

        Parameters
        ----------
        mode : {"wb", "w"}
            Binary or text.
        encoding : str, optional
            Text mode only; default UTF-8.
        newline : str, optional
            Text mode only, as in :func:`open` (``""`` for the :mod:`csv` module).
        """
        if mode not in ("wb", "w"):
            raise NadarayaError(f"mode must be 'wb' or 'w'; got {mode!r}.")
        text = mode == "w"
        if text and encoding is None:
            encoding = "utf-8"
        self.check()
        if self.kind != "file":
            try:
                if self.kind == "stdout":
                    data = _claim_stdout()
                    data.flush()
                    stream = data if text else getattr(data, "buffer", None)
                    if stream is None:
                        raise NadarayaError(f"{self.option} -: standard output here takes only "
                                            "text, not the bytes of this file; give a file "
                                            "name instead.")
                    yield stream
                    stream.flush()
                else:
                    with open(self.path, mode, encoding=encoding, newline=newline) as f:
                        yield f
            except OSError as exc:
                raise self._explain(exc) from exc
            return
        assert self.real is not None
        try:
            if self.parents:
                self.real.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = self._temporary(self.real.parent, self.real.suffix)
        except OSError as exc:
            raise self._explain(exc) from exc
        try:
            os.fchmod(fd, self._mode(fd))
            with os.fdopen(fd, mode, encoding=encoding, newline=newline) as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            self._commit(tmp)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise self._explain(exc) from exc
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    @contextlib.contextmanager
    def temporary_path(self) -> Iterator[Path]:
        """A path with the target's suffix, for writers that only take a file name.

        The writer fills the path inside the ``with`` block; the result then
        replaces the target (or is copied to the stream). The suffix is kept,
        so writers that pick the format from it still do.
        """
        self.check()
        try:
            if self.kind == "file":
                assert self.real is not None
                if self.parents:
                    self.real.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = self._temporary(self.real.parent, self.real.suffix)
            else:
                fd, tmp = self._temporary(Path(tempfile.gettempdir()), self.path.suffix)
        except OSError as exc:
            raise self._explain(exc) from exc
        try:
            mode = self._mode(fd) if self.kind == "file" else 0o600
            os.close(fd)
            yield tmp
            if self.kind == "file":
                os.chmod(tmp, mode)
                with open(tmp, "rb+") as f:
                    os.fsync(f.fileno())
                self._commit(tmp)
            else:
                with open(tmp, "rb") as src, self.open("wb") as dst:
                    shutil.copyfileobj(src, dst)
        except OSError as exc:
            raise self._explain(exc) from exc
        finally:
            tmp.unlink(missing_ok=True)

    def write_bytes(self, data: bytes) -> None:
        """Write ``data`` as the whole content of the target."""
        with self.open("wb") as f:
            f.write(data)

    def write_text(self, text: str, *, encoding: str = "utf-8") -> None:
        """Write ``text`` as the whole content of the target."""
        with self.open("w", encoding=encoding, newline="") as f:
            f.write(text)


def output(path: PathLike | Output, *, option: str = "path",
           inputs: Iterable[PathLike | None] = (), parents: bool = False) -> Output:
    """Check a target before a job starts; returns the :class:`Output` to write it with.

    Parameters
    ----------
    path : str, path-like or Output
        The target; ``"-"`` is standard output. An :class:`Output` is checked
        again and returned.
    option : str, default "path"
        The name the user gave it (``"--out"``), for the messages.
    inputs : iterable of path-like
        Files of the same job the target must not be (``None`` entries are skipped).
    parents : bool, default False
        Make a missing folder of the target when writing (it must be
        possible: the nearest existing parent is a folder this user can
        write to); by default a missing folder is an error.

    Returns
    -------
    Output

    Raises
    ------
    NadarayaError
        The target is a folder, a symbolic-link loop, in a missing or
        read-only folder, read-only, or one of ``inputs``.
    """
    if isinstance(path, Output):
        path.check()
        return path
    return Output(path, option=option, inputs=inputs, parents=parents)


def outputs(targets: Mapping[str, PathLike | None], inputs: Iterable[PathLike | None] = (),
            *, parents: Iterable[str] = ()) -> dict[str, Output | None]:
    """Check several targets of one job: each as :func:`output`, and no two the same file.

    Parameters
    ----------
    targets : mapping of option name to path or None
        ``None`` (an option not given) stays ``None``.
    inputs : iterable of path-like
    parents : iterable of str
        The options whose missing folders are made when written.

    Returns
    -------
    dict of option name to Output or None
    """
    inputs, parents = list(inputs), set(parents)
    checked: dict[str, Output | None] = {}
    seen: dict[tuple[Any, ...], str] = {}
    for option, path in targets.items():
        if path is None:
            checked[option] = None
            continue
        out = output(path, option=option, inputs=inputs, parents=option in parents)
        if out.kind == "file":
            assert out.real is not None
            key: tuple[Any, ...] = ("file", out.real)
        else:
            st = os.stat(out.path) if out.kind == "stream" else None
            key = ("stdout",) if st is None else ("stream", st.st_dev, st.st_ino)
        if key in seen:
            raise NadarayaError(f"{option} and {seen[key]} name the same file {out}; give "
                                "them different names.")
        seen[key] = option
        checked[option] = out
    return checked


def check_folder(path: PathLike, *, option: str = "folder") -> Path:
    """Check that files can be created in folder ``path`` (made later if missing).

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    NadarayaError
        ``path`` is a file, or neither it nor its nearest existing parent is
        a folder this user can write to.
    """
    folder = Path(path)
    try:
        if b"\x00" in os.fsencode(folder):
            raise ValueError("a zero byte")
        probe = folder
        while not probe.exists() and probe != probe.parent:
            if probe.is_symlink():
                raise NadarayaError(f"{option} {folder}: {probe} is a dangling symbolic link; "
                                    "remove it or give another folder.")
            probe = probe.parent
    except NadarayaError:
        raise
    except (OSError, ValueError) as exc:  # a name too long, a zero byte, undecodable text
        reason = getattr(exc, "strerror", None) or str(exc)
        raise NadarayaError(f"{option} {folder} cannot be a folder name here ({reason}); give "
                            "another folder.") from None
    if not probe.is_dir():
        raise NadarayaError(f"{option} {folder}: {probe} is a file, not a folder; give a "
                            "folder name.")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise NadarayaError(f"{option} {folder}: this user cannot write in {probe}; choose "
                            "a folder you can write to.")
    return folder


def _rescue_places(name: str) -> Iterator[Path]:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    stem, suffix = Path(name).stem or "output", Path(name).suffix
    for folder in (Path.cwd(), Path(tempfile.gettempdir())):
        yield folder / f"{stem}.rescued-{stamp}-{os.getpid()}{suffix}"


def write_or_rescue(target: Output, write: Callable[[Output], None]) -> Path:
    """Write a result that took long to compute; if the target fails, save it elsewhere.

    ``write(target)`` writes the result. If it raises :class:`OSError` or
    :class:`NadarayaError` (disk full, folder removed during the job), the
    result is written to a new file in the working directory, or else in the
    temporary folder, and a :class:`NadarayaError` says where it is.

    Parameters
    ----------
    target : Output
    write : callable taking an Output

    Returns
    -------
    pathlib.Path
        Where the result was written (the target's path when it succeeded).

    Raises
    ------
    NadarayaError
        When the target could not be written: names the fallback file, or
        every failure when no place could take the result.
    """
    try:
        write(target)
        return target.path
    except (OSError, NadarayaError) as exc:
        first = exc
    failures = [f"{target.path}: {first}"]
    for place in _rescue_places(target.path.name if target.kind != "stdout" else "output"):
        try:
            write(output(place, option="the rescue file"))
        except (OSError, NadarayaError) as exc:
            failures.append(f"{place}: {exc}")
            continue
        reason = str(first) if isinstance(first, WriteError) else (
            f"cannot write {target.option} {target}: {first}.")
        raise NadarayaError(f"{reason} The result is saved in {place} instead; move it where "
                            "you want it.") from None
    raise NadarayaError("cannot write the result anywhere: " + "; ".join(failures))
