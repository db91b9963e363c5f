"""The explorer's tabs without a browser: callbacks change the state as they should."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("panel")

import nadaraya
from nadaraya import NadarayaError
from nadaraya.explore.images import ImageTab, load_image, read_image
from nadaraya.explore.regression import RegressionTab, read_csv
from nadaraya.explore.scale import ScaleTab, generate


@pytest.fixture(scope="module")
def regression() -> RegressionTab:
    return RegressionTab("mcycle")


def _naive_nw(grid, x, y, h):
    w = np.exp(-0.5 * ((grid[:, None] - x[None, :]) / h) ** 2)
    return (w @ y) / w.sum(axis=1), w / w.sum(axis=1, keepdims=True)


def test_slider_redraws_fit_against_naive_formula(regression: RegressionTab) -> None:
    regression.kernel.value = "gaussian"
    regression.bandwidth.value = 2.5  # as a browser moves it: through the watcher
    fit, _ = _naive_nw(regression.grid, regression.x, regression.y, 2.5)
    assert regression.h == 2.5
    np.testing.assert_allclose(regression.sources["fit"].data["fit"], fit, rtol=1e-10, atol=1e-10)
    assert regression.cv_mark.location == 2.5


def test_band_is_the_estimators_interval(regression: RegressionTab) -> None:
    from nadaraya.estimators import NadarayaWatsonRegressor

    regression.set_bandwidth(3.0)
    model = NadarayaWatsonRegressor(bandwidth=3.0).fit(regression.x[:, None], regression.y)
    lower, _upper = model.predict_interval(regression.grid[:, None])
    np.testing.assert_allclose(regression.sources["fit"].data["lower"], lower)
    assert np.all(regression.sources["fit"].data["upper"] > regression.fit)


def test_click_shows_query_weights(regression: RegressionTab) -> None:
    regression.set_bandwidth(2.0)
    regression.select_query(25.0)
    _, w = _naive_nw(np.array([25.0]), regression.x, regression.y, 2.0)
    np.testing.assert_allclose(regression.sources["weights"].data["w"], w[0], atol=1e-12)
    assert regression.query_mark.visible and regression.query_mark.location == 25.0
    regression.set_bandwidth(4.0)  # the query follows the bandwidth
    _, w = _naive_nw(np.array([25.0]), regression.x, regression.y, 4.0)
    np.testing.assert_allclose(regression.query_weights, w[0], atol=1e-12)
    regression.select_query(float("nan"))  # a tap outside the data: ignored
    assert regression.query == 25.0


def test_cv_curve_and_kernel_change(regression: RegressionTab) -> None:
    regression.kernel.value = "epanechnikov"
    cv = regression.sources["cv"].data
    assert len(cv["bandwidth"]) >= 3 and np.all(np.diff(cv["bandwidth"]) >= 0)
    best = cv["bandwidth"][int(np.argmin(cv["score"]))]
    assert regression.h == pytest.approx(best)
    fit = nadaraya.smooth(regression.grid[:, None], regression.x[:, None], regression.y,
                          "epanechnikov", bandwidth=regression.h, empty="nan")
    np.testing.assert_allclose(regression.fit, fit, equal_nan=True)
    regression.kernel.value = "gaussian"


def test_bad_inputs_are_refused(regression: RegressionTab) -> None:
    with pytest.raises(NadarayaError, match="bandwidth"):
        regression.set_bandwidth(-1.0)
    with pytest.raises(NadarayaError, match="dataset"):
        regression.load_dataset("nope")
    with pytest.raises(NadarayaError, match="kernel"):
        regression.set_kernel("nope")
    with pytest.raises(NadarayaError, match="finite"):
        regression.set_data([1.0, np.nan, 3.0], [1.0, 2.0, 3.0])
    with pytest.raises(NadarayaError, match="length"):
        regression.set_data([1.0], [1.0])
    with pytest.raises(NadarayaError, match="same length"):
        regression.set_data([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(NadarayaError, match="not constant"):
        regression.set_data([1.0, 1.0, 1.0], [1.0, 2.0, 3.0])
    with pytest.raises(NadarayaError, match="finite"):
        regression.set_data([1.0, 2.0, 3.0], [1.0, np.inf, 3.0])
    assert regression.x.size == 133  # the data shown are left as they were


def test_csv_upload(regression: RegressionTab) -> None:
    x, _y, names = read_csv(b"t,v,extra\n0,1,5\n1,3,5\n2,nan,5\n3,2,5\n4,inf,1\n5,0,1\n")
    assert names == ("t", "v") and x.tolist() == [0.0, 1.0, 3.0, 5.0]
    for bad, match in ((b"a\n1\n2\n", "two numeric"), (b"a,b\n1,2\n", "at least 3"),
                       (b"", "readable CSV")):
        with pytest.raises(NadarayaError, match=match):
            read_csv(bad)
    regression.load_csv(b"a\n1\n")
    assert "Upload refused" in regression.status.object
    regression.load_csv(b"u,w\n0,0\n1,1\n2,4\n3,9\n4,16\n")
    assert regression.x.size == 5 and regression.names == ("u", "w")
    regression.load_dataset("mcycle")


@pytest.fixture(scope="module")
def images() -> ImageTab:
    tab = ImageTab("shapes")
    tab.compute()
    return tab


def test_images_before_after_psnr(images: ImageTab) -> None:
    from skimage.metrics import peak_signal_noise_ratio

    assert images.psnr_denoised > images.psnr_noisy
    assert images.psnr_noisy == pytest.approx(
        peak_signal_noise_ratio(images.clean, images.noisy, data_range=255))
    np.testing.assert_allclose(images.sources["difference"].data["image"][0],
                               np.flipud(images.denoised - images.noisy))


@pytest.mark.parametrize("method", ["bilateral", "non-local means"])
def test_pixel_kernel_reproduces_the_filter(images: ImageTab, method: str) -> None:
    images.method.value = method
    images.select_pixel(50, 60)
    w = images.pixel_weights
    assert w.sum() == pytest.approx(1.0)
    assert (w * images.pixel_window).sum() == pytest.approx(images.denoised[50, 60], rel=1e-9)
    assert images.sources["kernel"].data["dw"] == [w.shape[1]]


def test_bilateral_pixel_kernel_against_naive_formula(images: ImageTab) -> None:
    images.method.value = "bilateral"
    images.sigma_spatial.value = 1.5
    images.select_pixel(40, 40)
    s, c, r = 1.5, float(images.sigma_color.value), 2
    win = images.noisy[40 - r:41 + r, 40 - r:41 + r]
    dr, dc = np.mgrid[-r:r + 1, -r:r + 1]
    k = np.exp(-(dr ** 2 + dc ** 2) / (2 * s * s) - (win - images.noisy[40, 40]) ** 2 / (2 * c * c))
    k[dr ** 2 + dc ** 2 > r * r] = 0
    np.testing.assert_allclose(images.pixel_weights, k / k.sum(), atol=1e-12)


def test_steering_kernel_has_no_overlay(images: ImageTab) -> None:
    images.method.value = "steering kernel"
    images.select_pixel(30, 30)
    images.select_pixel(31, 30)
    assert images.pixel_weights.size == 0 and images.sources["kernel"].data["image"] == []
    assert images.status.object.count("steering kernel follows") == 1
    assert images.psnr_denoised > images.psnr_noisy
    images.method.value = "bilateral"


def test_tap_maps_to_pixel_and_bad_inputs(images: ImageTab) -> None:
    height = images.clean.shape[0]
    images._tapped(10.5, height - 1 - 20 + 0.5)
    assert images.pixel == (20, 10)
    images._tapped(-3.0, 5.0)  # outside: the pixel stays
    assert images.pixel == (20, 10)
    with pytest.raises(NadarayaError, match="image must be"):
        load_image("nope")
    with pytest.raises(NadarayaError, match="readable image"):
        read_image(b"not an image")
    with pytest.raises(NadarayaError, match="8 x 8"):
        images.load(np.zeros((3, 3)))


def test_scale_tab_reports_engine_and_time() -> None:
    tab = ScaleTab()
    tab.size.value = 1000
    tab.run()
    x, y = generate(1000)
    expected = nadaraya.explain(np.linspace(0, 10, 1000)[:, None], x, y, "gaussian",
                                bandwidth=0.2)
    assert tab.explanation.engine == expected.engine
    assert f"**{expected.engine}**" in tab.result.object and math.isfinite(tab.seconds)
    with pytest.raises(NadarayaError, match="positive integer"):
        generate(0)


def test_explorer_computes_a_tab_when_first_shown() -> None:
    from nadaraya.explore import TABS, Explorer

    app = Explorer()
    assert [p.name for p in app.tabs.objects] == list(TABS)
    assert app.images.denoised.size == 0 and app.scale.explanation is None
    app.tabs.active = 3
    assert app.scale.explanation is not None
    app.tabs.active = 2
    assert app.images.denoised.shape == app.images.clean.shape
    assert app.attention.tokens == []  # not shown yet: transformers not loaded for it


def test_uploaded_png_is_grey_levels_cropped() -> None:
    import io

    import matplotlib.image

    rgb = np.zeros((200, 180, 3), dtype=np.uint8)
    rgb[..., 0] = 255  # pure red: grey level 85 as the mean of the channels
    buffer = io.BytesIO()
    matplotlib.image.imsave(buffer, rgb, format="png")
    image = read_image(buffer.getvalue())
    assert image.shape == (160, 160)
    np.testing.assert_allclose(image, 85.0, atol=0.5)
