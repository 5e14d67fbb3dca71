"""Simulator benchmark suite (see solarian_agent.sim.benchmark); with ``mujoco`` in ``sims``
also the MuJoCo backend's speed against the 2D world (benchmarks.backends.speed_rows)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def run(quick: bool = False, sims: Sequence[str] = ("2d",)) -> list[dict[str, Any]]:
    from solarian_agent.sim.benchmark import measure

    from . import one_cv_thread

    rows: list[dict[str, Any]] = []
    if "2d" in sims:
        with one_cv_thread():
            rows = measure(quick)
    if "mujoco" in sims:
        from .backends import speed_rows

        rows += speed_rows(seconds=0.5 if quick else 1.5)
    return rows


__all__ = ["run"]
