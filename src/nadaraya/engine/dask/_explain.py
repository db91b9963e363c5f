"""What ``explain()`` says about the Dask engine: the graph, and the engine of each block."""

from __future__ import annotations

from typing import Any

import torch

from ..._config import get_config
from .._dispatch import Explanation, choose
from ._graph import Graph, tree_depth
from ._partial import exponents, value_range
from ._tasks import block_job

__all__ = ["describe"]


def _sizes(chunks: tuple[int, ...]) -> str:
    lo, hi = min(chunks), max(chunks)
    return f"{len(chunks)} x {hi}" if lo == hi else f"{len(chunks)} of {lo}..{hi}"


def _representative(graph: Graph) -> tuple[str, Explanation | None]:
    """The in-memory dispatcher's verdict on the first query chunk against the first key chunk.

    Computes those two chunks (only them).
    """
    import dask

    inputs, spec = graph.inputs, graph.spec
    q, k, v = dask.compute(inputs.queries.blocks[0], inputs.keys.blocks[0],
                           inputs.values.blocks[0])
    bandwidth = graph.bandwidth_value()
    job = block_job(spec, q, k, v, torch.arange(q.shape[0]), 0, bandwidth,
                    exponents(value_range(v)[0]))
    if job is None:
        return "the mask hides the first block entirely", None
    if spec.tolerance is None:
        return "", choose(job, spec.engine)[1]
    from ..certified import choose_certified

    return "", choose_certified(job, spec.tolerance, spec.engine)[1]


def describe(graph: Graph, *, requested: str, lazy: bool) -> Explanation:
    """The explanation of a laid-out graph (see :func:`nadaraya.explain`)."""
    inputs, spec = graph.inputs, graph.spec
    qc, kc = inputs.queries.chunks[0], inputs.keys.chunks[0]
    d, p = int(inputs.queries.shape[1]), inputs.p
    item = spec.dtype.itemsize
    state_bytes = max(qc) * (p + 2) * item
    block_bytes = (max(qc) * d + max(kc) * (d + p)) * item + state_bytes
    budget = int(get_config().working_memory * 2**20)
    note, block = _representative(graph)
    block_engine = block.engine if block is not None else "none"
    why = ("chosen: Dask inputs" if lazy and requested in ("auto", "dask") else
           "chosen: requested by the caller (engine='dask')" if requested == "dask" else
           f"chosen: Dask inputs; each block runs engine={requested!r}")
    reasons = {"dask": why}
    if block is not None:
        reasons.update({name: f"per block: {text}" for name, text in block.reasons.items()})
    else:
        reasons["blocks"] = note
    certified = spec.tolerance is not None
    detail: dict[str, Any] = {
        "m": inputs.m, "n": inputs.n, "p": p, "dtype": str(spec.dtype).replace("torch.", ""),
        "kernel": block.detail.get("kernel") if block is not None and block.detail
        else repr(spec.kernel),
        "mask": repr(spec.mask) if spec.mask is not None else None,
        "query_chunks": _sizes(qc), "key_chunks": _sizes(kc),
        "tasks": len(graph.tasks), "stages": dict(graph.stages),
        "reduction_depth": tree_depth(len(kc), graph.fan_in), "fan_in": graph.fan_in,
        "bytes_per_block_task": block_bytes, "bytes_per_merge_task": graph.fan_in * state_bytes,
        "engine_working_memory": budget,
        "block_engine": block_engine + (" (first block; chosen per task)" if certified else
                                        " (first block; the dispatcher runs in each task)"),
    }
    if certified:
        detail["tolerance"] = spec.tolerance
        detail["method_choice"] = "per task, on its own block; unproven rows redone exactly"
    plan = dict(block.plan) if block is not None else {}
    return Explanation("dask", reasons, detail, plan)
