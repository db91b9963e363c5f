"""Noise estimation, PSNR, and image input/output conventions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nadaraya import NadarayaError
from nadaraya.image import estimate_noise, psnr
from nadaraya.image._image import as_image, data_range_of
from nadaraya.image._io import read_image, write_image
from nadaraya.image.denoise import denoise, recipe


@pytest.mark.parametrize("sigma", [5.0, 20.0, 60.0])
def test_noise_of_a_flat_image(rng: np.random.Generator, sigma: float) -> None:
    noisy = 120 + sigma * rng.standard_normal((300, 300))
    assert abs(estimate_noise(noisy) / sigma - 1) < 0.05


def test_noise_agrees_with_scikit_image(rng: np.random.Generator) -> None:
    data = pytest.importorskip("skimage.data")
    restoration = pytest.importorskip("skimage.restoration")
    pytest.importorskip("pywt")
    clean = data.camera().astype(float)
    for sigma in (10.0, 25.0):
        noisy = clean + sigma * rng.standard_normal(clean.shape)
        theirs = restoration.estimate_sigma(noisy)
        assert abs(estimate_noise(noisy) / theirs - 1) < 0.05


def test_noise_per_channel(rng: np.random.Generator) -> None:
    noisy = 0.5 + np.array([0.01, 0.05, 0.1]) * rng.standard_normal((200, 200, 3))
    est = estimate_noise(noisy, per_channel=True)
    np.testing.assert_allclose(est, [0.01, 0.05, 0.1], rtol=0.06)
    assert abs(estimate_noise(noisy) - est.mean()) < 1e-12
    with pytest.raises(NadarayaError, match="2 x 2"):
        estimate_noise(np.zeros((1, 5)))


def test_psnr_peer(rng: np.random.Generator) -> None:
    metrics = pytest.importorskip("skimage.metrics")
    a = rng.integers(0, 256, (20, 20), dtype=np.uint8)
    b = np.clip(a + rng.normal(0, 5, a.shape), 0, 255).astype(np.uint8)
    assert abs(psnr(a, b) - metrics.peak_signal_noise_ratio(a, b)) < 1e-9
    f = a / 255.0
    assert abs(psnr(f, b / 255.0) - metrics.peak_signal_noise_ratio(f, b / 255.0,
                                                                   data_range=1)) < 1e-9
    assert psnr(a, a) == float("inf")
    with pytest.raises(NadarayaError, match="same shape"):
        psnr(a, a[:5])


def test_image_layout_and_dtypes(rng: np.random.Generator) -> None:
    gray = rng.integers(0, 256, (5, 6), dtype=np.uint8)
    img = as_image(gray)
    assert img.data.shape == (1, 5, 6) and img.data.dtype == torch.float32 and img.gray
    np.testing.assert_array_equal(img.back(img.data), gray)
    colour = rng.random((5, 6, 3))
    img = as_image(colour)
    assert img.data.shape == (3, 5, 6) and img.data.dtype == torch.float64
    np.testing.assert_array_equal(img.back(img.data), colour)
    u16 = np.array([[0, 65535]], dtype=np.uint16)
    assert as_image(u16).back(as_image(u16).data + 10).tolist() == [[10, 65535]]


def test_read_write_round_trip(tmp_path, rng: np.random.Generator) -> None:
    gray = rng.integers(0, 256, (7, 9), dtype=np.uint8)
    colour = rng.integers(0, 256, (7, 9, 3), dtype=np.uint8)
    for name, arr in (("g.png", gray), ("c.png", colour)):
        write_image(tmp_path / name, arr)
        np.testing.assert_array_equal(read_image(tmp_path / name), arr)
    with pytest.raises(NadarayaError, match="does not exist"):
        read_image(tmp_path / "missing.png")
    (tmp_path / "bad.png").write_bytes(b"not an image")
    with pytest.raises(NadarayaError, match="cannot read"):
        read_image(tmp_path / "bad.png")


def test_denoise_dispatch(rng: np.random.Generator) -> None:
    clean = np.kron(rng.integers(60, 200, (4, 4)), np.ones((8, 8)))
    noisy = clean + 15 * rng.standard_normal(clean.shape)
    for method in ("nlm", "bilateral", "skr", "kr"):
        out = denoise(noisy, method, 15.0)
        assert psnr(clean, out, data_range=255) > psnr(clean, noisy, data_range=255)
        assert set(recipe(method, 15.0)) <= set(recipe(method, 30.0))
    with pytest.raises(NadarayaError, match="method"):
        denoise(noisy, "wiener", 15.0)
    with pytest.raises(NadarayaError, match="sigma"):
        denoise(noisy, "nlm", -1.0)


# -- data range and files: dtype, range and channels kept ---------------------------------
@pytest.mark.parametrize("low, high", [(0.0, 0.5), (-3.0, 300.0), (0.2, 0.9)])
def test_data_range_of_floats_is_the_span_of_the_data(rng: np.random.Generator, low: float,
                                                      high: float) -> None:
    image = rng.uniform(low, high, (10, 12)).astype(np.float32)
    expected = float(image.max()) - float(image.min())
    assert data_range_of(as_image(image)) == pytest.approx(expected, rel=1e-6)
    assert data_range_of(as_image(image), 7.0) == 7.0
    assert data_range_of(as_image(np.full((3, 3), 0.25))) == 0.25
    assert data_range_of(as_image(np.zeros((3, 3)))) == 1.0
    assert data_range_of(as_image(np.zeros((3, 3), np.uint16))) == 65535.0


@pytest.mark.parametrize("name, image", [
    ("gray16.png", np.arange(48, dtype=np.uint16).reshape(6, 8) * 1300),
    ("rgba.png", np.arange(192, dtype=np.uint8).reshape(6, 8, 4)),
    ("la.png", np.arange(96, dtype=np.uint8).reshape(6, 8, 2)),
    ("f32.tif", np.linspace(-2, 3, 144, dtype=np.float32).reshape(6, 8, 3)),
    ("f64.tiff", np.linspace(0, 1, 48).reshape(6, 8)),
    ("rgba16.tif", np.arange(192, dtype=np.uint16).reshape(6, 8, 4) * 300),
    ("la_f32.tif", np.linspace(0, 1, 96, dtype=np.float32).reshape(6, 8, 2)),
])
def test_files_keep_dtype_and_channels(tmp_path, name: str, image: np.ndarray) -> None:
    write_image(tmp_path / name, image)
    back = read_image(tmp_path / name)
    assert back.dtype == image.dtype
    np.testing.assert_array_equal(back, image)
    assert sorted(p.name for p in tmp_path.iterdir()) == [name], "no temporary file left"


def test_files_agree_with_peer_readers(tmp_path) -> None:
    tifffile = pytest.importorskip("tifffile")
    from PIL import Image

    rgba = np.arange(192, dtype=np.uint8).reshape(6, 8, 4)
    write_image(tmp_path / "rgba.png", rgba)
    with Image.open(tmp_path / "rgba.png") as im:
        assert im.mode == "RGBA"
        np.testing.assert_array_equal(np.asarray(im), rgba)
    f32 = np.linspace(-2, 3, 144, dtype=np.float32).reshape(6, 8, 3)
    write_image(tmp_path / "f.tif", f32)
    np.testing.assert_array_equal(tifffile.imread(tmp_path / "f.tif"), f32)
    tifffile.imwrite(tmp_path / "peer.tif", f32[..., 0].astype(np.float64))
    assert read_image(tmp_path / "peer.tif").dtype == np.float64


def test_16bit_colour_png_is_read_as_16_bits(tmp_path) -> None:
    cv2 = pytest.importorskip("cv2")
    rgb = (np.arange(144, dtype=np.uint16).reshape(6, 8, 3) * 450).astype(np.uint16)
    cv2.imwrite(str(tmp_path / "rgb16.png"), rgb[..., ::-1])
    back = read_image(tmp_path / "rgb16.png")
    assert back.dtype == np.uint16
    np.testing.assert_array_equal(back, rgb)
    write_image(tmp_path / "again.png", back)
    np.testing.assert_array_equal(cv2.imread(str(tmp_path / "again.png"),
                                             cv2.IMREAD_UNCHANGED)[..., ::-1], rgb)


@pytest.mark.parametrize("name, image, message", [
    ("f.png", np.zeros((4, 4), np.float32), "float32"),
    ("a.jpg", np.zeros((4, 4, 4), np.uint8), "RGBA"),
    ("x.unknownformat", np.zeros((4, 4), np.uint8), "suffix"),
])
def test_formats_that_cannot_hold_the_image_are_refused(tmp_path, name: str,
                                                        image: np.ndarray, message: str) -> None:
    with pytest.raises(NadarayaError, match=message):
        write_image(tmp_path / name, image)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG"), (".tif", b"II*\x00"),
                                           (".jpg", b"\xff\xd8"), (".bmp", b"BM")])
def test_format_follows_the_suffix(tmp_path, suffix: str, magic: bytes) -> None:
    write_image(tmp_path / f"img{suffix}", np.zeros((4, 4, 3), np.uint8))
    assert (tmp_path / f"img{suffix}").read_bytes().startswith(magic)
