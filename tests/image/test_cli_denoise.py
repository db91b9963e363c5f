"""``nadaraya denoise``: files in and out, never over the input, the comparison figure."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nadaraya.cli import COMMANDS, main
from nadaraya.image import psnr
from nadaraya.image._io import read_image, write_image


@pytest.fixture
def files(tmp_path: Path, rng: np.random.Generator) -> tuple[Path, Path]:
    r, c = np.indices((48, 48))
    clean = np.where((r - 24) ** 2 + (c - 20) ** 2 < 200, 190, 60).astype(np.uint8)
    noisy = clean + 20 * rng.standard_normal(clean.shape)
    write_image(tmp_path / "clean.png", clean)
    write_image(tmp_path / "noisy.png", noisy)
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
    assert "sigma 20.00 (given)" in capsys.readouterr().out


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
    assert "never writes over its input" in capsys.readouterr().err


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
