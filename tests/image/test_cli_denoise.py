"""``nadaraya denoise``: files in and out, never over the input, dtype, range and alpha kept."""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pytest

from nadaraya.cli import COMMANDS, main
from nadaraya.image import denoise, psnr
from nadaraya.image._io import read_image, write_image

from ..cli._inputs import guard_inputs


@pytest.fixture(autouse=True)
def _inputs_unchanged(monkeypatch: pytest.MonkeyPatch):
    yield from guard_inputs(monkeypatch)


def _disk(shape: tuple[int, int] = (48, 48)) -> np.ndarray:
    r, c = np.indices(shape)
    return np.where((r - 24) ** 2 + (c - 20) ** 2 < 200, 190.0, 60.0)


@pytest.fixture
def files(tmp_path: Path, rng: np.random.Generator) -> tuple[Path, Path]:
    clean = _disk().astype(np.uint8)
    noisy = np.clip(np.rint(clean + 20 * rng.standard_normal(clean.shape)), 0, 255)
    write_image(tmp_path / "clean.png", clean)
    write_image(tmp_path / "noisy.png", noisy.astype(np.uint8))
    return tmp_path / "noisy.png", tmp_path / "clean.png"


def test_registered() -> None:
    assert COMMANDS["denoise"] == "denoise"


@pytest.mark.parametrize("method", ["nlm", "bilateral", "skr", "kr"])
def test_denoises(files: tuple[Path, Path], method: str, capsys: pytest.CaptureFixture) -> None:
    noisy, clean = files
    out = noisy.with_name(f"out_{method}.png")
    assert main(["denoise", str(noisy), str(out), "--method", method, "--sigma", "20"]) == 0
    result = read_image(out)
    assert result.shape == (48, 48) and result.dtype == np.uint8
    truth = read_image(clean)
    assert psnr(truth, result) > psnr(truth, read_image(noisy)) + 3
    assert "sigma 20 (given), data range 255 (the dtype's maximum)" in capsys.readouterr().out


def test_estimates_sigma_and_writes_figure(files: tuple[Path, Path],
                                           capsys: pytest.CaptureFixture) -> None:
    noisy, clean = files
    fig = noisy.with_name("fig.png")
    status = main(["denoise", str(noisy), str(noisy.with_name("o.png")), "--compare", str(fig),
                   "--reference", str(clean)])
    assert status == 0
    text = capsys.readouterr().out
    assert "(estimated)" in text and "PSNR: noisy" in text
    assert read_image(fig).ndim == 3


def test_never_writes_over_input(files: tuple[Path, Path], capsys: pytest.CaptureFixture) -> None:
    noisy, clean = files
    before = noisy.read_bytes()
    assert main(["denoise", str(noisy), str(noisy)]) == 1
    assert main(["denoise", str(noisy), str(noisy.with_name("x.png")), "--compare",
                 str(clean), "--reference", str(clean)]) == 1
    assert noisy.read_bytes() == before
    assert "never writes over an input" in capsys.readouterr().err


@pytest.mark.parametrize("link", ["hard", "symbolic"])
def test_never_writes_through_a_link_to_the_input(files: tuple[Path, Path], link: str,
                                                  capsys: pytest.CaptureFixture) -> None:
    noisy, _ = files
    out = noisy.with_name("out.png")
    (os.link if link == "hard" else os.symlink)(noisy, out)
    before = noisy.read_bytes()
    assert main(["denoise", str(noisy), str(out), "--sigma", "20"]) == 1
    err = capsys.readouterr().err
    assert f"OUT {out} is a {link} link to the input {noisy}" in err
    assert noisy.read_bytes() == before


def test_unreadable_and_mismatched_files(files: tuple[Path, Path], tmp_path: Path,
                                         capsys: pytest.CaptureFixture) -> None:
    noisy, _ = files
    assert main(["denoise", str(tmp_path / "nope.png"), str(tmp_path / "o.png")]) == 1
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "junk.png").write_text("junk")
    assert main(["denoise", str(tmp_path / "junk.png"), str(tmp_path / "o.png")]) == 1
    assert "cannot read" in capsys.readouterr().err
    write_image(tmp_path / "small.png", np.zeros((5, 5), np.uint8))
    assert main(["denoise", str(noisy), str(tmp_path / "o.png"), "--reference",
                 str(tmp_path / "small.png")]) == 1
    assert "same image" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["denoise", str(noisy), str(tmp_path / "o.png"), "--sigma", "-3"])


# -- dtype, range and channels ----------------------------------------------------------
def _run_and_compare(tmp_path: Path, image: np.ndarray, name: str, out_name: str,
                     capsys: pytest.CaptureFixture, *extra: str, sigma: float = 0.1,
                     data_range: float | None = None) -> tuple[np.ndarray, str]:
    """Denoise a file by the command and the same array by the library; return the output."""
    source, target = tmp_path / name, tmp_path / out_name
    write_image(source, image)
    assert main(["denoise", str(source), str(target), "--method", "bilateral", "--sigma",
                 str(sigma), *extra]) == 0, capsys.readouterr().err
    result = read_image(target)
    assert result.dtype == image.dtype and result.shape == image.shape
    colour = image[..., :-1] if image.ndim == 3 and image.shape[2] in (2, 4) else image
    expected = denoise(colour, "bilateral", sigma, data_range=data_range)
    got = result[..., :-1] if result.ndim == 3 and result.shape[2] in (2, 4) else result
    np.testing.assert_array_equal(got, expected)
    return result, capsys.readouterr().out


def test_float32_tiff_stays_float32(tmp_path: Path, rng: np.random.Generator,
                                    capsys: pytest.CaptureFixture) -> None:
    image = (_disk() / 255 + 0.05 * rng.standard_normal((48, 48))).astype(np.float32)
    span = float(image.max()) - float(image.min())
    _, out = _run_and_compare(tmp_path, image, "in.tif", "out.tif", capsys, data_range=span)
    assert f"data range {span:.4g} (the span of the data" in out and "float32" in out


def test_data_range_option(tmp_path: Path, rng: np.random.Generator,
                           capsys: pytest.CaptureFixture) -> None:
    image = (_disk() / 510 + 0.02 * rng.standard_normal((48, 48))).astype(np.float32)
    _, out = _run_and_compare(tmp_path, image, "in.tif", "out.tif", capsys, "--data-range", "1",
                              data_range=1.0)
    assert "data range 1 (given)" in out
    with pytest.raises(SystemExit):
        main(["denoise", str(tmp_path / "in.tif"), str(tmp_path / "o.tif"), "--data-range", "0"])


def test_rgba_keeps_its_alpha(tmp_path: Path, rng: np.random.Generator,
                              capsys: pytest.CaptureFixture) -> None:
    rgb = np.clip(_disk()[..., None] + 20 * rng.standard_normal((48, 48, 3)), 0, 255)
    alpha = rng.integers(0, 256, (48, 48, 1))
    image = np.concatenate([rgb, alpha], axis=2).astype(np.uint8)
    result, out = _run_and_compare(tmp_path, image, "in.png", "out.png", capsys, sigma=20)
    np.testing.assert_array_equal(result[..., 3], image[..., 3])
    assert "(alpha kept)" in out


def test_gray_and_alpha_keeps_its_alpha(tmp_path: Path, rng: np.random.Generator,
                                        capsys: pytest.CaptureFixture) -> None:
    gray = np.clip(_disk() + 20 * rng.standard_normal((48, 48)), 0, 255)
    image = np.stack([gray, np.full((48, 48), 200.0)], axis=2).astype(np.uint8)
    result, _ = _run_and_compare(tmp_path, image, "in.png", "out.png", capsys, sigma=20)
    np.testing.assert_array_equal(result[..., 1], image[..., 1])


def test_uint16_colour_png_stays_uint16(tmp_path: Path, rng: np.random.Generator,
                                        capsys: pytest.CaptureFixture) -> None:
    cv2 = pytest.importorskip("cv2")
    rgb = np.clip(_disk()[..., None] * 257 + 3000 * rng.standard_normal((48, 48, 3)), 0, 65535)
    image = rgb.astype(np.uint16)
    source, target = tmp_path / "in.png", tmp_path / "out.png"
    cv2.imwrite(str(source), image[..., ::-1])  # the peer writes the input (BGR order)
    assert main(["denoise", str(source), str(target), "--method", "kr", "--sigma",
                 "3000"]) == 0, capsys.readouterr().err
    theirs = cv2.imread(str(target), cv2.IMREAD_UNCHANGED)[..., ::-1]
    assert theirs.dtype == np.uint16
    np.testing.assert_array_equal(theirs, denoise(image, "kr", 3000.0))


def test_a_format_that_cannot_hold_the_image_is_refused_before_the_work(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    write_image(tmp_path / "in.tif", np.zeros((8, 8), np.float32))
    assert main(["denoise", str(tmp_path / "in.tif"), str(tmp_path / "out.png")]) == 1
    err = capsys.readouterr().err
    assert "OUT" in err and "float32" in err and ".tif" in err
    assert not (tmp_path / "out.png").exists()


def test_output_to_standard_output(files: tuple[Path, Path],
                                   capsysbinary: pytest.CaptureFixture) -> None:
    from PIL import Image

    noisy, _ = files
    assert main(["denoise", str(noisy), "-", "--sigma", "20", "--method", "bilateral"]) == 0
    captured = capsysbinary.readouterr()
    with Image.open(io.BytesIO(captured.out)) as im:
        streamed = np.asarray(im)
    np.testing.assert_array_equal(streamed, denoise(read_image(noisy), "bilateral", 20.0))
    assert b"standard output" in captured.err
