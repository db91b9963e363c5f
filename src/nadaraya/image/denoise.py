"""One entry point for every filter, with parameters set from the noise level."""

from __future__ import annotations

from typing import Any

from .._errors import NadarayaError
from ._dask import dask_image, is_dask
from ._dask import data_range as dask_range
from ._image import as_image, check_positive, data_range_of
from ._layout import apply_layout, needs_layout

__all__ = ["METHODS", "VOLUME_NLM", "check_sigma", "denoise", "recipe"]

METHODS = ("nlm", "bilateral", "skr", "kr", "nlbayes")

#: The filters square the noise level (and divide by the square): it must stay
#: well inside float64's normal range.
_SMALLEST, _LARGEST = 1e-150, 1e150


def check_sigma(sigma: float, data_range: float, *, name: str = "sigma",
                range_name: str = "data_range") -> float:
    """A noise level the filters can use for an image of full scale ``data_range``.

    Parameters
    ----------
    sigma : float
        Noise standard deviation, in the image's units.
    data_range : float
        The image's full scale.
    name, range_name : str
        How messages name the two numbers (``"--sigma"`` on the command line).

    Returns
    -------
    float
        ``sigma``.

    Raises
    ------
    NadarayaError
        ``sigma`` is not a finite number > 0, exceeds ``data_range`` (noise
        cannot be larger than the image's full scale), or is so small or so
        large that its square leaves float64's normal range.
    """
    sigma = check_positive(sigma, name, "Pass the noise standard deviation.")
    full = check_positive(data_range, range_name, "Pass e.g. 255 or 1.0.")
    if sigma > full:
        raise NadarayaError(f"{name} {sigma:.4g} is larger than {range_name} {full:.4g}: noise "
                            f"cannot exceed the image's full scale. Check {name} and "
                            f"{range_name}.")
    if not _SMALLEST <= sigma <= _LARGEST:
        raise NadarayaError(f"{name} {sigma:.4g} is outside {_SMALLEST:g} to {_LARGEST:g}, the "
                            "noise levels whose square the filters can compute with; rescale "
                            "the image (to 0-1 or 0-255, say).")
    return sigma


def recipe(method: str, sigma: float, data_range: float = 255.0) -> dict[str, Any]:
    """Parameters of ``method`` for Gaussian noise of standard deviation ``sigma``.

    Fitted on scikit-image's ``camera`` at sigma = 10, 25 and 50 (0-255
    scale) by ``benchmarks/bench_image.py`` (the best PSNR of its sweeps).

    Parameters
    ----------
    method : {"nlm", "bilateral", "skr", "kr", "nlbayes"}
    sigma : float
        Noise standard deviation, in the image's units.
    data_range : float, default 255.0
        The image's full scale (255 for uint8, 1.0 for floats in [0, 1]):
        parameters in pixels depend on the noise level on the 0-255 scale.

    Returns
    -------
    dict
        Keyword arguments of the method's function.

    Raises
    ------
    NadarayaError
        An unknown ``method``, or a ``sigma`` that :func:`check_sigma` refuses.
    """
    sigma = check_sigma(sigma, data_range)
    s255 = sigma * 255.0 / float(data_range)
    if method == "nlm":
        return {"h": 0.75 * sigma, "sigma": 1.15 * sigma, "patch_size": 7, "search_radius": 7}
    if method == "bilateral":
        return {"sigma_color": 2.5 * sigma, "sigma_spatial": 2.5}
    if method == "kr":
        return {"h": 0.55 + 0.023 * min(s255, 100.0), "order": 0}
    if method == "skr":
        # a non-local means pilot, h and range_sigma from the noise level
        # (see steering_kernel_regression)
        return {"sigma": sigma}
    if method == "nlbayes":
        # larger patches as the noise grows (Lebrun, Buades and Morel 2013). Stage 1 is the
        # mean of non-local Bayes's own first stage (thresholding hard, keeping the principal
        # directions above beta sigma^2) and collaborative hard thresholding in a fixed
        # transform; stage 2 runs with two patch sizes and averages them. Chosen on 256 x 256
        # crops of camera, astronaut, coffee, brick, grass and chelsea against BM3D
        # (benchmarks/bench_denoiser.py --crop 256), mean over the six: the mean of the two
        # first stages gains 0.02-0.12 dB over either alone (brick: up to 0.4 over
        # non-local Bayes's); the two stage-2 sizes gain 0.03-0.06 over one; a search
        # radius of 18 gains 0.003-0.04 over 14. References every 4 pixels (5 above sigma
        # 30) rather than 3 take half the time for 0.01-0.06 dB. On the full images: with
        # the transform's pilot, stage 1's flat-area rule costs up to 0.3 dB up to sigma 30
        # (clock at sigma 10, moon 0.07 at sigma 25), so it is off there. Above sigma 30,
        # off, it would gain up to 0.17 (moon) but leave chelsea 0.007 behind BM3D; at 1.0,
        # with transform groups of 32, every image is ahead. With the rule off, a transform
        # threshold of 2.4 sigma rather than 2.7 gains 0.02 more at sigma 10 (moon, camera,
        # clock).
        common = {"sigma": sigma, "k1": 120, "step": 4, "search_radius": 18,
                  "threshold": "hard", "flat": 0.0, "pilot": "both"}
        if s255 <= 15.0:
            return {**common, "patch_size": 5, "patch_size2": (5, 7), "k2": 30, "beta": 2.5,
                    "transform_lambda": 2.4}
        if s255 <= 30.0:
            return {**common, "patch_size": 5, "patch_size2": (7, 9), "k2": 45, "beta": 2.0}
        return {**common, "patch_size": 7, "patch_size2": (7, 9), "k1": 90, "k2": 45,
                "step": 5, "beta": 3.0, "flat": 1.0, "transform_patch_size": 10,
                "transform_k": 32, "transform_lambda": 2.4}
    raise NadarayaError(f"method must be one of {', '.join(METHODS)}; got {method!r}.")


#: Parameters of non-local means on volumes: cubic patches and search windows cost the
#: cube of their side, so both are smaller than in 2-D.
VOLUME_NLM = {"patch_size": 5, "search_radius": 3}


def _volume_noise(volume: Any) -> float:
    """The median over slices of :func:`estimate_noise` of a volume's slices."""
    import numpy as np

    from .noise import estimate_noise

    return float(np.median([estimate_noise(volume[k]) for k in range(int(volume.shape[0]))]))


def _volume_range(volume: Any, given: float | None) -> float:
    import numpy as np
    import torch

    if given is not None:
        return check_positive(given, "data_range", "Pass e.g. 255 or 1.0.")
    arr = volume.detach().cpu().numpy() if isinstance(volume, torch.Tensor) else np.asarray(
        volume)
    if arr.dtype.kind in "ui":
        return float(np.iinfo(arr.dtype).max)
    top, bottom = float(arr.max()), float(arr.min())
    return (top - bottom) or max(abs(top), abs(bottom)) or 1.0


def denoise(image: Any, method: str = "nlm", sigma: float | None = None, *,
            data_range: float | None = None, channel_axis: int | None = -1,
            batch_axis: int | None = None, **overrides: Any) -> Any:
    """Denoise with ``method``, its parameters set from the noise level.

    Parameters
    ----------
    image : array-like, torch.Tensor or dask array
        Of shape (height, width) or (height, width, channels), uint8 or float;
        a dask array gives a dask array, lazily (see :mod:`nadaraya.image`).
    method : {"nlm", "bilateral", "skr", "kr", "nlbayes"}, default "nlm"
        Non-local means, bilateral filter, steering kernel regression,
        classic kernel regression or non-local Bayes (:func:`nl_bayes`).
    sigma : float, optional
        Noise standard deviation in the image's units; estimated with
        :func:`estimate_noise` when not given.
    data_range : float, optional
        The image's full scale; default from :func:`data_range_of`: the
        integer dtype's maximum, or for floats the span ``max - min`` of the
        data. Parameters in pixels depend on ``sigma / data_range``.
    channel_axis : int or None, default -1
        The axis of the channels; None: none, a 3-D array is a volume
        (``"nlm"`` and ``"bilateral"`` filter volumes; non-local means then
        takes :data:`VOLUME_NLM`'s patch and search window, and the noise
        level is the median of the slices' estimates).
    batch_axis : int, optional
        An axis of independent images (or volumes); each gets its own noise
        estimate and data range.
    **overrides
        Keyword arguments passed on to the method's function instead of the
        recipe's values (see :func:`recipe`).

    Returns
    -------
    ndarray or torch.Tensor
        Same shape, dtype and range as ``image``.
    """
    from . import (
        bilateral,
        kernel_regression,
        nl_bayes,
        non_local_means,
        steering_kernel_regression,
    )
    from .noise import estimate_noise

    if method not in METHODS:
        raise NadarayaError(f"method must be one of {', '.join(METHODS)}; got {method!r}.")
    if needs_layout(image, channel_axis, batch_axis):
        def volume(x: Any) -> Any:
            if method not in ("nlm", "bilateral"):
                raise NadarayaError(f"method {method!r} filters 2-D images only; for a volume "
                                    "use 'nlm' or 'bilateral'.")
            s = _volume_noise(x) if sigma is None else sigma
            if not s > 0:
                return x
            params = recipe(method, s, _volume_range(x, data_range))
            if method == "nlm":
                params.update(VOLUME_NLM)
            params.update(overrides)
            function = non_local_means if method == "nlm" else bilateral
            return function(x, **params, channel_axis=None if x.ndim == 3 else -1)

        return apply_layout(image, channel_axis, batch_axis, lambda x: denoise(
            x, method, sigma, data_range=data_range, **overrides), volume, what="denoise")
    if sigma is None:
        sigma = estimate_noise(image)
        if not sigma > 0:
            if not is_dask(image):
                as_image(image)
            return image
    if is_dask(image):
        full = dask_range(dask_image(image), data_range)
    else:
        full = data_range_of(as_image(image), data_range)
    params = recipe(method, sigma, full)
    if method == "skr":
        params["data_range"] = full
    params.update(overrides)
    function = {"nlm": non_local_means, "bilateral": bilateral,
                "skr": steering_kernel_regression, "kr": kernel_regression,
                "nlbayes": nl_bayes}[method]
    return function(image, **params)
