"""The Dask engine: the operator on Dask arrays, on any Dask scheduler or cluster.

``smooth`` with a Dask array among its inputs (or ``engine="dask"``) builds a
graph in which query chunks map and key chunks tree-reduce through the
merge rule of the engine state (:mod:`._graph`); each block task runs the
in-memory engine on one query chunk and one key chunk (:mod:`._tasks`). With
``tolerance=`` the blocks return certified sums, checked and redone per
query chunk (:mod:`._certified`). Dask is imported only here, on first use.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._config import get_config
from ..._errors import NadarayaError
from ...masks import get_mask
from .._dispatch import Explanation
from ..unnormalized import is_signed
from ._detect import any_dask, import_dask, is_dask
from ._graph import Graph
from ._inputs import prepare_inputs
from ._kernels import check_kernel
from ._masks import check_mask
from ._tasks import BlockSpec, block_state

__all__ = ["any_dask", "dask_explain", "dask_smooth", "is_dask"]


def _graph(queries: Any, keys: Any, values: Any, kernel: Any, mask: Any, bandwidth: Any,
           engine: str, return_lse: bool, empty: str, normalize: bool,
           tolerance: float | None) -> Graph:
    """Check everything that can be checked without the data, and lay out the graph."""
    from dask.base import tokenize

    inputs = prepare_inputs(queries, keys, values)
    kern = check_kernel(kernel, bandwidth)
    if return_lse and is_signed(kern):
        raise NadarayaError(
            f"return_lse=True needs positive weights, but kernel {kern!r} is signed (its row "
            "sums can be zero or negative). Drop return_lse, or smooth a column of ones with "
            "normalize=False to get the row sums themselves."
        )
    bound_mask = get_mask(mask)
    check_mask(bound_mask, inputs.m, inputs.n)
    if tolerance is not None and is_signed(kern):
        tolerance = None  # no certified method takes a signed kernel: the exact sums run
    block_engine = "auto" if engine in ("auto", "dask") else engine
    spec = BlockSpec(kernel, bound_mask, inputs.m, inputs.n, inputs.dtype, inputs.out_dtype,
                     bool(normalize), block_engine, empty, inputs.squeeze, tolerance,
                     bool(return_lse), get_config().working_memory)
    token = tokenize(inputs.queries, inputs.keys, inputs.values, spec, bandwidth)
    graph = Graph(inputs, spec, f"nadaraya-smooth-{token}")
    graph.resolve_bandwidth(bandwidth)
    return graph


def _states(graph: Graph) -> list[Any]:
    """The merged state of each query chunk (exact, or certified then checked)."""
    if graph.spec.tolerance is not None:
        from ._certified import add_certified

        return add_certified(graph)
    states = []
    for i in range(len(graph.q_offsets)):
        leaves = [graph.add("block", (f"{graph.name}-block", i, j),
                            (block_state, graph.spec, *graph.block_args(i, j)))
                  for j in range(len(graph.k_offsets))]
        states.append(graph.reduce("block", leaves, i))
    return states


def dask_smooth(queries: Any, keys: Any, values: Any, kernel: Any, mask: Any, *,
                bandwidth: Any, engine: str, return_lse: bool, empty: str, normalize: bool,
                tolerance: float | None) -> Any:
    """:func:`nadaraya.smooth` on Dask: a lazy Dask array (in-memory inputs: the caller's kind).

    Parameters and returns are those of :func:`nadaraya.smooth`; ``engine``
    names the in-memory engine of each block task (``"auto"`` or ``"dask"``:
    the dispatcher chooses per block).
    """
    import_dask()
    lazy = any_dask(queries, keys, values)
    graph = _graph(queries, keys, values, kernel, mask, bandwidth, engine, return_lse, empty,
                   normalize, tolerance)
    out, lse = graph.outputs(_states(graph))
    if not lazy:
        import dask

        out, lse = dask.compute(out, lse)
        out, lse = _as_caller(out, values), _as_caller(lse, values)
    return (out, lse) if return_lse else out


def _as_caller(x: np.ndarray, like: Any) -> Any:
    """A computed result as the caller's kind (a tensor where the values were one)."""
    import torch

    from ..._validation import kind_of, to_caller

    return to_caller(torch.from_numpy(np.ascontiguousarray(x)), kind_of(like))


def dask_explain(queries: Any, keys: Any, values: Any, kernel: Any, mask: Any, *,
                 bandwidth: Any, engine: str, normalize: bool,
                 tolerance: float | None) -> Explanation:
    """:func:`nadaraya.explain` for the Dask engine: the graph, and each block's engine."""
    from ._explain import describe

    graph = _graph(queries, keys, values, kernel, mask, bandwidth, engine, False, "nan",
                   normalize, tolerance)
    states = _states(graph)
    graph.outputs(states)
    return describe(graph, requested=engine, lazy=any_dask(queries, keys, values))
