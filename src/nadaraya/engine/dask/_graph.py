"""The task graph: query chunks mapped, key chunks tree-reduced with the merge rule.

For query chunk ``i`` and key chunk ``j`` a block task computes a partial
result (an engine state, or a certified method's sums); the partial results
of row ``i`` merge in a tree of bounded fan-in (``split_every``, as in
``dask.array.reduction``), so every task holds at most one query chunk, one
key chunk and one state, or ``split_every`` states. The values' per-column
range and scale travel with the partial results (:mod:`._partial`), so no block waits
for a global value and each key chunk is released once its blocks are done.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..._errors import NadarayaError
from ._inputs import Inputs
from ._tasks import BlockSpec, finish_block, merge_all, nearest_block, pick

__all__ = ["SPLIT_EVERY", "Graph", "split_every", "tree_depth"]

SPLIT_EVERY = 8


def split_every() -> int:
    """The fan-in of the reductions: Dask's config ``nadaraya.split_every``, default 8."""
    import dask

    value = dask.config.get("nadaraya.split_every", SPLIT_EVERY)
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise NadarayaError(
            f"dask config nadaraya.split_every must be an integer >= 2; got {value!r}. "
            "Set it with dask.config.set({'nadaraya.split_every': 8})."
        )
    return value


def tree_depth(leaves: int, fan_in: int) -> int:
    """Levels of merge tasks that reduce ``leaves`` partial results with fan-in ``fan_in``."""
    return 0 if leaves <= 1 else math.ceil(math.log(leaves) / math.log(fan_in) - 1e-12)


def _done(_: Any) -> None:
    """The barrier between the two passes over the inputs (its arguments are only waited on)."""


def _rule(sd: np.ndarray, n: int, rule: str) -> np.ndarray:
    """Scott's or Silverman's bandwidth from the keys' standard deviations (as in memory)."""
    d = sd.shape[0]
    if n < 2 or bool((~(sd > 0)).any()):
        cols = np.flatnonzero(~(sd > 0)).tolist() if n > 1 else list(range(d))
        raise NadarayaError(
            f"a rule-of-thumb bandwidth needs spread in every feature; feature(s) {cols} of "
            "keys are constant (or there is a single key). Give bandwidth as a number instead."
        )
    factor = n ** (-1.0 / (d + 4))
    if rule == "silverman":
        factor *= (4.0 / (d + 2)) ** (1.0 / (d + 4))
    return np.asarray(sd, dtype=np.float64) * factor


@dataclass
class Graph:
    """The tasks of one ``smooth`` call, in one dictionary, with their stage counts.

    Attributes
    ----------
    inputs : Inputs
    spec : BlockSpec
    name : str
        Prefix of every key (a token of the inputs and options).
    tasks : dict
        The graph (legacy Dask task tuples).
    dependencies : list
        The Dask collections whose keys the tasks name.
    stages : dict of str to int
        Number of tasks per stage (block tasks, merges, finishing, ...).
    """

    inputs: Inputs
    spec: BlockSpec
    name: str
    tasks: dict[Any, Any] = field(default_factory=dict)
    dependencies: list[Any] = field(default_factory=list)
    stages: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.fan_in = split_every()
        self.q_offsets = self.inputs.offsets("queries")
        self.k_offsets = self.inputs.offsets("keys")
        self.dependencies = [self.inputs.queries, self.inputs.keys, self.inputs.values]
        self._again: tuple[Any, Any, Any] | None = None

    # -- references to the input chunks and the global values -----------------
    def _pass(self, again: bool) -> tuple[Any, Any, Any]:
        """The input arrays of the first pass over the keys, or of the second one.

        A stage that runs after a reduction over every key chunk (the exact
        redo of unproven rows, the nearest-key search of empty rows) reads the
        inputs a second time from their source
        (:func:`dask.graph_manipulation.bind`), and only once every first-pass
        reduction has ended (:meth:`second_pass`). Reading the chunks again
        keeps the first pass from holding every key chunk until its reduction
        ends; waiting keeps the scheduler from reading the second pass's
        chunks early, when nothing could consume them yet.
        """
        if not again:
            return self.inputs.queries, self.inputs.keys, self.inputs.values
        if self._again is None:
            raise RuntimeError("second_pass() lays out the second pass before its tasks")
        return self._again

    def second_pass(self, after: list[Any]) -> None:
        """Start the second pass over the inputs once the tasks ``after`` have run."""
        from dask.delayed import Delayed
        from dask.graph_manipulation import bind
        from dask.highlevelgraph import HighLevelGraph

        key = f"{self.name}-first-pass-done"
        tasks = {**self.tasks, key: (_done, after)}
        barrier = Delayed(key, HighLevelGraph.from_collections(key, tasks,
                                                                dependencies=self.dependencies))
        inputs = (self.inputs.queries, self.inputs.keys, self.inputs.values)
        self._again = bind(inputs, barrier, seed=self.name)
        self.dependencies.extend(self._again)

    def q(self, i: int, again: bool = False) -> tuple[str, int, int]:
        return (self._pass(again)[0].name, i, 0)

    def k(self, j: int, again: bool = False) -> tuple[str, int, int]:
        return (self._pass(again)[1].name, j, 0)

    def v(self, j: int, again: bool = False) -> tuple[str, int, int]:
        return (self._pass(again)[2].name, j, 0)

    def add(self, stage: str, key: Any, task: Any) -> Any:
        self.tasks[key] = task
        self.stages[stage] = self.stages.get(stage, 0) + 1
        return key

    def resolve_bandwidth(self, bandwidth: Any) -> None:
        """Lay out a bandwidth rule (``"scott"``, ``"silverman"``) as a task; keep anything else.

        The rule needs the spread of all keys before any block can be
        weighted. The spread is reduced over a clone of the keys
        (:func:`dask.graph_manipulation.clone`): its chunks are read a second
        time and dropped as soon as they are summed, so the block tasks never
        wait on every key chunk held in memory at once, and nothing is
        computed before the caller asks.
        """
        self.bandwidth: Any = bandwidth
        self.rule: str | None = None
        if isinstance(bandwidth, str) and bandwidth.lower() in ("scott", "silverman"):
            from dask.graph_manipulation import clone

            self.rule = bandwidth.lower()
            sd = clone(self.inputs.keys, seed=self.name).astype(np.float64).std(axis=0, ddof=1)
            self.dependencies.append(sd)
            self.bandwidth = self.add("bandwidth", (f"{self.name}-bandwidth",),
                                      (_rule, (sd.name, 0), self.inputs.n, self.rule))

    def bandwidth_value(self) -> Any:
        """The bandwidth as a value (a rule is computed now, on the current scheduler)."""
        if self.rule is None:
            return self.bandwidth
        import dask

        sd = dask.compute(self.inputs.keys.astype(np.float64).std(axis=0, ddof=1))[0]
        return _rule(np.asarray(sd), self.inputs.n, self.rule)

    # -- the reductions ----------------------------------------------------------
    def reduce(self, stage: str, leaves: list[Any], i: int,
               combine: Callable[[list[Any]], Any] = merge_all) -> Any:
        """Merge the partial results ``leaves`` of query chunk ``i`` in a tree; its root key."""
        level = 0
        while len(leaves) > 1:
            level += 1
            leaves = [
                self.add(f"{stage}-merge", (f"{self.name}-{stage}-merge-{level}", i, g),
                         (combine, leaves[s:s + self.fan_in]))
                for g, s in enumerate(range(0, len(leaves), self.fan_in))
            ]
        return leaves[0]

    def block_args(self, i: int, j: int, again: bool = False) -> tuple[Any, ...]:
        """Arguments every block task takes after the spec (and a state).

        ``again``: the chunks of the second pass over the inputs (see :meth:`_pass`).
        """
        return (self.q(i, again), self.k(j, again), self.v(j, again), self.q_offsets[i],
                self.k_offsets[j], self.bandwidth)

    def nearest(self, i: int, state: Any) -> Any:
        """A reduction over the key chunks finding the nearest keys of ``state``'s empty rows."""
        spec = self.spec
        leaves = [self.add("nearest", (f"{self.name}-nearest", i, j),
                           (nearest_block, spec, state, *self.block_args(i, j, again=True)))
                  for j in range(len(self.k_offsets))]
        return self.reduce("nearest", leaves, i)

    def outputs(self, states: list[Any]) -> tuple[Any, Any]:
        """The result and log-sum arrays from the merged state of every query chunk."""
        import dask.array as da
        from dask.highlevelgraph import HighLevelGraph

        out_name, lse_name = f"{self.name}-out", f"{self.name}-lse"
        searches = self.spec.normalize and self.spec.empty == "nearest"
        if searches:
            self.second_pass(states)
        for i, state in enumerate(states):
            near = self.nearest(i, state) if searches else None
            done = self.add("finish", (f"{self.name}-finish", i),
                            (finish_block, self.spec, state, near, self.q_offsets[i]))
            key = (out_name, i) if self.spec.squeeze else (out_name, i, 0)
            self.add("output", key, (pick, done, 0))
            self.add("output", (lse_name, i), (pick, done, 1))
        rows = self.inputs.queries.chunks[0]
        dtype = self.spec.out_dtype
        if self.spec.squeeze:
            chunks: tuple[Any, ...] = (rows,)
            meta = np.empty((0,), dtype=dtype)
        else:
            chunks = (rows, (self.inputs.p,))
            meta = np.empty((0, 0), dtype=dtype)
        arrays = []
        for name, shape, m in ((out_name, chunks, meta), (lse_name, (rows,),
                                                          np.empty((0,), dtype=dtype))):
            graph = HighLevelGraph.from_collections(name, self.tasks,
                                                    dependencies=self.dependencies)
            arrays.append(da.Array(graph, name, chunks=shape, dtype=dtype, meta=m))
        return arrays[0], arrays[1]
