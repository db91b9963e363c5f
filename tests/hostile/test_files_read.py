"""Files the commands read, under hostile content and hostile kinds of file.

``fit`` reads CSV (or TSV) tables, ``denoise`` images and ``lm sample``
checkpoints. Whatever the file holds, or whatever it is (a FIFO, a link, a
folder, a device), the command exits 0; or 1 with one line naming the file
and the fix; never a traceback, never a changed input (the guard of
``tests/cli/_inputs.py`` hashes the inputs around every run). A file that is
read correctly gives what the plain file gives: the same fit, or an image of
the same shape, dtype and alpha channel.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import io
import json
import os
import stat
import struct
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ..cli._inputs import guard_inputs
from ._inputs import CliRun, check_cli_contract, run_cli, temporaries


@pytest.fixture(autouse=True)
def _inputs_unchanged(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COLUMNS", "100")  # argparse asks the terminal's width for every option
    yield from guard_inputs(monkeypatch)


@contextlib.contextmanager
def folder() -> Iterator[Path]:
    """A fresh working directory."""
    with tempfile.TemporaryDirectory() as name, contextlib.chdir(name):
        yield Path(name)


# -- the three readers ----------------------------------------------------------------------
def fit_argv(path: str) -> list[str]:
    return ["fit", path, "--x", "x", "--y", "y", "--bandwidth", "2"]


def denoise_argv(path: str) -> list[str]:
    return ["denoise", path, "out.tif", "--method", "bilateral"]


def sample_argv(path: str) -> list[str]:
    return ["lm", "sample", path, "--length", "2"]


ARGV: dict[str, Callable[[str], list[str]]] = {"fit": fit_argv, "denoise": denoise_argv,
                                               "lm sample": sample_argv}
#: How each command's messages name its input.
ROLE = {"fit": "DATA.csv", "denoise": "IN", "lm sample": "CHECKPOINT"}


def rows(n: int = 25, seed: int = 0) -> list[tuple[float, float]]:
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, 10, n))
    return [(float(a), float(b)) for a, b in zip(x, np.sin(x) + rng.normal(0, 0.2, n),
                                                   strict=True)]


def csv_text(sep: str = ",", newline: str = "\n", header: str = "x{s}y") -> str:
    lines = [header.format(s=sep)] + [f"{a!r}{sep}{b!r}" for a, b in rows()]
    return newline.join(lines) + newline


def results(out: bytes) -> list[str]:
    """What ``fit`` found: its printed lines without the file's name and encoding."""
    lines = out.decode().splitlines()
    return [line for line in lines[1:] if not line.startswith("read ")]


@pytest.fixture(scope="module")
def plain_fit() -> list[str]:
    """The fit of the plain UTF-8 CSV file: the oracle for every other encoding of it."""
    with folder() as where:
        (where / "plain.csv").write_text(csv_text())
        result = run_cli(fit_argv("plain.csv"))
    assert result.status == 0, result.err
    return results(result.out)


# -- tables ---------------------------------------------------------------------------------
#: Encodings and layouts of the same table, each read to the same fit.
READABLE_TABLES: dict[str, Callable[[], bytes]] = {
    "utf-8 BOM": lambda: codecs.BOM_UTF8 + csv_text().encode(),
    "utf-16": lambda: csv_text().encode("utf-16"),
    "utf-16-le without BOM": lambda: csv_text().encode("utf-16-le"),
    "utf-16-be without BOM": lambda: csv_text().encode("utf-16-be"),
    "utf-32": lambda: csv_text().encode("utf-32"),
    "CRLF": lambda: csv_text(newline="\r\n").encode(),
    "CR": lambda: csv_text(newline="\r").encode(),
    "latin-1 header": lambda: csv_text(header="x{s}y{s}caf\xe9").encode("latin-1"),
    "cp1252 header": lambda: csv_text(header="x{s}y{s}\u20ac \u2019").encode("cp1252"),
    "TSV": lambda: csv_text(sep="\t").encode(),
    "semicolons": lambda: csv_text(sep=";").encode(),
    "spaces around cells": lambda: csv_text(sep=" , ").encode(),
    "comments and blank lines": lambda: ("# measured today\n\n" + csv_text() + "\n# end\n"
                                         ).encode(),
    "no final newline": lambda: csv_text().rstrip("\n").encode(),
}


@pytest.mark.parametrize("name", sorted(READABLE_TABLES))
def test_a_table_in_any_usual_encoding_gives_the_same_fit(name: str,
                                                          plain_fit: list[str]) -> None:
    with folder() as where:
        (where / "data.csv").write_bytes(READABLE_TABLES[name]())
        result = run_cli(fit_argv("data.csv"))
    check_cli_contract(result)
    assert result.status == 0, result.err
    assert results(result.out) == plain_fit


def _huge_line() -> bytes:
    return b"x,y\n" + b"1" * 4_000_000  # several MB, no newline


#: Tables that cannot be fitted: each refused with one line naming the file.
BAD_TABLES: dict[str, Callable[[], bytes]] = {
    "empty": lambda: b"",
    "only blank lines": lambda: b"\n\n \n",
    "only comments": lambda: b"# nothing\n# here\n",
    "header only": lambda: b"x,y\n",
    "one huge line": lambda: b"x" * 4_000_000,
    "a huge cell": _huge_line,
    "binary garbage": lambda: bytes(np.random.default_rng(0).integers(0, 256, 5000,
                                                                       dtype=np.uint8)),
    "zero bytes in UTF-8 text": lambda: csv_text().replace("\n2", "\n\x002", 1).encode(),
    "ragged rows": lambda: (csv_text() + "1.5\n2.5,3,4,5\n").encode(),
    "non-numeric cells": lambda: (csv_text() + "abc,1\n").encode(),
    "NaN cell": lambda: (csv_text() + "1,nan\n").encode(),
    "inf cell": lambda: (csv_text() + "inf,1\n").encode(),
    "-inf cell": lambda: (csv_text() + "1,-inf\n").encode(),
    "duplicated x column": lambda: csv_text(header="x{s}x").replace("x,x", "x,x,y").encode(),
    "duplicated y column": lambda: b"x,y,y\n1,2,3\n2,3,4\n",
    "missing column": lambda: csv_text(header="a{s}b").encode(),
    "an unclosed quote": lambda: ('x,y\n"1,2\n' + csv_text().split("\n", 1)[1]).encode(),
}


@pytest.mark.parametrize("name", sorted(BAD_TABLES))
def test_a_table_that_cannot_be_fitted_is_refused_with_one_line(name: str) -> None:
    with folder() as where:
        (where / "data.csv").write_bytes(BAD_TABLES[name]())
        result = run_cli(fit_argv("data.csv"))
        check_cli_contract(result, names=("data.csv",))
        assert result.status == 1
        assert len(result.err) < 1000, "a message quotes a few cells, not the file"
        assert temporaries(where) == []


def test_a_duplicated_column_is_refused_not_read_from_its_first_copy() -> None:
    with folder() as where:
        text = "x,y,x\n" + "".join(f"{a!r},{b!r},{-a!r}\n" for a, b in rows())
        (where / "data.csv").write_text(text)
        result = run_cli(fit_argv("data.csv"))
    check_cli_contract(result, names=("data.csv",))
    assert result.status == 1 and "'x' appears 2 times" in result.err


def test_values_at_the_edge_of_float64_are_fitted_or_refused() -> None:
    with folder() as where:
        (where / "data.csv").write_text(csv_text() + "1e308,1e308\n-1e308,-1e308\n")
        result = run_cli(["fit", "data.csv", "--x", "x", "--y", "y"])
    check_cli_contract(result)


@pytest.mark.parametrize("encoding", ["rot13", "base64", "zlib", "hex", "uu", "punycode",
                                      "undefined", "\x00", "", "no-such-encoding"])
def test_an_encoding_that_does_not_decode_text_is_refused_with_one_line(encoding: str) -> None:
    with folder() as where:
        (where / "data.csv").write_text(csv_text())
        result = run_cli([*fit_argv("data.csv"), "--encoding", encoding])
    check_cli_contract(result, names=("--encoding",))
    assert result.status == 1


CELLS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64).map(repr),
    st.sampled_from(["", " ", "NA", "n/a", "nan", "-", ".", "1,5", "1e", "0x1", "١",
                     "\ufeff1", "1\x00", "'", '"', "\u202e2", "1" * 400]),
    st.text(max_size=8),
)


@settings(max_examples=max(10, settings.default.max_examples // 3), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=st.lists(st.tuples(CELLS, CELLS), min_size=1, max_size=4),
       encoding=st.sampled_from(["utf-8", "utf-16", "latin-1", "cp1252"]),
       newline=st.sampled_from(["\n", "\r\n", "\r"]))
def test_any_cells_in_any_encoding_keep_the_contract(cells, encoding: str, newline: str) -> None:
    lines = ["x,y"] + [f"{a!r},{b!r}" for a, b in rows(10)]
    lines += [",".join(row) for row in cells]
    text = newline.join(lines) + newline
    try:
        data = text.encode(encoding)
    except UnicodeEncodeError:
        data = text.encode("utf-8", errors="surrogatepass")
    with folder() as where:
        (where / "data.csv").write_bytes(data)
        result = run_cli(fit_argv("data.csv"))
        check_cli_contract(result)
        assert temporaries(where) == []


# -- images ---------------------------------------------------------------------------------
def png(arr: np.ndarray) -> bytes:
    """PNG bytes of ``arr`` (16-bit colour through OpenCV, everything else through Pillow)."""
    if arr.dtype == np.uint16 and arr.ndim == 3:
        import cv2

        code = cv2.COLOR_RGBA2BGRA if arr.shape[2] == 4 else cv2.COLOR_RGB2BGR
        return cv2.imencode(".png", cv2.cvtColor(arr, code))[1].tobytes()
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


def tiff(arr: np.ndarray, **kwargs: Any) -> bytes:
    import tifffile

    buf = io.BytesIO()
    tifffile.imwrite(buf, arr, **kwargs)
    return buf.getvalue()


def noisy(shape: tuple[int, ...], dtype: Any, top: float) -> np.ndarray:
    rng = np.random.default_rng(1)
    ramp = np.linspace(0.2, 0.8, shape[1])[None, :] * np.ones(shape[:2])
    base = ramp if len(shape) == 2 else ramp[:, :, None] * np.ones(shape)
    values = np.clip(base + rng.normal(0, 0.05, shape), 0, 1) * top
    return values.astype(dtype)


def with_alpha(arr: np.ndarray) -> np.ndarray:
    alpha = (np.arange(arr.shape[0] * arr.shape[1]) % 256).reshape(arr.shape[:2])
    colour = arr if arr.ndim == 3 else arr[:, :, None]
    return np.concatenate([colour, alpha[:, :, None].astype(arr.dtype)], axis=2)


#: Images ``denoise`` reads and writes back in their own dtype, shape and alpha.
READABLE_IMAGES: dict[str, Callable[[], bytes]] = {
    "8-bit gray PNG": lambda: png(noisy((24, 20), np.uint8, 255)),
    "8-bit RGB PNG": lambda: png(noisy((24, 20, 3), np.uint8, 255)),
    "8-bit RGBA PNG": lambda: png(with_alpha(noisy((24, 20, 3), np.uint8, 255))),
    "8-bit gray and alpha PNG": lambda: png(with_alpha(noisy((24, 20), np.uint8, 255))),
    "16-bit gray PNG": lambda: png(noisy((24, 20), np.uint16, 65535)),
    "16-bit RGB PNG": lambda: png(noisy((24, 20, 3), np.uint16, 65535)),
    "16-bit RGBA PNG": lambda: png(with_alpha(noisy((24, 20, 3), np.uint16, 65535))),
    "16-bit TIFF": lambda: tiff(noisy((24, 20), np.uint16, 65535)),
    "float32 TIFF": lambda: tiff(noisy((24, 20), np.float32, 1.0)),
    "float64 TIFF": lambda: tiff(noisy((24, 20), np.float64, 1.0)),
    "float32 RGBA TIFF": lambda: tiff(with_alpha(noisy((24, 20, 3), np.float32, 1.0)),
                                      photometric="rgb", extrasamples=("unassalpha",)),
    "float16 TIFF": lambda: tiff(noisy((24, 20), np.float16, 1.0)),
    "int8 TIFF": lambda: tiff(noisy((24, 20), np.int8, 100)),
    "constant float TIFF": lambda: tiff(np.full((24, 20), 0.5, np.float32)),
    "tiny float values": lambda: tiff(noisy((24, 20), np.float64, 1e-200)),
    "2 x 2": lambda: png(noisy((2, 2), np.uint8, 255)),
}


@pytest.mark.parametrize("name", sorted(READABLE_IMAGES))
def test_an_image_comes_back_in_its_own_dtype_shape_and_alpha(name: str) -> None:
    from nadaraya.image._io import read_image

    with folder() as where:
        (where / "in.img").write_bytes(READABLE_IMAGES[name]())
        source = read_image(where / "in.img")
        result = run_cli(denoise_argv("in.img"))
        check_cli_contract(result, names=("IN", "in.img"))
        if result.status == 1:  # only a noise level out of the filters' range may refuse
            assert "rescale the image" in result.err, result.err
            return
        assert result.status == 0, result.err
        out = read_image(where / "out.tif")
    assert out.shape == source.shape and out.dtype == source.dtype
    if source.ndim == 3 and source.shape[2] in (2, 4):
        np.testing.assert_array_equal(out[:, :, -1], source[:, :, -1])


def _truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


#: Files ``denoise`` cannot read as one image of 1 to 4 channels.
BAD_IMAGES: dict[str, Callable[[], bytes]] = {
    "zero bytes": lambda: b"",
    "garbage": lambda: bytes(range(256)) * 8,
    "a CSV file": lambda: csv_text().encode(),
    "truncated PNG": lambda: _truncated(png(noisy((64, 64), np.uint8, 255))),
    "truncated 16-bit colour PNG": lambda: _truncated(png(noisy((64, 64, 3), np.uint16,
                                                                65535))),
    "truncated TIFF": lambda: _truncated(tiff(noisy((64, 64), np.uint16, 65535))),
    "PNG signature only": lambda: b"\x89PNG\r\n\x1a\n",
    "TIFF header only": lambda: b"II*\x00\x08\x00\x00\x00",
    "0 rows": lambda: tiff(np.zeros((0, 16), np.uint8)),
    "1 x 1": lambda: png(np.zeros((1, 1), np.uint8)),
    "5 channels": lambda: tiff(np.zeros((8, 8, 5), np.uint8), planarconfig="contig"),
    "NaN pixels": lambda: tiff(np.full((8, 8), np.nan, np.float32)),
    "infinite pixels": lambda: tiff(np.full((8, 8), np.inf, np.float64)),
    "complex pixels": lambda: tiff(np.zeros((8, 8), np.complex64)),
}


@pytest.mark.parametrize("name", sorted(BAD_IMAGES))
def test_an_image_that_cannot_be_read_is_refused_with_one_line(name: str) -> None:
    with pytest.warns() if name == "0 rows" else contextlib.nullcontext(), folder() as where:
        (where / "in.img").write_bytes(BAD_IMAGES[name]())
        result = run_cli(denoise_argv("in.img"))
        check_cli_contract(result, names=("IN", "in.img"))
        assert result.status == 1
        assert not (where / "out.tif").exists() and temporaries(where) == []


# -- checkpoints ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    import torch

    from nadaraya.nn.lm import TransformerLM, save_checkpoint

    torch.manual_seed(0)
    alphabet = "\n abcdefghijklmnopqrstuvwxyz"
    model = TransformerLM(vocab_size=len(alphabet), alphabet=alphabet, d_model=8, n_heads=2,
                          n_layers=1, context=8)
    path = tmp_path_factory.mktemp("lm") / "model.safetensors"
    save_checkpoint(model, path)
    return path.read_bytes()


def safetensors(header: Any, data: bytes = b"") -> bytes:
    """A safetensors file with this JSON header (no check that it is consistent)."""
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def with_config(good: bytes, **changes: Any) -> bytes:
    """``good`` with fields of its config changed (the tensors kept)."""
    size = struct.unpack("<Q", good[:8])[0]
    header = json.loads(good[8:8 + size])
    config = json.loads(header["__metadata__"]["config"])
    config.update(changes)
    header["__metadata__"]["config"] = json.dumps(config)
    return safetensors(header, good[8 + size:])


BAD_CHECKPOINTS: dict[str, Callable[[bytes], bytes]] = {
    "zero bytes": lambda good: b"",
    "text": lambda good: b"hello, world\n",
    "garbage": lambda good: bytes(range(256)) * 4,
    "truncated": lambda good: good[: len(good) // 2],
    "a header length beyond the file": lambda good: struct.pack("<Q", 2**62) + b"{}",
    "a header that is not JSON": lambda good: struct.pack("<Q", 5) + b"{{{{{",
    "no config": lambda good: safetensors({"__metadata__": {"format": "pt"}}),
    "a config that is not JSON": lambda good: safetensors({"__metadata__": {"config": "{"}}),
    "a config that is a list": lambda good: safetensors({"__metadata__": {"config": "[1]"}}),
    "a config missing vocab_size": lambda good: safetensors(
        {"__metadata__": {"config": "{}"}}),
    "an unknown field": lambda good: with_config(good, colour="blue"),
    "a negative vocabulary": lambda good: with_config(good, vocab_size=-5),
    "a text d_model": lambda good: with_config(good, d_model="eight"),
    "a huge d_model": lambda good: with_config(good, d_model=2**40),
    "a huge context": lambda good: with_config(good, context=2**40),
    "huge n_layers": lambda good: with_config(good, n_layers=2**40),
    "zero heads": lambda good: with_config(good, n_heads=0),
    "heads not dividing d_model": lambda good: with_config(good, n_heads=3),
    "an unknown kernel": lambda good: with_config(good, kernel="nope"),
    "an unknown positional": lambda good: with_config(good, positional="nope"),
    "a short alphabet": lambda good: with_config(good, alphabet="ab"),
    "a vocabulary its tensors do not have": lambda good: with_config(good, vocab_size=5,
                                                                     alphabet="abcde"),
    "no tensors": lambda good: safetensors({"__metadata__": json.loads(
        good[8:8 + struct.unpack("<Q", good[:8])[0]])["__metadata__"]}),
}


@pytest.mark.parametrize("name", sorted(BAD_CHECKPOINTS))
def test_a_file_that_is_not_a_checkpoint_is_refused_with_one_line(checkpoint: bytes,
                                                                  name: str) -> None:
    with folder() as where:
        (where / "model.safetensors").write_bytes(BAD_CHECKPOINTS[name](checkpoint))
        result = _run_within(60, "lm sample", "model.safetensors")  # a huge config could hang
    check_cli_contract(result, names=("CHECKPOINT", "model.safetensors"))
    assert result.status == 1


def test_a_good_checkpoint_is_sampled(checkpoint: bytes) -> None:
    with folder() as where:
        (where / "model.safetensors").write_bytes(checkpoint)
        result = run_cli(sample_argv("model.safetensors"))
    check_cli_contract(result)
    assert result.status == 0 and len(result.out.decode()) == 3 + 1, result.err


@settings(max_examples=max(10, settings.default.max_examples // 3), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_damage_to_a_checkpoint_keeps_the_contract(checkpoint: bytes, data) -> None:
    damaged = bytearray(checkpoint)
    for _ in range(data.draw(st.integers(1, 8))):
        where = data.draw(st.integers(0, len(damaged) - 1))
        damaged[where] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(damaged)))
    with folder() as where:
        (where / "model.safetensors").write_bytes(bytes(damaged[:cut]))
        result = run_cli(sample_argv("model.safetensors"))
    check_cli_contract(result)


# -- kinds of file, for all three -----------------------------------------------------------
@pytest.fixture(scope="module")
def good(checkpoint: bytes) -> dict[str, bytes]:
    """A valid input of each command."""
    return {"fit": csv_text().encode(), "denoise": READABLE_IMAGES["8-bit gray PNG"](),
            "lm sample": checkpoint}


def _feed(fifo: Path, data: bytes) -> threading.Thread:
    """A thread that writes ``data`` into ``fifo`` once a reader opens it."""
    def write() -> None:
        with contextlib.suppress(BrokenPipeError), open(fifo, "wb") as f:
            f.write(data)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def _release(fifo: Path, thread: threading.Thread) -> None:
    """Let a writer still waiting for a reader of ``fifo`` go."""
    if thread.is_alive():
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        thread.join(timeout=10)
        os.close(fd)
    thread.join(timeout=10)
    assert not thread.is_alive()


def _run_on(command: str, path: str) -> CliRun:
    return run_cli(ARGV[command](path))


def _run_within(seconds: float, command: str, path: str) -> CliRun:
    """``_run_on`` in a thread, failing the test when it still runs after ``seconds``.

    A command still waiting for a writer of the FIFO ``path`` is then given an
    end of file, so that it finishes and restores the standard streams (a
    command busy otherwise is left to run out in its daemon thread).
    """
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(_run_on(command, path))
        except BaseException as exc:  # re-raised below, in the test's thread
            box.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    blocked = thread.is_alive()
    if blocked:
        if stat.S_ISFIFO(os.stat(path).st_mode):
            with contextlib.suppress(OSError):
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            thread.join(seconds)
    assert not blocked, f"nadaraya {command} {path} still ran after {seconds} s: it blocked"
    if isinstance(box[0], BaseException):
        raise box[0]
    return box[0]


@pytest.mark.parametrize("command", sorted(ARGV))
def test_an_input_fed_through_a_fifo(good: dict[str, bytes], command: str) -> None:
    with folder() as where:
        fifo = where / "input.pipe"
        os.mkfifo(fifo)
        writer = _feed(fifo, good[command])
        result = _run_within(60, command, fifo.name)
        _release(fifo, writer)
    check_cli_contract(result, names=(ROLE[command], fifo.name))
    # a checkpoint is memory-mapped: it must be a regular file; the others stream
    assert result.status == (1 if command == "lm sample" else 0), result.err


@pytest.mark.parametrize("command", sorted(ARGV))
@pytest.mark.parametrize("kind", ["symlink", "hard link"])
def test_an_input_through_a_link_is_read(good: dict[str, bytes], command: str,
                                         kind: str) -> None:
    with folder() as where:
        (where / "real.input").write_bytes(good[command])
        link = where / "link.input"
        (link.symlink_to if kind == "symlink" else link.hardlink_to)(where / "real.input")
        result = _run_on(command, link.name)
        assert (where / "real.input").read_bytes() == good[command]
    check_cli_contract(result)
    assert result.status == 0, result.err


@pytest.mark.parametrize("command", sorted(ARGV))
@pytest.mark.parametrize("kind", ["missing", "symlink loop", "dangling symlink", "folder",
                                  "/dev/null", "/dev/zero", "a zero byte in the name",
                                  "a name too long", "through a file"])
def test_an_input_that_is_no_file_is_refused_with_one_line(command: str, kind: str) -> None:
    with folder() as where:
        path = {"missing": "missing.input", "symlink loop": "loop", "dangling symlink":
                "dangling", "folder": "sub", "/dev/null": "/dev/null", "/dev/zero": "/dev/zero",
                "a zero byte in the name": "in\x00put", "a name too long": "x" * 300,
                "through a file": "plain.txt/input"}[kind]
        os.symlink("loop", where / "loop")
        os.symlink("nowhere/input", where / "dangling")
        (where / "sub").mkdir()
        (where / "plain.txt").write_text("text")
        result = _run_on(command, path)
    check_cli_contract(result, names=(ROLE[command],))
    assert result.status == 1


@pytest.mark.parametrize("command", sorted(ARGV))
def test_an_unreadable_input_is_refused_with_one_line(good: dict[str, bytes],
                                                      command: str) -> None:
    with folder() as where:
        path = where / "secret.input"
        path.write_bytes(good[command])
        path.chmod(0)
        try:
            if os.access(path, os.R_OK):
                pytest.skip("this user (root) reads a file without read permission")
            result = _run_on(command, path.name)
        finally:
            path.chmod(0o600)
    check_cli_contract(result, names=(ROLE[command], path.name))
    assert result.status == 1


def test_reading_stops_at_the_first_block_of_an_endless_binary_device() -> None:
    from nadaraya.cli._table import read_columns

    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero on this system")
    with pytest.raises(ValueError, match="binary"):
        read_columns(Path("/dev/zero"), ["x"])


def test_an_error_while_reading_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real = builtins.open

    def failing(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if str(file).endswith("data.csv") and "r" in mode:
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(file))
        return real(file, mode, *args, **kwargs)

    with folder() as where:
        (where / "data.csv").write_text(csv_text())
        monkeypatch.setattr(builtins, "open", failing)
        result = run_cli(fit_argv("data.csv"))
        monkeypatch.undo()
    check_cli_contract(result, names=("data.csv",))
    assert result.status == 1 and os.strerror(errno.EIO) in result.err
