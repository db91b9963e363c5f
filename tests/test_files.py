"""The file-writing helper: atomic replacement, streams, links, inputs, failures, races."""

from __future__ import annotations

import errno
import os
import stat
import sys
import threading
from pathlib import Path

import pytest

from nadaraya import NadarayaError, _files
from nadaraya._files import check_folder, output, outputs, reserve_stdout, write_or_rescue


def _leftovers(folder: Path, *keep: str) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in keep)


@pytest.fixture
def old(tmp_path: Path) -> Path:
    path = tmp_path / "result.csv"
    path.write_bytes(b"old contents\n" * 100)
    return path


class _Boom(Exception):
    pass


@pytest.mark.parametrize("error", [_Boom("writer failed"), KeyboardInterrupt(),
                                   OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))])
def test_a_write_that_fails_midway_keeps_the_old_file(old: Path, error: BaseException) -> None:
    before = old.read_bytes()
    with pytest.raises(type(error)), output(old).open("wb") as f:
        f.write(b"new partial contents" * 1000)
        f.flush()
        raise error
    assert old.read_bytes() == before
    assert _leftovers(old.parent, old.name) == [], "no temporary file is left behind"


class _FullDisk:
    """A file object whose writes fail with ENOSPC once ``limit`` bytes went through."""

    def __init__(self, f, limit: int) -> None:
        self._f, self._left = f, limit

    def write(self, data):
        if len(data) > self._left:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._left -= len(data)
        return self._f.write(data)

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


def test_disk_full_during_write_keeps_the_old_file(old: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.fdopen
    monkeypatch.setattr(_files.os, "fdopen", lambda fd, *a, **k: _FullDisk(real(fd, *a, **k), 50))
    before = old.read_bytes()
    with pytest.raises(OSError) as info:
        output(old).write_bytes(b"x" * 10_000)
    assert info.value.errno == errno.ENOSPC
    assert old.read_bytes() == before
    assert _leftovers(old.parent, old.name) == []


def test_disk_full_at_fsync_keeps_the_old_file(old: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(_files.os, "fsync", full)
    before = old.read_bytes()
    with pytest.raises(OSError, match="No space left"):
        output(old).write_bytes(b"new")
    assert old.read_bytes() == before
    assert _leftovers(old.parent, old.name) == []


def test_dev_full_reports_enospc() -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    target = output("/dev/full")
    assert target.kind == "stream"
    with pytest.raises(OSError) as info:
        target.write_bytes(b"x" * 100_000)
    assert info.value.errno == errno.ENOSPC
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_replacement_keeps_the_permission_bits(old: Path) -> None:
    old.chmod(0o640)
    output(old).write_text("new\n")
    assert old.read_text() == "new\n"
    assert stat.S_IMODE(old.stat().st_mode) == 0o640


def test_a_new_file_gets_the_umask_permissions(tmp_path: Path) -> None:
    umask = os.umask(0o027)
    try:
        output(tmp_path / "new.txt").write_text("x")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o640


def test_fifo_is_streamed_to_not_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    target = output(fifo)
    assert target.kind == "stream"
    target.write_bytes(b"through the pipe\n" * 5000)
    reader.join(timeout=30)
    assert received == [b"through the pipe\n" * 5000]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO is still a FIFO"
    assert _leftovers(tmp_path, "pipe") == []


def test_character_device_is_streamed_to() -> None:
    target = output(os.devnull)
    assert target.kind == "stream"
    target.write_text("discarded")
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_dash_is_standard_output(capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    target = output("-")
    assert target.kind == "stdout" and str(target) == "standard output"
    target.write_bytes(b"\x89PNG data")
    assert capsysbinary.readouterr().out == b"\x89PNG data"


def test_dev_stdout_is_standard_output(capfd: pytest.CaptureFixture[str]) -> None:
    if not Path("/dev/stdout").exists():
        pytest.skip("no /dev/stdout on this system")
    target = output("/dev/stdout")
    assert target.kind == "stdout"
    target.write_text("a,b\n1,2\n")
    sys.stdout.flush()
    assert capfd.readouterr().out == "a,b\n1,2\n"
    assert Path("/dev/stdout").is_symlink() or stat.S_ISCHR(os.lstat("/dev/stdout").st_mode)


def test_reserved_stdout_sends_messages_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    with reserve_stdout():
        print("before the claim")
        target = output("-")
        print("a message")
        target.write_text("data\n")
    print("after")
    captured = capsys.readouterr()
    assert captured.out == "before the claim\ndata\nafter\n"
    assert captured.err == "a message\n"


def test_symlink_target_replaces_the_file_it_points_to(old: Path) -> None:
    link = old.with_name("link.csv")
    link.symlink_to(old.name)
    output(link).write_text("through the link\n")
    assert link.is_symlink() and os.readlink(link) == old.name
    assert old.read_text() == "through the link\n"
    assert _leftovers(old.parent, old.name, link.name) == []


def test_dangling_symlink_creates_its_target(tmp_path: Path) -> None:
    link = tmp_path / "link.csv"
    link.symlink_to("made.csv")
    output(link).write_text("made\n")
    assert link.is_symlink() and (tmp_path / "made.csv").read_text() == "made\n"


def test_symlink_loop_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(NadarayaError, match=r"--out .*a is a symbolic link loop"):
        output(tmp_path / "a", option="--out")


def test_folder_target_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NadarayaError, match="is a folder; give a file name inside it"):
        output(tmp_path)


def test_missing_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NadarayaError, match="does not exist; create it first"):
        output(tmp_path / "missing" / "out.csv", option="--out")


def test_read_only_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("this user (root) can write in a read-only folder")
        with pytest.raises(NadarayaError, match="cannot write"):
            output(folder / "out.csv")
    finally:
        folder.chmod(0o755)


@pytest.mark.parametrize("how", ["same path", "symbolic link", "hard link"])
def test_an_input_is_never_a_target(tmp_path: Path, how: str) -> None:
    source = tmp_path / "in.png"
    source.write_bytes(b"input bytes")
    target = {"same path": lambda: source,
              "symbolic link": lambda: (tmp_path / "out.png").symlink_to(source) or
              tmp_path / "out.png",
              "hard link": lambda: os.link(source, tmp_path / "out.png") or
              tmp_path / "out.png"}[how]()
    with pytest.raises(NadarayaError) as info:
        output(target, option="OUT", inputs=[source])
    message = str(info.value)
    assert str(target) in message and str(source) in message and "never writes over" in message
    assert source.read_bytes() == b"input bytes"


def test_two_outputs_naming_one_file_are_refused(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(b"")
    (tmp_path / "b.png").symlink_to("a.png")
    with pytest.raises(NadarayaError, match="--compare and OUT name the same file"):
        outputs({"OUT": tmp_path / "a.png", "--compare": tmp_path / "b.png"})
    checked = outputs({"OUT": tmp_path / "a.png", "--plot": None})
    assert checked["--plot"] is None and checked["OUT"].real == tmp_path / "a.png"


def test_two_threads_writing_one_target(tmp_path: Path) -> None:
    target = tmp_path / "race.bin"
    blobs = [bytes([i]) * 2_000_000 for i in range(2)]
    errors: list[BaseException] = []

    def write(blob: bytes) -> None:
        try:
            for _ in range(5):
                output(target).write_bytes(blob)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(b,)) for b in blobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert target.read_bytes() in blobs, "one writer's complete file, never a mix"
    assert _leftovers(tmp_path, target.name) == []


@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG"), (".tif", b"II*\x00")])
def test_temporary_path_keeps_the_suffix_for_format_guessing_writers(
        tmp_path: Path, suffix: str, magic: bytes) -> None:
    PIL = pytest.importorskip("PIL.Image")
    import numpy as np

    target = tmp_path / f"img{suffix}"
    with output(target).temporary_path() as tmp:
        assert tmp.suffix == suffix and tmp.parent == tmp_path
        PIL.fromarray(np.zeros((4, 4), np.uint8)).save(tmp)  # format from the name
    assert target.read_bytes().startswith(magic)
    assert _leftovers(tmp_path, target.name) == []


def test_temporary_path_streams_to_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    with output(fifo).temporary_path() as tmp:
        tmp.write_bytes(b"via a temporary file")
    reader.join(timeout=30)
    assert received == [b"via a temporary file"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_rescue_writes_beside_the_working_directory(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    target = output(tmp_path / "model.bin", option="--out")
    real_replace = os.replace

    def full_for_target(src: str, dst: str) -> None:
        if Path(dst) == tmp_path / "model.bin":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_replace(src, dst)

    monkeypatch.setattr(_files.os, "replace", full_for_target)
    with pytest.raises(NadarayaError) as info:
        write_or_rescue(target, lambda out: out.write_bytes(b"trained weights"))
    saved = list(work.iterdir())
    assert len(saved) == 1 and saved[0].read_bytes() == b"trained weights"
    assert saved[0].suffix == ".bin" and str(saved[0]) in str(info.value)
    assert "--out" in str(info.value) and "No space left" in str(info.value)
    assert not (tmp_path / "model.bin").exists()


def test_rescue_falls_back_to_the_temporary_folder(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    work, temp = tmp_path / "work", tmp_path / "temp"
    work.mkdir()
    temp.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setattr(_files.tempfile, "tempdir", str(temp))
    real_replace = os.replace

    def full_outside_temp(src: str, dst: str) -> None:
        if Path(dst).parent != temp:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_replace(src, dst)

    monkeypatch.setattr(_files.os, "replace", full_outside_temp)
    with pytest.raises(NadarayaError, match="saved in"):
        write_or_rescue(output(tmp_path / "m.bin"), lambda out: out.write_bytes(b"w"))
    assert [p.read_bytes() for p in temp.iterdir()] == [b"w"]
    assert list(work.iterdir()) == []


def test_rescue_not_needed(tmp_path: Path) -> None:
    target = output(tmp_path / "m.bin")
    assert write_or_rescue(target, lambda out: out.write_bytes(b"w")) == tmp_path / "m.bin"


def test_check_folder(tmp_path: Path) -> None:
    assert check_folder(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    (tmp_path / "file").write_text("")
    with pytest.raises(NadarayaError, match="is a file, not a folder"):
        check_folder(tmp_path / "file" / "sub", option="--figures")


def test_parents_makes_the_missing_folder_only_when_writing(tmp_path: Path) -> None:
    target = output(tmp_path / "a" / "b" / "out.csv", parents=True)
    assert not (tmp_path / "a").exists(), "checking makes nothing"
    target.write_text("x\n")
    assert (tmp_path / "a" / "b" / "out.csv").read_text() == "x\n"
    (tmp_path / "a" / "b" / "out.csv").rename(tmp_path / "a" / "c")
    with pytest.raises(NadarayaError, match="goes through a file as if it were a folder"):
        output(tmp_path / "a" / "c" / "d" / "out.csv", parents=True)
