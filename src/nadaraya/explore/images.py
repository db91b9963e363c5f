"""The Images tab: denoise a noisy image and look at one pixel's kernel over its window.

A shipped or uploaded image (grey levels 0-255, at most :data:`SIDE` pixels a
side) gets Gaussian noise of the chosen level and is denoised by
:func:`nadaraya.image.denoise` with the bilateral filter, non-local means or
steering kernel regression; before, after and difference are drawn with
their PSNR (:func:`nadaraya.image.psnr`). A click on a pixel of the noisy
image overlays its kernel over the window, computed with
:func:`nadaraya.weights`: for the bilateral filter
``Gaussian(sigma_spatial).on([0, 1]) * Gaussian(sigma_color).on([2])`` over
``t = [row, column, value]``; for non-local means (box patches) a Gaussian of
bandwidth ``patch_size * h / sqrt(2)`` over the patch vectors.
"""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np

import nadaraya
from nadaraya.image import denoise, non_local_means, psnr
from nadaraya.kernels import Gaussian

from .._errors import NadarayaError
from ._common import figure, message, require_panel

__all__ = ["IMAGES", "METHODS", "SIDE", "ImageTab", "load_image", "read_image"]

#: Largest side of the image the tab works on (larger ones are cropped to the centre).
SIDE = 160
#: Filters offered, by :func:`nadaraya.image.denoise`'s method names.
METHODS = {"bilateral": "bilateral", "non-local means": "nlm", "steering kernel": "skr"}
IMAGES = ("camera", "shapes")


def load_image(name: str) -> np.ndarray:
    """A shipped image as float64 grey levels 0-255, shape (height, width).

    ``camera`` is scikit-image's cameraman reduced to 128 x 128 by 4 x 4 means
    (needs scikit-image); ``shapes`` is a drawing of a disk, a square and a ramp.
    """
    if name == "camera":
        try:
            from skimage.data import camera
        except ImportError:
            raise NadarayaError("the camera image comes with scikit-image; install it with "
                                "pip install 'nadaraya[image]' or choose 'shapes'.") from None
        return camera().astype(float).reshape(128, 4, 128, 4).mean(axis=(1, 3))
    if name == "shapes":
        rows, cols = np.mgrid[0:128, 0:128]
        image = np.where((rows - 40) ** 2 + (cols - 40) ** 2 < 24 ** 2, 200.0, 60.0)
        image[70:115, 65:115] = 140.0
        image[5:30, 70:125] = np.linspace(20, 235, 55)
        return image
    raise NadarayaError(f"image must be one of {', '.join(IMAGES)}; got {name!r}.")


def read_image(content: bytes) -> np.ndarray:
    """An uploaded PNG or JPEG as grey levels 0-255, cropped to :data:`SIDE` a side."""
    import matplotlib.image

    try:
        image = np.asarray(matplotlib.image.imread(io.BytesIO(content)), dtype=float)
    except Exception as exc:  # any decoder failure is a bad upload
        raise NadarayaError(f"the uploaded file is not a readable image ({message(exc)}); "
                            "upload a PNG or JPEG.") from None
    if image.ndim == 3:
        image = image[..., :3].mean(axis=2)
    if image.ndim != 2 or min(image.shape) < 8:
        raise NadarayaError(f"the uploaded image must be at least 8 x 8 pixels; got shape "
                            f"{image.shape}.")
    if image.max() <= 1.0:
        image = image * 255.0
    top, left = (max(0, (s - SIDE) // 2) for s in image.shape)
    return image[top:top + SIDE, left:left + SIDE]


def _window(padded: np.ndarray, row: int, col: int, pad: int, half: int) -> np.ndarray:
    return padded[pad + row - half: pad + row + half + 1, pad + col - half: pad + col + half + 1]


class ImageTab:
    """Widgets, plots and callbacks of the Images tab.

    Attributes
    ----------
    clean, noisy, denoised : ndarray of shape (height, width)
        Grey levels 0-255 (float64).
    psnr_noisy, psnr_denoised : float
        PSNR against ``clean`` (data range 255), in dB.
    pixel : (int, int) or None
        The clicked (row, column); ``pixel_weights`` its kernel over the window,
        shape (2 r + 1, 2 r + 1) with zeros outside the window's support, rows
        summing to 1, and ``pixel_window`` the noisy values under it.
    sources : dict of str to ColumnDataSource
        ``noisy``, ``denoised``, ``difference`` and ``kernel`` (named ``images-<key>``).

    Examples
    --------
    >>> tab = ImageTab()                                     # doctest: +SKIP
    >>> tab.compute(); tab.select_pixel(40, 40)              # doctest: +SKIP
    """

    def __init__(self, image: str = "shapes", seed: int = 0) -> None:
        pn = require_panel()
        from bokeh.events import Tap
        from bokeh.models import ColumnDataSource

        self.seed = seed
        self.pixel: tuple[int, int] | None = None
        self.pixel_weights = np.zeros((0, 0))
        self.pixel_window = np.zeros((0, 0))
        self.denoised = np.zeros((0, 0))
        self._summary = ""
        self.sources = {key: ColumnDataSource({"image": [], "x": [], "y": [], "dw": [], "dh": []},
                                              name=f"images-{key}")
                        for key in ("noisy", "denoised", "difference", "kernel")}
        self.image = pn.widgets.Select(name="Image", options=list(IMAGES), value=image)
        self.upload = pn.widgets.FileInput(accept=".png,.jpg,.jpeg", name="Image file")
        self.noise = pn.widgets.FloatSlider(name="Noise level (0-255)", start=1, end=60,
                                            value=20, step=1)
        self.method = pn.widgets.Select(name="Filter", options=list(METHODS), value="bilateral")
        self.sigma_spatial = pn.widgets.FloatSlider(name="sigma_spatial (pixels)", start=0.5, end=5,
                                                  value=2.0, step=0.1)
        self.sigma_color = pn.widgets.FloatSlider(name="sigma_color", start=5, end=150,
                                                  value=50, step=1)
        self.h = pn.widgets.FloatSlider(name="h (non-local means)", start=2, end=80, value=15,
                                        step=1)
        self.patch_size = pn.widgets.Select(name="patch_size", options=[3, 5, 7], value=5)
        self.search_radius = pn.widgets.IntSlider(name="search_radius", start=2, end=8, value=5)
        self.iterations = pn.widgets.IntSlider(name="iterations (steering)", start=1, end=3,
                                               value=1)
        self.status = pn.pane.Markdown("", name="images-status")
        self.figures = {}
        for key, title in (("noisy", "Before (noisy; click a pixel)"), ("denoised", "After"),
                           ("difference", "Difference after - before")):
            fig = figure(title, height=300, width=300, sizing_mode="fixed",
                         css_classes=[f"images-{key}"])
            palette = "RdBu11" if key == "difference" else "Greys256"
            fig.image("image", x="x", y="y", dw="dw", dh="dh", palette=palette,
                      source=self.sources[key])
            fig.axis.visible = False
            self.figures[key] = fig
        self.figures["noisy"].image("image", x="x", y="y", dw="dw", dh="dh", palette="Inferno256",
                                    alpha=0.75, source=self.sources["kernel"])
        self.figures["noisy"].on_event(Tap, lambda e: self._tapped(e.x, e.y))
        self.image.param.watch(lambda e: self.load(load_image(e.new)), "value")
        self.upload.param.watch(lambda e: self._uploaded(e.new), "value")
        for widget in (self.noise, self.method, self.sigma_spatial, self.sigma_color, self.h,
                       self.patch_size, self.search_radius, self.iterations):
            widget.param.watch(lambda e: self.compute(), "value")
        self.panel = pn.Row(
            pn.Column(self.image, self.upload, self.noise, self.method, self.sigma_spatial,
                      self.sigma_color, self.h, self.patch_size, self.search_radius,
                      self.iterations, self.status, width=300),
            pn.Row(*self.figures.values()), name="Images", sizing_mode="stretch_width")
        self.clean = load_image(image)

    def load(self, image: np.ndarray) -> None:
        """Use ``image`` (grey levels 0-255, shape (height, width)) and :meth:`compute`."""
        image = np.asarray(image, dtype=float)
        if image.ndim != 2 or min(image.shape) < 8 or not np.isfinite(image).all():
            raise NadarayaError(f"image must be a finite 2-D array at least 8 x 8; got shape "
                                f"{image.shape}.")
        self.clean = image
        self.compute()

    def _uploaded(self, content: bytes | None) -> None:
        if not content:
            return
        try:
            self.load(read_image(content))
        except NadarayaError as exc:
            self.status.object = f"**Upload refused:** {message(exc)}"

    def parameters(self) -> dict[str, Any]:
        """Keyword arguments of the filter: overrides of :func:`nadaraya.image.denoise`'s
        recipe, or for non-local means those of :func:`nadaraya.image.non_local_means`."""
        method = METHODS[self.method.value]
        if method == "bilateral":
            return {"sigma_spatial": float(self.sigma_spatial.value),
                    "sigma_color": float(self.sigma_color.value)}
        if method == "nlm":
            return {"h": float(self.h.value), "patch_size": int(self.patch_size.value),
                    "search_radius": int(self.search_radius.value), "sigma": 0.0,
                    "patch_kind": "box"}
        return {"iterations": int(self.iterations.value)}

    def compute(self) -> None:
        """Add the noise, denoise, draw before / after / difference and the PSNRs."""
        rng = np.random.default_rng(self.seed)
        sigma = float(self.noise.value)
        self.noisy = self.clean + rng.normal(0.0, sigma, self.clean.shape)
        method = METHODS[self.method.value]
        try:
            if method == "nlm":  # box patches, no noise offset: the kernel drawn on a click
                out = non_local_means(image=self.noisy, **self.parameters())
            else:
                out = denoise(image=self.noisy, method=method, sigma=sigma, data_range=255.0,
                              **self.parameters())
            self.denoised = np.asarray(out)
        except NadarayaError as exc:
            self.status.object = f"**{message(exc)}**"
            return
        self.psnr_noisy = psnr(self.clean, self.noisy, data_range=255.0)
        self.psnr_denoised = psnr(self.clean, self.denoised, data_range=255.0)
        height, width = self.clean.shape
        for key, image in (("noisy", self.noisy), ("denoised", self.denoised),
                           ("difference", self.denoised - self.noisy)):
            self.sources[key].data = {"image": [np.flipud(image)], "x": [0], "y": [0],
                                      "dw": [width], "dh": [height]}
        span = float(np.abs(self.denoised - self.noisy).max()) or 1.0
        self.figures["difference"].renderers[0].glyph.color_mapper.update(low=-span, high=span)
        self._summary = (f"PSNR before {self.psnr_noisy:.2f} dB, after "
                         f"{self.psnr_denoised:.2f} dB ({self.method.value}).")
        self.status.object = self._summary
        self.select_pixel(*(self.pixel or (None, None)))

    def _tapped(self, x: float | None, y: float | None) -> None:
        if x is None or y is None:
            return
        height = self.clean.shape[0]
        self.select_pixel(height - 1 - math.floor(y), math.floor(x))

    def select_pixel(self, row: int | None, col: int | None) -> None:
        """Overlay the kernel of pixel (``row``, ``col``) over its window on the noisy image."""
        height, width = self.clean.shape
        if row is None or col is None or not (0 <= row < height and 0 <= col < width):
            return
        self.pixel = (int(row), int(col))
        method = METHODS[self.method.value]
        if method == "skr":
            self.sources["kernel"].data = {"image": [], "x": [], "y": [], "dw": [], "dh": []}
            self.pixel_weights = np.zeros((0, 0))
            self.status.object = (f"{self._summary} The steering kernel follows local "
                                  "gradients; the kernel overlay is drawn for the bilateral "
                                  "filter and non-local means.")
            return
        weights, values = (self._bilateral_kernel if method == "bilateral"
                           else self._nlm_kernel)(*self.pixel)
        self.pixel_weights, self.pixel_window = weights, values
        half = weights.shape[0] // 2
        self.sources["kernel"].data = {
            "image": [np.flipud(np.where(weights > 0, weights, np.nan))],
            "x": [col - half], "y": [height - 1 - row - half],
            "dw": [weights.shape[1]], "dh": [weights.shape[0]]}

    def _bilateral_kernel(self, row: int, col: int) -> tuple[np.ndarray, np.ndarray]:
        s_space, s_color = float(self.sigma_spatial.value), float(self.sigma_color.value)
        radius = max(round(1.5 * s_space), 1)
        pad = max(radius, 1)
        padded = np.pad(self.noisy, pad, mode="reflect")
        values = _window(padded, row, col, pad, radius)
        dr, dc = np.mgrid[-radius:radius + 1, -radius:radius + 1]
        inside = dr ** 2 + dc ** 2 <= radius ** 2
        keys = np.column_stack([row + dr[inside], col + dc[inside], values[inside]])
        query = np.array([[row, col, self.noisy[row, col]]], dtype=float)
        kernel = Gaussian(s_space).on([0, 1]) * Gaussian(s_color).on([2])
        weights = np.zeros(values.shape)
        weights[inside] = np.asarray(nadaraya.weights(query, keys, kernel))[0]
        return weights, values

    def _nlm_kernel(self, row: int, col: int) -> tuple[np.ndarray, np.ndarray]:
        p, radius, h = int(self.patch_size.value), int(self.search_radius.value), self.h.value
        half = p // 2
        pad = half + radius
        padded = np.pad(self.noisy, pad, mode="reflect")
        height, width = self.noisy.shape
        dr, dc = np.mgrid[-radius:radius + 1, -radius:radius + 1]
        inside = ((row + dr >= 0) & (row + dr < height) & (col + dc >= 0) & (col + dc < width))
        patches = np.array([_window(padded, row + a, col + b, pad, half).ravel()
                            for a, b in zip(dr[inside], dc[inside], strict=True)])
        query = _window(padded, row, col, pad, half).ravel()[None]
        weights = np.zeros(dr.shape)
        weights[inside] = np.asarray(nadaraya.weights(query, patches,
                                                      Gaussian(p * h / math.sqrt(2))))[0]
        return weights, _window(padded, row, col, pad, radius)
