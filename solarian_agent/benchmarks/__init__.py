"""Benchmarks (``make bench`` / ``solarian-agent bench``).  Each module has ``run() -> rows``;
every row has name, value, unit and a baseline measured in the same run."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterable, Iterator
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
    "policy": "solarian_agent.benchmarks.policy",
    "cost": "solarian_agent.benchmarks.cost",
    "monitor": "solarian_agent.benchmarks.monitor",
    "hw": "solarian_agent.benchmarks.hw",
    "ros": "solarian_agent.ros.bench",  # real rclpy (make ros); the node graph as processes
    "recording": "solarian_agent.benchmarks.recording",
    "routing": "solarian_agent.benchmarks.routing",
    # reads the last `make mutate` report (runs nothing; "not run" without one)
    "mutate": "solarian_agent.benchmarks.mutate",
}


COLUMNS = ("suite", "name", "value", "unit", "baseline", "note")
_WRAPPED = {"name": 18, "baseline": 14, "note": 14}  # wrappable columns: their least width


def format_table(rows: Iterable[dict[str, Any]], width: int = 100) -> str:
    """The rows as a text table at most ``width`` columns wide: the name, baseline and note
    columns wrap (the widest first narrowed) when the natural widths do not fit."""
    import textwrap

    rows = list(rows)
    cols = list(COLUMNS)
    cells = [[" ".join(_fmt(r.get(c, "")).split()) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) if cells else len(c)
              for i, c in enumerate(cols)]
    budget = width - 2 * (len(cols) - 1)
    while sum(widths) > budget:
        shrinkable = [i for i, c in enumerate(cols)
                      if c in _WRAPPED and widths[i] > _WRAPPED[c]]
        if not shrinkable:
            break
        i = max(shrinkable, key=lambda k: widths[k])
        widths[i] -= 1

    def lines_of(row: list[str]) -> list[str]:
        parts = [textwrap.wrap(v, w, break_long_words=True, break_on_hyphens=False) or [""]
                 if cols[i] in _WRAPPED else [v] for i, (v, w) in
                 enumerate(zip(row, widths, strict=True))]
        out = []
        for k in range(max(len(p) for p in parts)):
            out.append("  ".join((p[k] if k < len(p) else "").ljust(w)
                                 for p, w in zip(parts, widths, strict=True)).rstrip())
        return out

    out = [lines_of(cols)[0], "  ".join("-" * w for w in widths)]
    for row in cells:
        out += lines_of(row)
    return "\n".join(out)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if v == 0 or 0.01 <= abs(v) < 1e6:
            return f"{v:,.3f}".rstrip("0").rstrip(".")
        return f"{v:.3g}"
    return str(v)


def run(names: list[str] | None = None, quick: bool = False,
        sims: tuple[str, ...] = ("2d",),
        progress: Callable[[str], None] | None = None, jobs: int = 1
        ) -> list[dict[str, Any]]:
    """Rows of the suites ``names`` (default all); suites that compare simulator backends get
    ``sims`` (``2d``, ``mujoco``).  ``progress`` is told as each suite starts and ends."""
    import inspect
    import time

    chosen = names or list(SUITES)
    unknown = [n for n in chosen if n not in SUITES]
    if unknown:
        raise ValueError(f"unknown benchmark suite {unknown[0]!r}; suites: {', '.join(SUITES)}")
    rows: list[dict[str, Any]] = []
    for k, name in enumerate(chosen, 1):
        say = progress or (lambda _line: None)
        say(f"[{k}/{len(chosen)}] {name} ...")
        t0 = time.monotonic()
        try:
            mod = importlib.import_module(SUITES[name])
        except ModuleNotFoundError as e:
            rows.append({"suite": name, "name": "(not available)", "value": "",
                         "note": str(e)})
            say(f"[{k}/{len(chosen)}] {name}: not available ({e})")
            continue
        kw: dict[str, Any] = {"quick": quick}
        params = inspect.signature(mod.run).parameters
        if "sims" in params:
            kw["sims"] = sims
        if "jobs" in params:
            kw["jobs"] = jobs
        got = [{"suite": name, **r} for r in mod.run(**kw)]
        rows += got
        say(f"[{k}/{len(chosen)}] {name}: {len(got)} rows in {time.monotonic() - t0:.1f} s")
    return rows
