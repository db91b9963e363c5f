"""Image files: dtype, range, alpha, pages and metadata round trips, read back by the peers."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest

from nadaraya import NadarayaError
from nadaraya.cli import main
from nadaraya.image import denoise
from nadaraya.image._dtype import convert_dtype
from nadaraya.image._pages import read_image_file, write_image_file

from ..cli._inputs import guard_inputs

tifffile = pytest.importorskip("tifffile")
iio = pytest.importorskip("imageio.v3")


@pytest.fixture(autouse=True)
def _inputs_unchanged(monkeypatch: pytest.MonkeyPatch):
    yield from guard_inputs(monkeypatch)


_TOPS = {"uint8": 255, "uint16": 65535, "float32": 3.0e4, "float64": -7.5e-3}


def _image(rng: np.random.Generator, dtype: str, channels: int,
           shape: tuple[int, int] = (20, 24)) -> np.ndarray:
    full = shape if channels == 1 else (*shape, channels)
    x = rng.random(full) * _TOPS[dtype]
    if dtype in ("float32", "float64"):
        x = x - 0.5 * _TOPS[dtype]  # floats in any range, negative values included
    return x.astype(dtype)


_LOSSLESS = [(s, d, c) for s, d in ((".tif", "uint8"), (".tif", "uint16"), (".tif", "float32"),
                                    (".tif", "float64"), (".png", "uint8"), (".png", "uint16"))
             for c in (1, 2, 3, 4) if not (s == ".png" and d == "uint16" and c == 2)]


@pytest.mark.parametrize(("suffix", "dtype", "channels"), _LOSSLESS)
def test_lossless_round_trip_read_by_the_peers(tmp_path: Path, rng: np.random.Generator,
                                               suffix: str, dtype: str, channels: int) -> None:
    if suffix == ".png" and dtype == "uint16" and channels > 1:
        pytest.importorskip("cv2")
    image = _image(rng, dtype, channels)
    path = tmp_path / f"x{suffix}"
    write_image_file(path, image)
    back = read_image_file(path).pages[0]
    assert back.dtype == image.dtype and back.shape == image.shape
    np.testing.assert_array_equal(back, image)
    theirs = tifffile.imread(path) if suffix == ".tif" else None
    if suffix == ".png" and (dtype == "uint8" or channels == 1):
        theirs = iio.imread(path)
    if theirs is not None:
        np.testing.assert_array_equal(theirs, image)


@pytest.mark.parametrize("channels", [1, 3])
def test_jpeg_round_trip_keeps_dtype_and_range(tmp_path: Path, channels: int) -> None:
    r, c = np.indices((32, 40))
    image = (120 + 60 * np.sin(r / 5.0) * np.cos(c / 7.0)).astype(np.uint8)
    if channels == 3:
        image = np.stack([image, image // 2, 255 - image], axis=2)
    write_image_file(tmp_path / "x.jpg", image)
    back = read_image_file(tmp_path / "x.jpg").pages[0]
    assert back.dtype == np.uint8 and back.shape == image.shape
    assert np.abs(back.astype(int) - image).mean() < 2.0
    np.testing.assert_array_equal(back, iio.imread(tmp_path / "x.jpg"))


@pytest.mark.parametrize(("dtype", "channels"), [("uint8", 4), ("float32", 2), ("uint16", 2)])
def test_jpeg_refuses_what_it_cannot_hold(tmp_path: Path, rng: np.random.Generator, dtype: str,
                                          channels: int) -> None:
    with pytest.raises(NadarayaError, match=r"\.tif"):
        write_image_file(tmp_path / "x.jpg", _image(rng, dtype, channels))
    assert not (tmp_path / "x.jpg").exists()


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "float32", "float64"])
def test_multipage_tiled_tiff_with_its_metadata(tmp_path: Path, rng: np.random.Generator,
                                                dtype: str) -> None:
    pages = [_image(rng, dtype, 3, (40, 48)) for _ in range(3)]
    source = tmp_path / "in.tif"
    tifffile.imwrite(source, np.stack(pages), photometric="rgb", tile=(16, 16),
                     compression="zlib", resolution=(300, 300), resolutionunit=2,
                     description="scan 7", metadata=None,
                     extratags=[(274, "H", 1, 6, True), (315, "s", 0, "someone", True)])
    file = read_image_file(source)
    assert len(file.pages) == 3
    np.testing.assert_array_equal(file.stack, np.stack(pages))
    write_image_file(tmp_path / "out.tif", file.pages, file.meta)
    with tifffile.TiffFile(tmp_path / "out.tif") as tif:
        assert len(tif.pages) == 3
        page = tif.pages[0]
        assert page.is_tiled and (page.tilelength, page.tilewidth) == (16, 16)
        assert page.tags[274].value == 6 and page.description == "scan 7"
        assert page.tags[282].value == (300, 1) and page.tags[315].value == "someone"
        np.testing.assert_array_equal(tif.asarray(), np.stack(pages))


def test_exif_orientation_and_icc_profile_are_carried(tmp_path: Path) -> None:
    from PIL import Image

    r, _ = np.indices((24, 32))
    image = (r * 10).astype(np.uint8)
    exif = Image.Exif()
    exif[274] = 8  # rotate 90 clockwise to display
    icc = b"\0" * 8 + b"not a real profile, carried as bytes"
    for suffix in (".jpg", ".png"):
        source = tmp_path / f"in{suffix}"
        Image.fromarray(image).save(source, exif=exif.tobytes(), icc_profile=icc, dpi=(72, 72))
        file = read_image_file(source)
        write_image_file(tmp_path / f"out{suffix}", file.pages[0], file.meta)
        with Image.open(tmp_path / f"out{suffix}") as im:
            assert im.getexif()[274] == 8 and im.info["icc_profile"] == icc
            assert round(im.info["dpi"][0]) == 72
            assert im.size == (32, 24)  # pixels as stored: the orientation is carried


def test_png_text_is_carried(tmp_path: Path) -> None:
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    info.add_text("Source", "microscope 3")
    Image.fromarray(np.zeros((4, 4), np.uint8)).save(tmp_path / "in.png", pnginfo=info)
    file = read_image_file(tmp_path / "in.png")
    write_image_file(tmp_path / "out.png", file.pages[0], file.meta)
    with Image.open(tmp_path / "out.png") as im:
        assert im.text["Source"] == "microscope 3"


def test_several_pages_need_a_tiff(tmp_path: Path) -> None:
    with pytest.raises(NadarayaError, match=r"2 pages need a \.tif"):
        write_image_file(tmp_path / "x.png", [np.zeros((4, 4), np.uint8)] * 2)
    with pytest.raises(NadarayaError, match="empty"):
        write_image_file(tmp_path / "x.tif", [])
    with pytest.raises(NadarayaError, match="1 to 4"):
        write_image_file(tmp_path / "x.tif", np.zeros((4, 4, 5), np.uint8))


def test_pages_of_different_shapes_are_not_a_stack(tmp_path: Path) -> None:
    with tifffile.TiffWriter(tmp_path / "x.tif") as tif:
        tif.write(np.zeros((4, 4), np.uint8))
        tif.write(np.zeros((5, 4), np.uint8))
    with pytest.raises(NadarayaError, match="page 1 has shape"):
        read_image_file(tmp_path / "x.tif").stack  # noqa: B018


# -- --out-dtype ------------------------------------------------------------------------
def test_convert_dtype_follows_scikit_image(rng: np.random.Generator) -> None:
    util = pytest.importorskip("skimage.util")
    u8 = rng.integers(0, 256, 50, dtype=np.uint8)
    u16 = rng.integers(0, 65536, 50, dtype=np.uint16)
    f = rng.random(50)
    np.testing.assert_array_equal(convert_dtype(u8, "uint16"), util.img_as_uint(u8))
    # division by the full scale here, multiplication by its inverse there: 1 ulp apart
    np.testing.assert_allclose(convert_dtype(u8, "float64"), util.img_as_float64(u8),
                               rtol=3e-16, atol=0)
    np.testing.assert_allclose(convert_dtype(u16, "float32"), util.img_as_float32(u16),
                               rtol=1.2e-7, atol=0)
    np.testing.assert_array_equal(convert_dtype(f, "uint8"), util.img_as_ubyte(f))
    np.testing.assert_array_equal(convert_dtype(f, "uint16"), util.img_as_uint(f))
    np.testing.assert_array_equal(convert_dtype(u16, "uint8"),
                                  np.rint(u16 / 257.0).astype(np.uint8))
    np.testing.assert_array_equal(convert_dtype(255 * f, "uint8", 255.0), util.img_as_ubyte(f))


@pytest.mark.parametrize("bad", [np.array([0.5, 1.5]), np.array([-0.1, 0.5]),
                                 np.array([np.nan, 0.5])])
def test_convert_dtype_refuses_values_outside_the_range(bad: np.ndarray) -> None:
    with pytest.raises(NadarayaError, match=r"outside \[0, 1\].*--data-range"):
        convert_dtype(bad, "uint8")
    with pytest.raises(NadarayaError, match="must be one of"):
        convert_dtype(bad, "int8")


def test_cli_out_dtype(tmp_path: Path, rng: np.random.Generator,
                       capsys: pytest.CaptureFixture) -> None:
    clean = np.where(np.indices((40, 40))[0] < 20, 20000, 45000)
    noisy = np.clip(clean + 2000 * rng.standard_normal(clean.shape), 0, 65535).astype(np.uint16)
    write_image_file(tmp_path / "in.tif", noisy)
    assert main(["denoise", str(tmp_path / "in.tif"), str(tmp_path / "out.png"), "--method",
                 "kr", "--sigma", "2000", "--out-dtype", "uint8"]) == 0, capsys.readouterr().err
    assert "as uint8" in capsys.readouterr().out
    expected = convert_dtype(denoise(noisy, "kr", 2000.0), "uint8")
    np.testing.assert_array_equal(iio.imread(tmp_path / "out.png"), expected)
    status = main(["denoise", str(tmp_path / "in.tif"), str(tmp_path / "o.tif"), "--sigma",
                   "2000", "--method", "kr", "--out-dtype", "float32"])
    assert status == 0
    np.testing.assert_array_equal(tifffile.imread(tmp_path / "o.tif"),
                                  convert_dtype(denoise(noisy, "kr", 2000.0), "float32"))
    with pytest.raises(SystemExit):
        main(["denoise", str(tmp_path / "in.tif"), str(tmp_path / "o.png"), "--out-dtype",
              "int8"])


def test_cli_float_to_uint8_outside_the_range_is_refused(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture) -> None:
    write_image_file(tmp_path / "in.tif", np.full((16, 16), 40.0, np.float32))
    assert main(["denoise", str(tmp_path / "in.tif"), str(tmp_path / "out.png"), "--sigma",
                 "1", "--out-dtype", "uint8"]) == 1
    assert "--out-dtype" in capsys.readouterr().err
    assert not (tmp_path / "out.png").exists()


@pytest.mark.parametrize("dtype", ["float32", "uint16"])
def test_cli_rgba_tiff_keeps_dtype_and_alpha(tmp_path: Path, rng: np.random.Generator,
                                             dtype: str, capsys: pytest.CaptureFixture) -> None:
    image = _image(rng, dtype, 4, (32, 32))
    write_image_file(tmp_path / "in.tif", image)
    sigma = 0.05 * _TOPS[dtype]
    assert main(["denoise", str(tmp_path / "in.tif"), str(tmp_path / "out.tif"), "--method",
                 "bilateral", "--sigma", str(sigma)]) == 0, capsys.readouterr().err
    out = tifffile.imread(tmp_path / "out.tif")
    assert out.dtype == image.dtype
    np.testing.assert_array_equal(out[..., 3], image[..., 3])
    np.testing.assert_array_equal(out[..., :3], denoise(image[..., :3], "bilateral", sigma))


def test_cli_multipage_tiff_page_by_page(tmp_path: Path, rng: np.random.Generator,
                                         capsys: pytest.CaptureFixture) -> None:
    pages = np.stack([np.clip(100 + 40 * k + 10 * rng.standard_normal((32, 32)), 0, 255)
                      for k in range(3)]).astype(np.uint8)
    tifffile.imwrite(tmp_path / "in.tif", pages, photometric="minisblack", description="stack",
                     metadata=None)
    assert main(["denoise", str(tmp_path / "in.tif"), str(tmp_path / "out.tif"), "--method",
                 "nlm", "--sigma", "10"]) == 0, capsys.readouterr().err
    assert "3 pages of" in capsys.readouterr().out
    with tifffile.TiffFile(tmp_path / "out.tif") as tif:
        assert len(tif.pages) == 3 and tif.pages[0].description == "stack"
        for k, page in enumerate(tif.pages):
            np.testing.assert_array_equal(page.asarray(), denoise(pages[k], "nlm", 10.0))
    assert main(["denoise", str(tmp_path / "in.tif"), str(tmp_path / "o.tif"), "--compare",
                 str(tmp_path / "f.png")]) == 1
    assert "3 pages" in capsys.readouterr().err


def test_reading_from_a_stream_carries_no_metadata(tmp_path: Path) -> None:
    import os

    from PIL import Image

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    buf = io.BytesIO()
    Image.fromarray(np.full((4, 4), 7, np.uint8)).save(buf, format="PNG")
    import threading

    def feed() -> None:
        with open(fifo, "wb") as f:
            f.write(buf.getvalue())

    thread = threading.Thread(target=feed)
    thread.start()
    file = read_image_file(fifo)
    thread.join()
    assert file.meta == {} and file.pages[0].tolist() == [[7] * 4] * 4


# -- per-method options, progress, volumes ----------------------------------------------
def _noisy_file(tmp_path: Path, rng: np.random.Generator) -> tuple[Path, np.ndarray]:
    r, c = np.indices((40, 40))
    clean = np.where((r - 20) ** 2 + (c - 20) ** 2 < 150, 180.0, 60.0)
    noisy = np.clip(np.rint(clean + 15 * rng.standard_normal(clean.shape)), 0, 255)
    write_image_file(tmp_path / "in.png", noisy.astype(np.uint8))
    return tmp_path / "in.png", noisy.astype(np.uint8)


@pytest.mark.parametrize(("method", "options", "params"), [
    ("nlm", ["--h", "9", "--patch-size", "5", "--search-radius", "4", "--patch-kind", "box"],
     {"h": 9.0, "patch_size": 5, "search_radius": 4, "patch_kind": "box"}),
    ("bilateral", ["--sigma-color", "40", "--sigma-spatial", "1.5", "--radius", "3"],
     {"sigma_color": 40.0, "sigma_spatial": 1.5, "radius": 3}),
    ("kr", ["--h", "1.2", "--order", "2", "--radius", "3"], {"h": 1.2, "order": 2, "radius": 3}),
    ("nlbayes", ["--threshold", "soft", "--beta", "1.5", "--k1", "20", "--k2", "10", "--step",
                 "2", "--search-radius", "4"],
     {"threshold": "soft", "beta": 1.5, "k1": 20, "k2": 10, "step": 2, "search_radius": 4}),
    ("nlbayes", ["--flat", "0", "--flat2", "1.5", "--equal-weights", "--search-radius", "4"],
     {"flat": 0.0, "flat2": 1.5, "weighted": False, "search_radius": 4}),
    ("nlbayes", ["--pilot", "transform", "--patch-size2", "3", "5", "--transform-patch-size",
                 "6", "--transform-k", "8", "--transform-lambda", "3", "--search-radius", "4"],
     {"pilot": "transform", "patch_size2": (3, 5), "transform_patch_size": 6,
      "transform_k": 8, "transform_lambda": 3.0, "search_radius": 4}),
    ("nlbayes", ["--pilot", "bayes", "--patch-size2", "3", "--search-radius", "4"],
     {"pilot": "bayes", "patch_size2": 3, "search_radius": 4}),
])
def test_cli_method_parameters(tmp_path: Path, rng: np.random.Generator, method: str,
                               options: list[str], params: dict,
                               capsys: pytest.CaptureFixture) -> None:
    source, noisy = _noisy_file(tmp_path, rng)
    assert main(["denoise", str(source), str(tmp_path / "o.png"), "--method", method,
                 "--sigma", "15", *options]) == 0, capsys.readouterr().err
    np.testing.assert_array_equal(iio.imread(tmp_path / "o.png"),
                                  denoise(noisy, method, 15.0, **params))
    out = capsys.readouterr().out
    for name, value in params.items():
        shown = (f"{value:.4g}" if isinstance(value, float) else
                 " ".join(map(str, value)) if isinstance(value, tuple) else str(value))
        assert re.search(rf"\b{name} {re.escape(shown)}[,;]", out), (name, shown, out)


def test_cli_refuses_another_methods_option(tmp_path: Path, rng: np.random.Generator,
                                            capsys: pytest.CaptureFixture) -> None:
    source, _ = _noisy_file(tmp_path, rng)
    assert main(["denoise", str(source), str(tmp_path / "o.png"), "--method", "bilateral",
                 "--patch-size", "5"]) == 1
    assert "--patch-size is a parameter of --method nlm" in capsys.readouterr().err
    assert not (tmp_path / "o.png").exists()
    assert main(["denoise", str(source), str(tmp_path / "o.png"), "--method", "nlm",
                 "--equal-weights"]) == 1
    assert "--equal-weights is a parameter of --method nlbayes" in capsys.readouterr().err
    assert not (tmp_path / "o.png").exists()
    for method, pilot, allowed in (("skr", "both", "nlm, image"),
                                   ("nlbayes", "nlm", "bayes, transform, both")):
        assert main(["denoise", str(source), str(tmp_path / "o.png"), "--method", method,
                     "--pilot", pilot]) == 1
        assert f"--pilot for --method {method} is one of {allowed}; got {pilot}" in (
            capsys.readouterr().err)
        assert not (tmp_path / "o.png").exists()
    for bad in (["--patch-size", "4"], ["--search-radius", "-1"], ["--order", "3"],
                ["--sigma-color", "0"], ["--threshold", "firm"], ["--beta", "0"],
                ["--flat2", "-1"], ["--flat", "nan"], ["--patch-size2", "4"],
                ["--patch-size2"], ["--transform-k", "0"], ["--transform-lambda", "-2"],
                ["--pilot", "pca"]):
        with pytest.raises(SystemExit):
            main(["denoise", str(source), str(tmp_path / "o.png"), *bad])


def test_cli_prints_the_estimated_sigma_or_nothing_when_quiet(
        tmp_path: Path, rng: np.random.Generator, capsys: pytest.CaptureFixture) -> None:
    from nadaraya.image import estimate_noise

    source, noisy = _noisy_file(tmp_path, rng)
    assert main(["denoise", str(source), str(tmp_path / "o.png"), "--method", "kr"]) == 0
    assert f"sigma {estimate_noise(noisy):.4g} (estimated)" in capsys.readouterr().out
    assert main(["denoise", str(source), str(tmp_path / "q.png"), "--method", "kr",
                 "--quiet"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
    np.testing.assert_array_equal(iio.imread(tmp_path / "q.png"), iio.imread(tmp_path / "o.png"))


@pytest.mark.parametrize("tty", [True, False])
def test_cli_progress_bar_only_on_a_terminal(tmp_path: Path, rng: np.random.Generator,
                                             monkeypatch: pytest.MonkeyPatch, tty: bool,
                                             capsys: pytest.CaptureFixture) -> None:
    pytest.importorskip("tqdm")
    import sys

    from nadaraya.cli import _denoise_options

    source, _ = _noisy_file(tmp_path, rng)
    monkeypatch.setattr(_denoise_options, "PROGRESS_PIXELS", 100)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: tty, raising=False)
    assert main(["denoise", str(source), str(tmp_path / "o.png"), "--method", "nlm",
                 "--sigma", "15"]) == 0
    err = capsys.readouterr().err
    assert ("1.60k/1.60k" in err) == tty


def test_cli_volume(tmp_path: Path, rng: np.random.Generator,
                    capsys: pytest.CaptureFixture) -> None:
    z, r, c = np.indices((5, 24, 24))
    clean = np.where((r - 12) ** 2 + (c - 12) ** 2 + 4 * (z - 2) ** 2 < 60, 180.0, 60.0)
    noisy = np.clip(np.rint(clean + 15 * rng.standard_normal(clean.shape)), 0,
                    255).astype(np.uint8)
    tifffile.imwrite(tmp_path / "in.tif", noisy, photometric="minisblack", metadata=None)
    assert main(["denoise", str(tmp_path / "in.tif"), str(tmp_path / "o.tif"), "--method",
                 "nlm", "--sigma", "15", "--volume"]) == 0, capsys.readouterr().err
    assert "a volume of 5 pages" in capsys.readouterr().out
    np.testing.assert_array_equal(tifffile.imread(tmp_path / "o.tif"),
                                  denoise(noisy, "nlm", 15.0, channel_axis=None))
    assert main(["denoise", str(tmp_path / "in.tif"), str(tmp_path / "k.tif"), "--method",
                 "kr", "--volume"]) == 1
    assert "2-D images only" in capsys.readouterr().err
    _noisy_file(tmp_path, rng)
    assert main(["denoise", str(tmp_path / "in.png"), str(tmp_path / "v.png"),
                 "--volume"]) == 1
    assert "one page" in capsys.readouterr().err
