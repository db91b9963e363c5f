"""The fused engine (placeholder until implemented)."""

from __future__ import annotations

from ._job import Job
from ._state import SmoothState


class FusedEngine:
    name = "fused"

    def refuse(self, job: Job) -> str | None:
        return "not implemented yet"

    def cost(self, job: Job) -> float:
        return float("inf")

    def run(self, job: Job) -> SmoothState:
        raise NotImplementedError
