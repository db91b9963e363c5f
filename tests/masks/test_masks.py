"""Masks against their predicates written out independently."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from nadaraya import NadarayaError
from nadaraya import masks as M
from nadaraya.masks import Problem, Visibility

rng = np.random.default_rng(0)
m, n = 13, 17
QUERIES = torch.tensor(rng.random((m, 2)))
KEYS = torch.tensor(rng.random((n, 2)))
DIST = np.sqrt(((QUERIES.numpy()[:, None, :] - KEYS.numpy()[None, :, :]) ** 2).sum(-1))
RANDOM = rng.random((m, n)) < 0.4


def _index(fn: Callable[[int, int], bool]) -> np.ndarray:
    return np.array([[fn(i, j) for j in range(n)] for i in range(m)])


def _knearest(k: int) -> np.ndarray:
    out = np.zeros((m, n), dtype=bool)
    for i in range(m):
        out[i, np.argsort(DIST[i])[:k]] = True
    return out


MASKS: dict[str, tuple[Callable[[], M.Mask], np.ndarray]] = {
    "causal": (lambda: M.Causal(), _index(lambda i, j: j <= i)),
    "causal+5": (lambda: M.Causal(offset=5), _index(lambda i, j: j <= i + 5)),
    "causal-3": (lambda: M.Causal(offset=-3), _index(lambda i, j: j <= i - 3)),
    "window0": (lambda: M.Window(0), _index(lambda i, j: i == j)),
    "window3": (lambda: M.Window(3), _index(lambda i, j: abs(i - j) <= 3)),
    "loo": (lambda: M.LeaveOneOut(), _index(lambda i, j: i != j)),
    "radius": (lambda: M.Radius(0.35), DIST <= 0.35),
    "knearest": (lambda: M.KNearest(4), _knearest(4)),
    "knearest-all": (lambda: M.KNearest(50), np.ones((m, n), dtype=bool)),
    "dense": (lambda: M.MatrixMask(RANDOM), RANDOM),
    "dense-torch": (lambda: M.MatrixMask(torch.tensor(RANDOM)), RANDOM),
    "sparse": (lambda: M.MatrixMask(sp.csr_matrix(RANDOM)), RANDOM),
    "sparse-coo-int": (lambda: M.MatrixMask(sp.coo_matrix(RANDOM.astype(int))), RANDOM),
    "predicate": (lambda: M.Predicate(lambda i, j: (i * j) % 4 == 1),
                  _index(lambda i, j: (i * j) % 4 == 1)),
    "and": (lambda: M.Causal() & M.Window(2), _index(lambda i, j: i - 2 <= j <= i)),
    "or": (lambda: M.Causal(offset=-4) | M.Window(1), _index(lambda i, j: j <= i - 4
                                                               or abs(i - j) <= 1)),
    "knearest&loo": (lambda: M.KNearest(3) & M.LeaveOneOut(),
                     _knearest(3) & _index(lambda i, j: i != j)),
    "loo&radius": (lambda: M.LeaveOneOut() & M.Radius(0.5),
                   _index(lambda i, j: i != j) & (DIST <= 0.5)),
    "knearest|radius": (lambda: M.KNearest(2) | M.Radius(0.2), _knearest(2) | (DIST <= 0.2)),
    "sparse|causal": (lambda: M.MatrixMask(sp.csr_matrix(RANDOM)) | M.Causal(),
                      RANDOM | _index(lambda i, j: j <= i)),
    "nested": (lambda: (M.Causal() | M.KNearest(2)) & M.Predicate(lambda i, j: (i + j) % 2 == 0),
               (_index(lambda i, j: j <= i) | _knearest(2)) & _index(lambda i, j: (i + j) % 2
                                                                     == 0)),
}


def _bind(mask: M.Mask) -> M.BoundMask:
    return mask.bind(Problem(m, n, QUERIES, KEYS))


_SLICES = [(slice(0, m), slice(0, n)), (slice(2, 7), slice(0, 4)), (slice(5, 6), slice(5, 6)),
           (slice(0, 3), slice(10, 17)), (slice(9, 13), slice(1, 9)), (slice(4, 9), slice(4, 9))]


@pytest.mark.parametrize("name", list(MASKS))
def test_blocks_match_the_predicate(name: str) -> None:
    make, expect = MASKS[name]
    bound = _bind(make())
    for rows, cols in _SLICES:
        block = bound.block(rows, cols)
        assert block.dtype == torch.bool
        np.testing.assert_array_equal(block.numpy(), expect[rows, cols], err_msg=str((rows,
                                                                                     cols)))


@pytest.mark.parametrize("name", list(MASKS))
def test_status_is_sound(name: str) -> None:
    make, expect = MASKS[name]
    bound = _bind(make())
    for r0 in range(m):
        for c0 in range(0, n, 3):
            for size in ((1, 1), (3, 4), (5, 2)):
                rows, cols = slice(r0, min(r0 + size[0], m)), slice(c0, min(c0 + size[1], n))
                status = bound.status(rows, cols)
                sub = expect[rows, cols]
                if status is Visibility.FULL:
                    assert sub.all()
                elif status is Visibility.EMPTY:
                    assert not sub.any()
                # For the index masks the status is exact.
                if name in ("causal", "causal+5", "causal-3", "window0", "window3", "loo",
                            "and"):
                    exact = (Visibility.FULL if sub.all() else
                             Visibility.EMPTY if not sub.any() else Visibility.PARTIAL)
                    assert status is exact, (rows, cols)


@pytest.mark.parametrize("name", list(MASKS))
def test_pairs_match_the_predicate(name: str) -> None:
    make, expect = MASKS[name]
    bound = _bind(make())
    rows = torch.tensor(rng.integers(0, m, 8))
    index = torch.tensor(rng.integers(0, n, (8, 6)))
    got = bound.pairs(rows, index)
    np.testing.assert_array_equal(got.numpy(), expect[rows.numpy()[:, None], index.numpy()])
    # the expanded (non-contiguous) index the engines pass
    full = torch.arange(n).expand(len(rows), -1)
    np.testing.assert_array_equal(bound.pairs(rows, full).numpy(), expect[rows.numpy()])


# KNearest(k >= n_keys) hides nothing: a dense mask, with no lists.
_SPARSE = ("radius", "knearest", "sparse", "sparse-coo-int", "knearest&loo", "loo&radius",
           "knearest|radius")


@pytest.mark.parametrize("name", list(MASKS))
def test_candidates_are_the_visible_keys(name: str) -> None:
    make, expect = MASKS[name]
    cand = _bind(make()).candidates()
    if name not in _SPARSE:
        assert cand is None
        return
    assert cand is not None
    index, valid = cand.table()
    assert index.dtype == torch.int64 and valid.dtype == torch.bool
    assert index.shape == valid.shape == (m, cand.width)
    assert cand.count >= int(expect.sum())
    for i in range(m):
        keys = index[i][valid[i]].tolist()
        assert len(keys) == len(set(keys)), "a key listed twice"
        assert sorted(keys) == np.flatnonzero(expect[i]).tolist()
    # any block of queries, in any order, gives the same lists
    rows = torch.tensor([5, 0, 12, 5])
    part, seen = cand.rows(rows)
    for r, i in enumerate(rows.tolist()):
        assert sorted(part[r][seen[r]].tolist()) == np.flatnonzero(expect[i]).tolist()


def test_knearest_agrees_with_scikit_learn() -> None:
    from sklearn.neighbors import NearestNeighbors

    idx = NearestNeighbors(n_neighbors=5).fit(KEYS.numpy()).kneighbors(QUERIES.numpy())[1]
    index, _ = _bind(M.KNearest(5)).candidates().table()
    np.testing.assert_array_equal(np.sort(index.numpy(), 1), np.sort(idx, 1))


def test_candidates_from_whole_tables() -> None:
    index = torch.tensor([[3, 1, 0], [2, 2, 4]])
    valid = torch.tensor([[True, True, False], [True, False, True]])
    cand = M.Candidates.from_table(index, valid)
    assert (cand.n_rows, cand.width, cand.count, cand.all_valid) == (2, 3, 4, False)
    got_index, got_valid = cand.rows(torch.tensor([1, 0, 1]))
    assert got_index.tolist() == [[2, 2, 4], [3, 1, 0], [2, 2, 4]]
    assert got_valid.tolist() == [[True, False, True], [True, True, False], [True, False, True]]
    empty = M.MatrixMask(sp.csr_matrix((3, 3), dtype=bool)).bind(
        Problem(3, 3, QUERIES[:3], KEYS[:3])).candidates()
    index, valid = empty.table()
    assert index.shape == (3, empty.width) and not bool(valid.any()) and empty.count == 0


def test_get_mask_accepts_every_form() -> None:
    assert M.get_mask(None) is None
    causal = M.Causal()
    assert M.get_mask(causal) is causal
    assert isinstance(M.get_mask("causal"), M.Causal)
    assert isinstance(M.get_mask("Leave-One-Out"), M.LeaveOneOut)
    assert isinstance(M.get_mask("loo"), M.LeaveOneOut)
    assert isinstance(M.get_mask(RANDOM), M.MatrixMask)
    assert isinstance(M.get_mask(RANDOM.tolist()), M.MatrixMask)
    assert isinstance(M.get_mask(torch.tensor(RANDOM)), M.MatrixMask)
    assert M.get_mask(sp.csr_matrix(RANDOM)).sparse
    assert isinstance(M.get_mask(lambda i, j: j <= i), M.Predicate)
    with pytest.raises(NadarayaError, match="mask 'window' is not known"):
        M.get_mask("window")
    with pytest.raises(NadarayaError, match="mask must be a Mask"):
        M.get_mask(3)


def test_sparse_stored_zeros_are_hidden() -> None:
    mat = sp.csr_matrix((np.array([1.0, 0.0, 2.0]), (np.array([0, 1, 2]), np.array([0, 1, 2]))),
                        shape=(3, 3))
    bound = M.MatrixMask(mat).bind(Problem(3, 3, QUERIES[:3], KEYS[:3]))
    np.testing.assert_array_equal(bound.block(slice(0, 3), slice(0, 3)).numpy(),
                                  np.diag([True, False, True]))
    cand = bound.candidates()
    assert int(cand.table()[1].sum()) == 2 == cand.count


def test_shape_is_checked_on_binding() -> None:
    with pytest.raises(NadarayaError, match=r"mask must have shape \(n_queries, n_keys\)"):
        _bind(M.MatrixMask(RANDOM[:, :-1]))
    with pytest.raises(NadarayaError, match=r"mask must have shape"):
        _bind(M.MatrixMask(sp.csr_matrix(RANDOM.T)))


def test_repr() -> None:
    assert repr(M.Causal(offset=2)) == "Causal(offset=2)"
    assert repr(M.Causal() & M.Window(3)) == "(Causal() & Window(3))"
    assert repr(M.KNearest(3) | M.Radius(0.5)) == "(KNearest(3) | Radius(0.5))"
