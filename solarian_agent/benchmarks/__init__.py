"""Benchmarks (``make bench`` / ``solarian-agent bench``).  Each module has ``run() -> rows``;
every row has name, value, unit and a baseline measured in the same run."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterable, Iterator
from typing import Any


@contextlib.contextmanager
def one_cv_thread() -> Iterator[None]:
    """Measure on one core: OpenCV held to a single thread for the duration."""
    import cv2

    threads = cv2.getNumThreads()
    cv2.setNumThreads(1)
    try:
        yield
    finally:
        cv2.setNumThreads(threads)

SUITES = {
    "harness": "solarian_agent.benchmarks.harness",
    "sim": "solarian_agent.benchmarks.sim",
    "tidy": "solarian_agent.benchmarks.tidy",
    "monitor": "solarian_agent.benchmarks.monitor",
    "hw": "solarian_agent.benchmarks.hw",
    "ros": "solarian_agent.ros.bench",  # real rclpy (make ros); the node graph as processes
    "recording": "solarian_agent.benchmarks.recording",
}


def format_table(rows: Iterable[dict[str, Any]]) -> str:
    rows = list(rows)
    cols = ["suite", "name", "value", "unit", "baseline", "note"]
    cells = [[_fmt(r.get(c, "")) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) if cells else len(c)
              for i, c in enumerate(cols)]
    line = "  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(out)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if v == 0 or 0.01 <= abs(v) < 1e6:
            return f"{v:,.3f}".rstrip("0").rstrip(".")
        return f"{v:.3g}"
    return str(v)


def run(names: list[str] | None = None, quick: bool = False,
        sims: tuple[str, ...] = ("2d",)) -> list[dict[str, Any]]:
    """Rows of the suites ``names`` (default all); suites that compare simulator backends get
    ``sims`` (``2d``, ``mujoco``)."""
    import inspect

    rows: list[dict[str, Any]] = []
    for name in names or list(SUITES):
        mod_name = SUITES.get(name)
        if mod_name is None:
            raise SystemExit(f"unknown benchmark suite {name!r}; suites: {', '.join(SUITES)}")
        try:
            mod = importlib.import_module(mod_name)
        except ModuleNotFoundError as e:
            rows.append({"suite": name, "name": "(not available)", "value": "",
                         "note": str(e)})
            continue
        kw: dict[str, Any] = {"quick": quick}
        if "sims" in inspect.signature(mod.run).parameters:
            kw["sims"] = sims
        for r in mod.run(**kw):
            rows.append({"suite": name, **r})
    return rows
