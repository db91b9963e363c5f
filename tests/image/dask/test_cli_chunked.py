"""``nadaraya denoise`` on images larger than the working memory: through dask, in bands of
rows, the in-memory result written band by band; ``--scheduler`` for a dask cluster."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nadaraya
from nadaraya.cli import main
from nadaraya.image import denoise, estimate_noise
from nadaraya.image._io import read_image, write_image

from ...cli._inputs import guard_inputs
from ._images import noisy_image

pytest.importorskip("dask.array")
tifffile = pytest.importorskip("tifffile")

# MiB: less than the float copy of the test images (60 x 50 pixels: 12 000 bytes or more)
BUDGET = 0.01


@pytest.fixture(autouse=True)
def _inputs_unchanged(monkeypatch: pytest.MonkeyPatch):
    yield from guard_inputs(monkeypatch)


def _noisy(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    rows, cols = np.indices(shape[:2])
    clean = 0.3 + 0.4 * (((rows - 30) ** 2 + (cols - 22) ** 2) < 300)
    return noisy_image(rng, clean, shape, dtype, sd=0.08, tint=(0.7, 1.0))


def _expected(noisy: np.ndarray, method: str, sigma: float) -> np.ndarray:
    """The in-memory result, alpha (2 or 4 channels) kept unchanged."""
    alpha = noisy.ndim == 3 and noisy.shape[2] in (2, 4)
    colour = noisy[..., :-1] if alpha else noisy
    if colour.ndim == 3 and colour.shape[2] == 1:
        colour = colour[..., 0]
    full = float(np.iinfo(noisy.dtype).max) if noisy.dtype.kind == "u" else float(
        colour.max() - colour.min())
    out = denoise(colour, method, sigma, data_range=full)
    if not alpha:
        return out
    out = out if out.ndim == 3 else out[..., None]
    return np.concatenate([out, noisy[..., -1:]], axis=2)


def test_a_tiff_larger_than_the_budget_set_in_the_environment(
        tmp_path: Path, rng: np.random.Generator) -> None:
    noisy = _noisy(rng, (60, 50), np.uint8)
    tifffile.imwrite(tmp_path / "in.tif", noisy)
    env = {**os.environ, "NADARAYA_WORKING_MEMORY": str(BUDGET)}
    proc = subprocess.run([sys.executable, "-m", "nadaraya", "denoise", str(tmp_path / "in.tif"),
                           str(tmp_path / "out.tif"), "--sigma", "20", "--method", "bilateral"],
                          capture_output=True, text=True, env=env, check=True)
    assert "in bands of" in proc.stdout and "local threads" in proc.stdout
    assert np.array_equal(read_image(tmp_path / "out.tif"),
                          _expected(noisy, "bilateral", 20.0))


@pytest.mark.parametrize(("method", "shape", "dtype", "suffix"), [
    ("bilateral", (60, 50, 4), np.uint8, ".tif"),
    ("kr", (60, 50), np.uint16, ".tif"),
    ("skr", (60, 50, 3), np.float32, ".tif"),
    ("nlm", (60, 50), np.uint8, ".tif"),
    ("kr", (60, 50, 2), np.uint8, ".png"),
])
def test_chunked_denoising_writes_the_in_memory_result(
        tmp_path: Path, rng: np.random.Generator, capsys: pytest.CaptureFixture,
        method: str, shape: tuple[int, ...], dtype: Any, suffix: str) -> None:
    noisy = _noisy(rng, shape, dtype)
    source = tmp_path / f"in{suffix}"
    write_image(source, noisy)
    sigma = 0.08 * (np.iinfo(dtype).max if np.dtype(dtype).kind == "u" else 1.0)
    target = tmp_path / f"out{suffix}"
    with nadaraya.config_context(working_memory=BUDGET):
        status = main(["denoise", str(source), str(target), "--method", method,
                       "--sigma", str(sigma)])
    assert status == 0, capsys.readouterr().err
    assert "in bands of" in capsys.readouterr().out
    got = read_image(target)
    assert got.dtype == noisy.dtype
    assert np.array_equal(got, _expected(noisy, method, sigma))


def test_the_noise_level_is_estimated_on_the_chunks(tmp_path: Path, rng: np.random.Generator,
                                                    capsys: pytest.CaptureFixture) -> None:
    noisy = _noisy(rng, (60, 50), np.uint8)
    tifffile.imwrite(tmp_path / "in.tif", noisy)
    with nadaraya.config_context(working_memory=BUDGET):
        status = main(["denoise", str(tmp_path / "in.tif"), str(tmp_path / "out.tif"),
                       "--method", "bilateral"])
    assert status == 0
    sigma = estimate_noise(noisy)
    assert f"sigma {sigma:.4g} (estimated)" in capsys.readouterr().out
    assert np.array_equal(read_image(tmp_path / "out.tif"),
                          _expected(noisy, "bilateral", sigma))


def test_a_chunked_image_takes_no_figure(tmp_path: Path, rng: np.random.Generator,
                                         capsys: pytest.CaptureFixture) -> None:
    tifffile.imwrite(tmp_path / "in.tif", _noisy(rng, (60, 50), np.uint8))
    with nadaraya.config_context(working_memory=BUDGET):
        status = main(["denoise", str(tmp_path / "in.tif"), str(tmp_path / "out.tif"),
                       "--sigma", "20", "--compare", str(tmp_path / "fig.png")])
    err = capsys.readouterr().err
    assert status == 1 and "--compare" in err and "filtered in chunks" in err
    assert not (tmp_path / "out.tif").exists()


def test_a_bad_scheduler_address_names_the_option(tmp_path: Path, rng: np.random.Generator,
                                                  capsys: pytest.CaptureFixture) -> None:
    pytest.importorskip("distributed")
    tifffile.imwrite(tmp_path / "in.tif", _noisy(rng, (20, 20), np.uint8))
    status = main(["denoise", str(tmp_path / "in.tif"), str(tmp_path / "out.tif"),
                   "--sigma", "20", "--scheduler", "nowhere://host:1"])
    err = capsys.readouterr().err
    assert status == 1 and "--scheduler 'nowhere://host:1'" in err
    assert not (tmp_path / "out.tif").exists()


@pytest.mark.slow
def test_a_local_cluster_gives_the_in_memory_result(tmp_path: Path,
                                                    rng: np.random.Generator,
                                                    capsys: pytest.CaptureFixture) -> None:
    distributed = pytest.importorskip("distributed")
    noisy = _noisy(rng, (60, 50, 3), np.uint8)
    tifffile.imwrite(tmp_path / "in.tif", noisy, photometric="rgb")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster:
        with nadaraya.config_context(working_memory=BUDGET):
            status = main(["denoise", str(tmp_path / "in.tif"), str(tmp_path / "out.tif"),
                           "--method", "skr", "--sigma", "20",
                           "--scheduler", cluster.scheduler_address])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert f"scheduler {cluster.scheduler_address}" in captured.out
    assert np.array_equal(read_image(tmp_path / "out.tif"), _expected(noisy, "skr", 20.0))


@pytest.mark.parametrize("budget", [BUDGET, None])  # in bands through dask, and in memory
@pytest.mark.parametrize(("shape", "suffix"), [((40, 30, 4), ".tif"), ((40, 30), ".png")])
def test_an_image_without_noise_is_written_unchanged_either_way(
        tmp_path: Path, capsys: pytest.CaptureFixture, budget: float | None,
        shape: tuple[int, ...], suffix: str) -> None:
    flat = np.full(shape, 90, dtype=np.uint8)
    if len(shape) == 3:
        flat[..., 3] = np.arange(shape[1], dtype=np.uint8)  # an alpha channel of its own
    write_image(tmp_path / f"in{suffix}", flat)
    context = (nadaraya.config_context(working_memory=budget) if budget
               else contextlib.nullcontext())
    with context:
        status = main(["denoise", str(tmp_path / f"in{suffix}"), str(tmp_path / f"out{suffix}")])
    out = capsys.readouterr().out
    assert status == 0 and "no noise found" in out and "unchanged" in out
    assert ("in bands of" in out) is False  # the unchanged image is not reported as filtered
    assert np.array_equal(read_image(tmp_path / f"out{suffix}"), flat)
