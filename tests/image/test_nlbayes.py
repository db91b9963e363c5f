"""Non-local Bayes against a naive per-reference-patch loop written here with NumPy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from nadaraya._errors import NadarayaError
from nadaraya.image import denoise, nl_bayes, non_local_means
from nadaraya.image.denoise import METHODS, recipe


def _starts(size: int, p: int, step: int) -> list[int]:
    out = list(range(0, size - p + 1, step))
    return out if out[-1] == size - p else [*out, size - p]


def _matrix_function(cov: np.ndarray, f) -> tuple[np.ndarray, list[float]]:
    lam, vec = np.linalg.eigh(cov)
    factors = [f(x) for x in np.maximum(lam, 0.0)]
    return vec @ np.diag(factors) @ vec.T, factors


def _stage(noisy: np.ndarray, pilot: np.ndarray, sigma: float, stage: int, p: int, radius: int,
           k: int, step: int, beta: float = 1.0, flat: float = 0.0,
           hard: bool = False, weighted: bool = False) -> np.ndarray:
    """One stage on (H, W, c) arrays, one reference patch at a time.

    ``weighted``: each group's patches count ``1 / (mean f^2 + 1 / k)``, ``f``
    the filter's eigenvalues over all channels.
    """
    height, width, c = noisy.shape
    k = min(k, (min(radius, height - p) + 1) * (min(radius, width - p) + 1))
    step = min(step, p)
    num = np.zeros_like(noisy)
    den = np.zeros((height, width))
    s2 = sigma * sigma

    def patch(img: np.ndarray, r: int, q: int) -> np.ndarray:  # (c, p * p)
        return img[r:r + p, q:q + p].transpose(2, 0, 1).reshape(c, -1)

    for i in _starts(height, p, step):
        for j in _starts(width, p, step):
            ref = patch(pilot, i, j)
            cands = []
            for r in range(max(0, i - radius), min(height - p, i + radius) + 1):
                for q in range(max(0, j - radius), min(width - p, j + radius) + 1):
                    cands.append((float(((patch(pilot, r, q) - ref) ** 2).sum()), r, q))
            cands.sort()
            members = [(r, q) for _, r, q in cands[:k]]
            group = np.stack([patch(noisy, r, q) for r, q in members])  # (k, c, n)
            guide = np.stack([patch(pilot, r, q) for r, q in members])
            est = np.empty_like(group)
            squares = []
            for ch in range(c):
                g = group[:, ch]
                m = g.mean(0)
                if stage == 1 and hard:
                    cov = (g - m).T @ (g - m) / max(k - 1, 1)
                    filt, f = _matrix_function(cov, lambda x: float(x > beta * s2))
                elif stage == 1:
                    cov = (g - m).T @ (g - m) / max(k - 1, 1)
                    filt, f = _matrix_function(cov, lambda x: max(x - beta * s2, 0) / x
                                               if x > 0 else 0.0)
                else:
                    b = guide[:, ch] - guide[:, ch].mean(0)
                    filt, f = _matrix_function(b.T @ b / max(k - 1, 1), lambda x: x / (x + s2))
                squares += [x * x for x in f]
                est[:, ch] = m + (g - m) @ filt
                if flat > 0 and g.var() <= flat * flat * s2:
                    est[:, ch] = g.mean()
            w = 1.0 / (np.mean(squares) + 1.0 / k) if weighted else 1.0
            for (r, q), e in zip(members, est, strict=True):
                num[r:r + p, q:q + p] += w * e.reshape(c, p, p).transpose(1, 2, 0)
                den[r:r + p, q:q + p] += w
    return num / den[..., None]


def _transform_stage(noisy: np.ndarray, sigma: float, p: int, radius: int, k: int,
                     step: int, lam: float) -> np.ndarray:
    """Collaborative hard thresholding on (H, W, c), one reference patch at a time.

    Each group ``(k, p, p)`` per channel goes through SciPy's orthonormal 3-D
    DCT; coefficients of magnitude at most ``lam * sigma`` are dropped (the
    first always kept); each group weighs ``1 / (coefficients kept)``.
    """
    from scipy.fft import dctn, idctn

    height, width, c = noisy.shape
    k = min(k, (min(radius, height - p) + 1) * (min(radius, width - p) + 1))
    step = min(step, p)
    num = np.zeros_like(noisy)
    den = np.zeros((height, width))
    for i in _starts(height, p, step):
        for j in _starts(width, p, step):
            ref = noisy[i:i + p, j:j + p]
            cands = []
            for r in range(max(0, i - radius), min(height - p, i + radius) + 1):
                for q in range(max(0, j - radius), min(width - p, j + radius) + 1):
                    cands.append((float(((noisy[r:r + p, q:q + p] - ref) ** 2).sum()), r, q))
            cands.sort()
            members = [(r, q) for _, r, q in cands[:k]]
            group = np.stack([noisy[r:r + p, q:q + p] for r, q in members])  # (k, p, p, c)
            est = np.empty_like(group)
            kept = 0
            for ch in range(c):
                coef = dctn(group[..., ch], norm="ortho")
                keep = np.abs(coef) > lam * sigma
                keep[0, 0, 0] = True
                kept += int(keep.sum())
                est[..., ch] = idctn(coef * keep, norm="ortho")
            for (r, q), e in zip(members, est, strict=True):
                num[r:r + p, q:q + p] += e / kept
                den[r:r + p, q:q + p] += 1.0 / kept
    return num / den[..., None]


def _naive(noisy: np.ndarray, sigma: float, p: int, radius: int, k1: int, k2: int,
           step: int, flat: float, beta: float = 1.0, hard: bool = False,
           flat2: float = 1.0, weighted: bool = True, pilot: str = "bayes",
           transform: tuple[int, int, float] = (8, 16, 2.7),
           p2: tuple[int, ...] | None = None) -> np.ndarray:
    x = noisy[..., None] if noisy.ndim == 2 else noisy
    stages = []
    if pilot != "transform":
        stages.append(_stage(x, x, sigma, 1, p, radius, k1, step, beta=beta, flat=flat,
                             hard=hard))
    if pilot != "bayes":
        stages.append(_transform_stage(x, sigma, transform[0], radius, transform[1], step,
                                       transform[2]))
    basic = sum(stages) / len(stages)
    out = sum(_stage(x, basic, sigma, 2, size, radius, k2, step, flat=flat2, weighted=weighted)
              for size in (p2 or (p,))) / len(p2 or (p,))
    return out[..., 0] if noisy.ndim == 2 else out


def _noisy(shape: tuple[int, ...], sigma: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[: shape[0], : shape[1]]
    clean = 0.5 + 0.3 * np.sin(xx / 3.0) * (yy > shape[0] // 2)
    if len(shape) == 3:
        clean = np.stack([clean * (0.6 + 0.2 * ch) for ch in range(shape[2])], -1)
    return clean, clean + sigma * rng.standard_normal(shape)


@pytest.mark.parametrize(("p", "radius", "k1", "k2", "step", "flat"), [
    (3, 3, 12, 8, 2, 0.0), (5, 4, 20, 10, 3, 1.05), (3, 2, 40, 40, 1, 0.0)])
def test_equals_naive_loop_gray(p, radius, k1, k2, step, flat):
    _, noisy = _noisy((20, 22), 0.1)
    got = nl_bayes(noisy, 0.1, patch_size=p, search_radius=radius, k1=k1, k2=k2, step=step,
                   flat=flat)
    want = _naive(noisy, 0.1, p, radius, k1, k2, step, flat)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)


@pytest.mark.parametrize(("flat2", "weighted"), [(0.0, False), (0.0, True), (1.0, False),
                                                 (2.0, True)])
def test_stage_two_flat_rule_and_weights_equal_naive_loop(flat2, weighted):
    _, noisy = _noisy((20, 22), 0.1, seed=4)
    got = nl_bayes(noisy, 0.1, patch_size=3, search_radius=3, k1=15, k2=10, step=2,
                   flat2=flat2, weighted=weighted)
    want = _naive(noisy, 0.1, 3, 3, 15, 10, 2, 1.05, flat2=flat2, weighted=weighted)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)
    plain = nl_bayes(noisy, 0.1, patch_size=3, search_radius=3, k1=15, k2=10, step=2,
                     flat2=0.0, weighted=False)
    if flat2 or weighted:  # each option changes the result
        assert np.abs(got - plain).max() > 1e-4


@pytest.mark.parametrize("beta", [1.0, 3.0])
def test_hard_threshold_equals_naive_loop(beta):
    _, noisy = _noisy((20, 22), 0.1, seed=2)
    got = nl_bayes(noisy, 0.1, patch_size=3, search_radius=3, k1=15, k2=10, step=2,
                   flat=1.05, threshold="hard", beta=beta)
    want = _naive(noisy, 0.1, 3, 3, 15, 10, 2, 1.05, beta=beta, hard=True)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)
    soft = nl_bayes(noisy, 0.1, patch_size=3, search_radius=3, k1=15, k2=10, step=2,
                    flat=1.05, beta=beta)
    assert np.abs(got - soft).max() > 1e-3  # the two rules differ


@pytest.mark.parametrize(("pilot", "transform", "p2"), [
    ("transform", (4, 8, 2.7), None), ("both", (4, 8, 2.7), None),
    ("both", (5, 6, 2.0), (3, 5)), ("bayes", (8, 16, 2.7), (5, 3))])
def test_transform_pilot_and_stage_two_sizes_equal_naive_loop(pilot, transform, p2):
    _, noisy = _noisy((20, 22), 0.1, seed=5)
    got = nl_bayes(noisy, 0.1, patch_size=3, search_radius=3, k1=15, k2=10, step=2,
                   pilot=pilot, transform_patch_size=transform[0], transform_k=transform[1],
                   transform_lambda=transform[2], patch_size2=p2)
    want = _naive(noisy, 0.1, 3, 3, 15, 10, 2, 1.05, pilot=pilot, transform=transform, p2=p2)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)
    plain = nl_bayes(noisy, 0.1, patch_size=3, search_radius=3, k1=15, k2=10, step=2)
    assert np.abs(got - plain).max() > 1e-4  # each option changes the result


def test_a_step_larger_than_a_patch_still_estimates_every_pixel():
    # references every 4 pixels with patches of 3 would leave pixels no group reaches
    _, noisy = _noisy((24, 26), 0.1, seed=7)
    got = nl_bayes(noisy, 0.1, patch_size=5, patch_size2=(3, 5), search_radius=2, k1=8,
                   k2=6, step=4, pilot="both", transform_patch_size=2, transform_k=4)
    assert np.isfinite(got).all()
    want = _naive(noisy, 0.1, 5, 2, 8, 6, 4, 1.05, pilot="both", transform=(2, 4, 2.7),
                  p2=(3, 5))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)


def test_transform_pilot_in_colour_and_a_patch_larger_than_the_image():
    _, noisy = _noisy((12, 14, 3), 0.1, seed=6)
    s3, s2, s6 = math.sqrt(3), math.sqrt(2), math.sqrt(6)
    basis = np.array([[1 / s3] * 3, [1 / s2, 0, -1 / s2], [1 / s6, -2 / s6, 1 / s6]])
    want = _naive(noisy @ basis.T, 0.1, 3, 2, 9, 6, 3, 1.05, pilot="both",
                  transform=(4, 6, 2.7)) @ basis
    got = nl_bayes(noisy, 0.1, patch_size=3, search_radius=2, k1=9, k2=6, pilot="both",
                   transform_patch_size=4, transform_k=6)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)
    small = noisy[:6, :7, 0]  # a transform patch of 8 is taken as the image's side, 6
    np.testing.assert_allclose(
        nl_bayes(small, 0.1, patch_size=3, search_radius=2, k1=9, k2=6, pilot="transform"),
        nl_bayes(small, 0.1, patch_size=3, search_radius=2, k1=9, k2=6, pilot="transform",
                 transform_patch_size=6), rtol=0, atol=0)


def test_dark_flat_area_keeps_its_level_under_the_transform():
    # every coefficient but the group's mean is below the threshold: the mean stays
    img = np.full((16, 16), 0.02)
    out = nl_bayes(img, 0.1, patch_size=3, search_radius=3, k1=10, k2=6, pilot="transform")
    np.testing.assert_allclose(out, img, rtol=1e-12)


def test_wiener_matrix_falls_back_to_eigenvalues_where_cholesky_fails():
    from nadaraya.image.nlbayes import _wiener_matrix

    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 6, 4))
    cov = torch.tensor(np.einsum("bki,bkj->bij", a, a) / 5, dtype=torch.float32)
    # a covariance with a negative eigenvalue (as rounding can leave one): cov + 0.5 I is
    # not positive definite, and the negative eigenvalue counts as 0
    cov[1] = torch.diag(torch.tensor([-1.0, 2.0, 3.0, 4.0]))
    got = _wiener_matrix(cov, 0.5)
    lam, vec = np.linalg.eigh(cov.double().numpy())
    lam = np.maximum(lam, 0)
    want = np.einsum("bij,bj,bkj->bik", vec, lam / (lam + 0.5), vec)
    np.testing.assert_allclose(got.double().numpy(), want, atol=1e-6)
    np.testing.assert_allclose(np.diag(got[1].numpy()), [0, 0.8, 3 / 3.5, 4 / 4.5], atol=1e-6)


def test_equals_naive_loop_colour_in_opponent_basis():
    _, noisy = _noisy((16, 18, 3), 0.1, seed=1)
    s3, s2, s6 = math.sqrt(3), math.sqrt(2), math.sqrt(6)
    basis = np.array([[1 / s3] * 3, [1 / s2, 0, -1 / s2], [1 / s6, -2 / s6, 1 / s6]])
    want = _naive(noisy @ basis.T, 0.1, 3, 3, 15, 10, 2, 1.05) @ basis
    got = nl_bayes(noisy, 0.1, patch_size=3, search_radius=3, k1=15, k2=10, step=2)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)
    two = noisy[..., :2]  # other channel counts: joint grouping, no basis change
    np.testing.assert_allclose(nl_bayes(two, 0.1, patch_size=3, search_radius=2, k1=9, k2=6),
                               _naive(two, 0.1, 3, 2, 9, 6, 3, 1.05), rtol=0, atol=1e-10)


@pytest.mark.parametrize("pilot", ["bayes", "both"])
def test_equals_naive_under_a_small_working_memory(pilot):
    from nadaraya import config_context

    _, noisy = _noisy((18, 18), 0.2, seed=2)
    with config_context(working_memory=0.05):
        got = nl_bayes(noisy, 0.2, patch_size=3, search_radius=3, k1=10, k2=6, step=2,
                       pilot=pilot, transform_patch_size=4, transform_k=8)
    want = _naive(noisy, 0.2, 3, 3, 10, 6, 2, 1.05, pilot=pilot, transform=(4, 8, 2.7))
    np.testing.assert_allclose(got, want, atol=1e-10)


def test_dtype_range_and_kinds_round_trip():
    clean, noisy = _noisy((32, 32), 0.08, seed=3)
    u8 = np.clip(noisy * 255, 0, 255).astype(np.uint8)
    out = nl_bayes(u8, 0.08 * 255, search_radius=4)
    assert out.dtype == np.uint8 and out.shape == u8.shape
    f32 = nl_bayes(noisy.astype(np.float32), 0.08, search_radius=4)
    assert f32.dtype == np.float32
    t = nl_bayes(torch.from_numpy(noisy), 0.08, search_radius=4)
    assert isinstance(t, torch.Tensor) and t.dtype == torch.float64
    np.testing.assert_allclose(t.numpy(), nl_bayes(noisy, 0.08, search_radius=4), atol=1e-12)
    assert np.abs(f32 - clean).mean() < np.abs(noisy - clean).mean() / 2


def test_batch_axis_filters_each_image():
    _, a = _noisy((20, 20), 0.1, seed=4)
    _, b = _noisy((20, 20), 0.1, seed=5)
    got = nl_bayes(np.stack([a, b]), 0.1, search_radius=3, channel_axis=None, batch_axis=0)
    np.testing.assert_allclose(got[1], nl_bayes(b, 0.1, search_radius=3), atol=1e-12)


def test_constant_image_is_unchanged():
    img = np.full((20, 20), 0.3)
    np.testing.assert_allclose(nl_bayes(img, 0.1, search_radius=3), img, atol=1e-12)
    np.testing.assert_allclose(nl_bayes(img, 0.1, search_radius=3, flat=0), img, atol=1e-12)


def test_image_the_size_of_a_patch_and_one_pixel_patches():
    _, noisy = _noisy((5, 7), 0.1)
    out = nl_bayes(noisy, 0.1, patch_size=5, search_radius=3)
    assert out.shape == noisy.shape and np.isfinite(out).all()
    np.testing.assert_allclose(out, _naive(noisy, 0.1, 5, 3, 60, 30, 3, 1.05), atol=1e-10)
    one = nl_bayes(noisy, 0.1, patch_size=1, search_radius=1, k1=4, k2=4, step=1)
    np.testing.assert_allclose(one, _naive(noisy, 0.1, 1, 1, 4, 4, 1, 1.05), atol=1e-10)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"sigma": 0.0}, "sigma"), ({"sigma": -1.0}, "sigma"), ({"sigma": math.nan}, "sigma"),
    ({"sigma": math.inf}, "sigma"), ({"patch_size": 4}, "patch_size"),
    ({"patch_size": 0}, "patch_size"), ({"patch_size2": 2}, "patch_size2"),
    ({"search_radius": -1}, "search_radius"), ({"k1": 0}, "k1"), ({"k2": 1.5}, "k2"),
    ({"step": 0}, "step"), ({"step": True}, "step"), ({"beta": 0}, "beta"),
    ({"flat": -1.0}, "flat"), ({"flat": math.nan}, "flat"), ({"flat2": -0.5}, "flat2"),
    ({"flat2": math.inf}, "flat2"), ({"weighted": 1}, "weighted"), ({"patch_size": 25}, "larger"),
    ({"threshold": "firm"}, "threshold"), ({"threshold": None}, "threshold"),
    ({"pilot": "pca"}, "pilot"), ({"pilot": None}, "pilot"),
    ({"transform_k": 0}, "transform_k"), ({"transform_patch_size": 0}, "transform_patch_size"),
    ({"transform_lambda": 0.0}, "transform_lambda"), ({"transform_lambda": math.nan},
                                                      "transform_lambda"),
    ({"patch_size2": (5, 4)}, "patch_size2"), ({"patch_size2": ()}, "patch_size2"),
    ({"patch_size2": (3, 25)}, "patch_size2 25 is larger"), ({"pilot": ["both"]}, "pilot"),
    ({"pilot": np.array(["both"])}, "pilot")])
def test_bad_parameters_are_refused(kwargs, match):
    _, noisy = _noisy((20, 20), 0.1)
    params = {"sigma": 0.1, **kwargs}
    with pytest.raises(NadarayaError, match=match):
        nl_bayes(noisy, **params)


@pytest.mark.parametrize("pilot", ["bayes", "both"])
@pytest.mark.parametrize("scale", [2.0 ** -1000, 2.0 ** 1000, 1e-300, 1e300, 1e307])
def test_any_scale_of_image_and_sigma_is_filtered_alike(scale, pilot):
    _, noisy = _noisy((20, 22), 0.1, seed=8)
    kw = {"patch_size": 3, "search_radius": 3, "k1": 10, "k2": 6, "pilot": pilot,
          "transform_patch_size": 4, "transform_k": 8}
    want = nl_bayes(noisy, 0.1, **kw)
    got = nl_bayes(noisy * scale, 0.1 * scale, **kw)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got / scale, want, rtol=1e-12, atol=1e-14)
    if math.frexp(scale)[0] == 0.5:  # a power of two: exactly
        np.testing.assert_array_equal(got / scale, nl_bayes(noisy, 0.1, **kw))


def test_a_sigma_too_small_for_the_values_is_refused_by_name():
    _, noisy = _noisy((20, 20), 0.1)
    with pytest.raises(NadarayaError, match=r"sigma 1e-300 is too small.*image's units\."):
        nl_bayes(noisy * 1e300, 1e-300, patch_size=3)
    with pytest.raises(NadarayaError, match="or the image as float64"):
        nl_bayes(noisy.astype(np.float32), 1e-20, patch_size=3)
    user = torch.tensor(noisy)
    before = user.clone()
    nl_bayes(user, 2.0 ** -30, patch_size=3, search_radius=2)  # scaled, not in place
    assert torch.equal(user, before)


def test_hostile_images_are_refused():
    with pytest.raises(NadarayaError):
        nl_bayes(np.array([[0.1, np.nan], [0.2, 0.3]]), 0.1, patch_size=1)
    with pytest.raises(NadarayaError):
        nl_bayes(np.zeros((0, 4)), 0.1)
    with pytest.raises(NadarayaError, match="larger"):
        nl_bayes(np.zeros((3, 40)), 0.1)


def test_denoise_method_uses_the_recipe():
    assert "nlbayes" in METHODS
    _, noisy = _noisy((24, 24), 0.1)
    params = recipe("nlbayes", 0.1, 1.0)
    assert params["patch_size"] == 5 and recipe("nlbayes", 40.0)["patch_size"] == 7
    want = nl_bayes(noisy, **{**params, "search_radius": 3})
    got = denoise(noisy, "nlbayes", 0.1, data_range=1.0, search_radius=3)
    np.testing.assert_allclose(got, want, atol=1e-12)


@pytest.mark.slow
def test_beats_non_local_means_on_a_noisy_photo_crop():
    skimage = pytest.importorskip("skimage")
    clean = skimage.data.camera()[160:256, 160:256].astype(np.float64)
    noisy = clean + 25 * np.random.default_rng(7).standard_normal(clean.shape)

    def err(x: np.ndarray) -> float:
        return float(np.mean((x - clean) ** 2))

    ours = err(denoise(noisy, "nlbayes", 25.0, data_range=255.0))
    nlm = err(non_local_means(noisy, **recipe("nlm", 25.0)))
    assert ours < 0.85 * nlm
