"""The neighbors engine against the float64 dense engine and scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hypothesis import given
from hypothesis import strategies as st

import nadaraya
from nadaraya import NadarayaError
from nadaraya import kernels as K
from nadaraya import masks as M
from nadaraya.engine.neighbors import _engine as _neighbors

COMPACT = ["epanechnikov", "tricube", "uniform"]
EPS32 = float(np.finfo(np.float32).eps)


def dense(queries, keys, values, kernel, mask=None, **kw):  # type: ignore[no-untyped-def]
    return nadaraya.smooth(queries, keys, values, kernel, mask, engine="dense", **kw)


def neighbors(queries, keys, values, kernel, mask=None, **kw):  # type: ignore[no-untyped-def]
    return nadaraya.smooth(queries, keys, values, kernel, mask, engine="neighbors", **kw)


def chosen(queries, keys, values, kernel, mask=None, **kw) -> str:  # type: ignore[no-untyped-def]
    return nadaraya.explain(queries, keys, values, kernel, mask, **kw).engine


def assert_same(got: np.ndarray, want: np.ndarray, rtol: float = 1e-12) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    scale = np.nanmax(np.abs(want)) if np.isfinite(want).any() else 1.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale)


@pytest.fixture
def data(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    keys = rng.random((700, 2))
    queries = rng.random((400, 2))
    values = rng.standard_normal((700, 2))
    return queries, keys, values


BANDWIDTHS = {
    "scalar": 0.08,
    "per-feature": np.array([0.06, 0.12]),
    "metric": np.array([[12.0, 4.0], [0.0, 9.0]]),
}


@pytest.mark.parametrize("kernel", COMPACT)
@pytest.mark.parametrize("bw", list(BANDWIDTHS))
def test_compact_kernels_match_dense(data, kernel: str, bw: str) -> None:  # type: ignore[no-untyped-def]
    q, k, v = data
    h = BANDWIDTHS[bw]
    assert chosen(q, k, v, kernel, bandwidth=h) == "neighbors"
    got = neighbors(q, k, v, kernel, bandwidth=h, empty="nan")
    assert_same(got, dense(q, k, v, kernel, bandwidth=h, empty="nan"))


@pytest.mark.parametrize("kernel", ["gaussian", "laplacian"])
@pytest.mark.parametrize("mask", [M.KNearest(7), M.Radius(0.09)], ids=["knearest", "radius"])
def test_unbounded_kernels_with_sparse_masks(data, kernel: str, mask: M.Mask) -> None:  # type: ignore[no-untyped-def]
    q, k, v = data
    assert chosen(q, k, v, kernel, mask, bandwidth=0.05) == "neighbors"
    got = neighbors(q, k, v, kernel, mask, bandwidth=0.05, empty="nan")
    assert_same(got, dense(q, k, v, kernel, mask, bandwidth=0.05, empty="nan"))


def test_knearest_and_leave_one_out(rng: np.random.Generator) -> None:
    x = rng.random((500, 3))
    y = rng.standard_normal(500)
    mask = M.KNearest(6) & M.LeaveOneOut()
    got = neighbors(x, x, y, "gaussian", mask, bandwidth=0.1)
    assert_same(got, dense(x, x, y, "gaussian", mask, bandwidth=0.1))
    # Each point's own value is left out: not the plain 6-nearest smooth.
    plain = neighbors(x, x, y, "gaussian", M.KNearest(6), bandwidth=0.1)
    assert np.abs(got - plain).max() > 1e-3


def test_sparse_matrix_mask(rng: np.random.Generator) -> None:
    q, k = rng.random((300, 2)), rng.random((900, 2))
    v = rng.standard_normal((900, 3))
    mat = sp.random(300, 900, density=0.01, random_state=np.random.RandomState(3), format="lil")
    mat[0, :] = 0  # an empty row
    mat[1, :200] = 1  # a long row
    mat = mat.tocsr()
    got = neighbors(q, k, v, "gaussian", mat, bandwidth=0.2, empty="nan")
    assert_same(got, dense(q, k, v, "gaussian", mat, bandwidth=0.2, empty="nan"))
    assert np.isnan(got[0]).all()
    # with a compact kernel both restrict the candidates
    got = neighbors(q, k, v, "epanechnikov", mat, bandwidth=0.3, empty="nan")
    assert_same(got, dense(q, k, v, "epanechnikov", mat, bandwidth=0.3, empty="nan"))


@pytest.mark.parametrize("mask", [
    M.Causal(), M.Radius(0.05), M.KNearest(9), M.KNearest(20) & M.LeaveOneOut(),
], ids=["causal", "radius", "knearest", "knearest-loo"])
def test_compact_kernel_with_masks(rng: np.random.Generator, mask: M.Mask) -> None:
    x = rng.random((600, 2))
    y = rng.standard_normal(600)
    got = neighbors(x, x, y, "tricube", mask, bandwidth=0.07, empty="nan")
    assert_same(got, dense(x, x, y, "tricube", mask, bandwidth=0.07, empty="nan"))


@pytest.mark.parametrize("kernel", [
    K.Epanechnikov(0.1).on([0]) * K.Tricube(0.15).on([1, 2]),
    K.Gaussian(0.3).on([0, 1]) * K.Uniform(0.05).on([2]),
], ids=["compact-product", "gaussian-times-uniform"])
def test_product_kernels(rng: np.random.Generator, kernel: K.Kernel) -> None:
    k = rng.random((800, 3))
    q = rng.random((300, 3))
    v = rng.standard_normal(800)
    assert chosen(q, k, v, kernel) == "neighbors"
    got = neighbors(q, k, v, kernel, empty="nan")
    assert_same(got, dense(q, k, v, kernel, empty="nan"))


def test_sum_kernel_is_refused_with_a_reason(data) -> None:  # type: ignore[no-untyped-def]
    q, k, v = data
    explanation = nadaraya.explain(q, k, v, K.Epanechnikov(0.1) + K.Tricube(0.1))
    assert explanation.engine != "neighbors"
    assert "pair form" in explanation.reasons["neighbors"]


@pytest.mark.parametrize("policy", ["nan", "nearest"])
def test_empty_rows_follow_the_policy(rng: np.random.Generator, policy: str) -> None:
    k = rng.random((400, 2))
    v = rng.standard_normal(400)
    q = np.vstack([rng.random((50, 2)), rng.random((5, 2)) + 3.0])  # 5 queries see nothing
    got = neighbors(q, k, v, "epanechnikov", bandwidth=0.1, empty=policy)
    want = dense(q, k, v, "epanechnikov", bandwidth=0.1, empty=policy)
    assert_same(got, want)
    assert np.isnan(got[-5:]).all() == (policy == "nan")


def test_empty_rows_raise_like_dense(rng: np.random.Generator) -> None:
    k = rng.random((400, 2))
    v = rng.standard_normal(400)
    q = np.vstack([rng.random((50, 2)), [[4.0, 4.0]]])
    with pytest.raises(NadarayaError, match="1 of 51 queries"):
        dense(q, k, v, "uniform", bandwidth=0.1)
    with pytest.raises(NadarayaError, match="1 of 51 queries"):
        neighbors(q, k, v, "uniform", bandwidth=0.1)


@pytest.mark.parametrize("n_neighbors", [1, 5, 16])
def test_uniform_knearest_is_scikit_learn_knn(rng: np.random.Generator,
                                               n_neighbors: int) -> None:
    from sklearn.neighbors import KNeighborsRegressor

    x = rng.random((1000, 2))
    y = rng.standard_normal(1000)
    q = rng.random((300, 2))
    want = KNeighborsRegressor(n_neighbors=n_neighbors).fit(x, y).predict(q)
    # a bandwidth wider than the data: every one of the k neighbours weighs 1
    args = (q, x, y, "uniform", M.KNearest(n_neighbors))
    assert chosen(*args, bandwidth=10.0) == "neighbors"
    np.testing.assert_allclose(nadaraya.smooth(*args, bandwidth=10.0), want, rtol=1e-12,
                               atol=1e-12)


def test_explain_prefers_neighbors_on_clustered_data(rng: np.random.Generator) -> None:
    centres = rng.random((20, 2)) * 100
    x = (centres[:, None, :] + rng.standard_normal((20, 50, 2))).reshape(-1, 2)
    y = rng.standard_normal(len(x))
    explanation = nadaraya.explain(x, x, y, "epanechnikov", bandwidth=1.5)
    assert explanation.engine == "neighbors"
    assert explanation.reasons["neighbors"].startswith("chosen")


def test_explain_says_why_gaussian_without_sparse_mask_is_refused(data) -> None:  # type: ignore[no-untyped-def]
    q, k, v = data
    explanation = nadaraya.explain(q, k, v, "gaussian", bandwidth=0.1)
    assert explanation.engine != "neighbors"
    assert "unbounded support" in explanation.reasons["neighbors"]
    assert "unbounded support" in str(explanation)
    with pytest.raises(NadarayaError, match="unbounded support"):
        neighbors(q, k, v, "gaussian", bandwidth=0.1)


def test_too_many_candidates_are_refused(data) -> None:  # type: ignore[no-untyped-def]
    q, k, v = data
    explanation = nadaraya.explain(q, k, v, "epanechnikov", bandwidth=0.8)
    assert explanation.engine != "neighbors"
    assert "scanning every key is faster" in explanation.reasons["neighbors"]
    explanation = nadaraya.explain(q, k, v, "gaussian", M.KNearest(400), bandwidth=0.8)
    assert "scanning every key is faster" in explanation.reasons["neighbors"]


def test_kernel_without_pair_form_is_refused(data) -> None:  # type: ignore[no-untyped-def]
    q, k, v = data
    kernel = K.CallableKernel(lambda a, b: -torch.cdist(a, b))
    why = nadaraya.explain(q, k, v, kernel, M.KNearest(5)).reasons["neighbors"]
    assert "pair form" in why


def test_inputs_requiring_grad_are_refused(data) -> None:  # type: ignore[no-untyped-def]
    q, k, v = data
    values = torch.tensor(v, requires_grad=True)
    why = nadaraya.explain(torch.tensor(q), torch.tensor(k), values, "uniform",
                           bandwidth=0.1).reasons["neighbors"]
    assert "grad" in why


def test_float32_within_float32_tolerance(data) -> None:  # type: ignore[no-untyped-def]
    q, k, v = data
    q32, k32, v32 = (a.astype(np.float32) for a in (q, k, v))
    want = dense(q, k, v, "epanechnikov", bandwidth=0.08)
    got = neighbors(q32, k32, v32, "epanechnikov", bandwidth=0.08)
    assert got.dtype == np.float32
    dense32 = dense(q32, k32, v32, "epanechnikov", bandwidth=0.08)
    err32 = np.abs(dense32 - want).max() / np.abs(want).max()
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err <= 16 * max(err32, EPS32)


def test_torch_in_torch_out(data) -> None:  # type: ignore[no-untyped-def]
    q, k, v = (torch.tensor(a) for a in data)
    got = neighbors(q, k, v, "tricube", bandwidth=0.1)
    assert isinstance(got, torch.Tensor)
    assert got.dtype == torch.float64 and got.shape == (400, 2)
    assert_same(got.numpy(), dense(q, k, v, "tricube", bandwidth=0.1).numpy())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_in_cuda_out(data) -> None:  # type: ignore[no-untyped-def]
    q, k, v = (torch.tensor(a, device="cuda") for a in data)
    got = neighbors(q, k, v, "tricube", M.KNearest(9) & M.LeaveOneOut(), bandwidth=0.1,
                    empty="nan")
    assert got.device.type == "cuda"
    want = dense(q.cpu(), k.cpu(), v.cpu(), "tricube", M.KNearest(9) & M.LeaveOneOut(),
                 bandwidth=0.1, empty="nan")
    assert_same(got.cpu().numpy(), want.numpy())


def test_lse_and_unnormalized_sums_match_dense(data) -> None:  # type: ignore[no-untyped-def]
    q, k, v = data
    out, lse = neighbors(q, k, v, "epanechnikov", bandwidth=0.1, return_lse=True)
    want, want_lse = dense(q, k, v, "epanechnikov", bandwidth=0.1, return_lse=True)
    assert_same(out, want)
    assert_same(lse, want_lse)
    got = neighbors(q, k, v, "gaussian", M.KNearest(5), bandwidth=0.1, normalize=False)
    assert_same(got, dense(q, k, v, "gaussian", M.KNearest(5), bandwidth=0.1,
                           normalize=False))


@pytest.mark.parametrize("case", ["ball", "table", "sparse"])
def test_tiny_working_memory_gives_the_same_result(rng: np.random.Generator,
                                                   case: str) -> None:
    k, q = rng.random((800, 2)), rng.random((500, 2))
    v = rng.standard_normal((800, 2))
    kernel, mask = {
        "ball": ("epanechnikov", None),
        "table": ("gaussian", M.KNearest(12)),
        "sparse": ("gaussian", sp.random(500, 800, density=0.03, format="csr",
                                         random_state=np.random.RandomState(0))),
    }[case]
    want = dense(q, k, v, kernel, mask, bandwidth=0.06, empty="nan")
    with nadaraya.config_context(working_memory=0.02):  # a few hundred pairs a chunk
        got = neighbors(q, k, v, kernel, mask, bandwidth=0.06, empty="nan")
    assert_same(got, want)


def test_clustered_queries_split_into_many_chunks(rng: np.random.Generator) -> None:
    # a dense clump of queries and keys next to a sparse field: uneven chunks
    k = np.vstack([rng.random((600, 2)), 0.5 + 0.01 * rng.random((400, 2))])
    q = np.vstack([rng.random((300, 2)), 0.5 + 0.01 * rng.random((300, 2))])
    v = rng.standard_normal(len(k))
    with nadaraya.config_context(working_memory=0.05):
        got = neighbors(q, k, v, "uniform", bandwidth=0.03, empty="nan")
    assert_same(got, dense(q, k, v, "uniform", bandwidth=0.03, empty="nan"))


def test_one_feature_and_exact_ties(rng: np.random.Generator) -> None:
    # keys on a grid with the support ending exactly on grid points
    k = np.arange(200, dtype=float)
    v = rng.standard_normal(200)
    q = np.arange(0, 200, 0.5)
    for kernel in COMPACT:
        got = neighbors(q, k, v, kernel, bandwidth=2.0, empty="nan")
        assert_same(got, dense(q, k, v, kernel, bandwidth=2.0, empty="nan"))


@given(
    m=st.integers(1, 25), n=st.integers(1, 25), d=st.integers(1, 3),
    h=st.floats(0.05, 2.0), kernel=st.sampled_from(COMPACT),
    seed=st.integers(0, 2**16),
)
def test_any_small_problem_matches_dense(m: int, n: int, d: int, h: float, kernel: str,
                                         seed: int) -> None:
    r = np.random.default_rng(seed)
    q, k, v = r.random((m, d)), r.random((n, d)), r.standard_normal((n, 2))
    with pytest.MonkeyPatch.context() as patch:
        # small problems are refused as too dense; run them anyway
        patch.setattr(_neighbors, "MAX_PAIR_FRACTION", 2.0)
        patch.setattr(_neighbors, "BALL_SHARE", 10.0)
        got = neighbors(q, k, v, kernel, bandwidth=h, empty="nan")
    assert_same(got, dense(q, k, v, kernel, bandwidth=h, empty="nan"))


def test_kernel_on_no_columns_with_a_neighbour_mask() -> None:
    """A kernel on no feature weighs every key alike: the mask's table alone decides."""
    from sklearn.neighbors import KNeighborsRegressor

    rng = np.random.default_rng(3)
    x = rng.random((300, 2))
    v = rng.standard_normal(300)
    kernel = K.Uniform(1.0).on([])
    got = neighbors(x, x, v, kernel, M.KNearest(4))
    want = KNeighborsRegressor(n_neighbors=4).fit(x, v).predict(x)
    assert_same(got, want)
    assert_same(got, dense(x, x, v, kernel, M.KNearest(4)))


@pytest.mark.parametrize("kernel", COMPACT)
@pytest.mark.parametrize("d", [1, 2])
def test_queries_near_the_float_limit_are_unreachable_not_an_overflow(kernel: str, d: int) -> None:
    # the KD-tree squares coordinate differences: a query at 1e200 overflowed it
    rng = np.random.default_rng(0)
    keys = rng.normal(size=(60, d))
    values = keys[:, 0]
    queries = np.zeros((3, d))
    queries[0, 0], queries[2, -1] = 1e200, -1e300
    assert chosen(queries, keys, values, kernel, bandwidth=0.5) == "neighbors"
    got = neighbors(queries, keys, values, kernel, bandwidth=0.5, empty="nan")
    assert_same(got, dense(queries, keys, values, kernel, bandwidth=0.5, empty="nan"))
    assert np.isnan(got[[0, 2]]).all() and np.isfinite(got[1])


def test_points_spread_over_the_float_range_find_their_neighbours() -> None:
    rng = np.random.default_rng(1)
    base = rng.normal(size=(40, 1))
    keys = np.concatenate([base * 1e300, base])
    values = np.concatenate([base[:, 0], -base[:, 0]])
    queries = np.array([[0.0], [1e300], [-5e299], [2e300], [-1e300], [7e299]])
    want = dense(queries, keys, values, "epanechnikov", bandwidth=2e299, empty="nan")
    assert_same(neighbors(queries, keys, values, "epanechnikov", bandwidth=2e299, empty="nan"),
                want)
