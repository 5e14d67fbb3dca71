"""How fast the MuJoCo backend runs, against the 2D world in the same process.

* physics: simulated seconds per wall second of ``MujocoWorld.step`` with the arm sweeping
  back and forth (no cameras), beside the 2D world's;
* a two-camera tick: rendering the overhead and the wrist camera once, at the published sizes
  (640x480 and 480x360) and both at 640x480, beside the 2D renderer's.

``python -m solarian_agent.sim.mujoco.speed`` prints the figures as JSON.  Run with
``--one-core`` it first pins itself to one CPU and holds Mesa's rasteriser and OpenCV to one
thread (set before the GL context exists): the benchmark runs it that way in a child process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any


def _pin_one_core() -> None:
    os.environ["LP_NUM_THREADS"] = "1"  # Mesa llvmpipe's rasteriser threads
    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[-1]})


def _time_per_call(fn: Callable[[], Any], seconds: float, min_n: int = 10) -> float:
    fn()  # warm-up
    times = []
    t_end = time.perf_counter() + seconds
    while len(times) < min_n or time.perf_counter() < t_end:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(seconds: float = 1.0) -> dict[str, Any]:
    """The figures (milliseconds per tick / real-time factors) as plain data."""
    import cv2

    from solarian_agent.arm.kinematics import ArmModel
    from solarian_agent.sim.benchmark import arm_sweep
    from solarian_agent.sim.camera import OVERHEAD, WRIST
    from solarian_agent.sim.render import Renderer
    from solarian_agent.sim.world import World

    from .render import MujocoRenderer
    from .world import MujocoWorld

    if os.environ.get("LP_NUM_THREADS") == "1":
        cv2.setNumThreads(1)
    arm = ArmModel.default()
    flat, deep = World(arm, seed=1), MujocoWorld(arm, seed=1)
    step_2d = _time_per_call(arm_sweep(flat), seconds, 50)
    step_3d = _time_per_call(arm_sweep(deep), seconds, 50)
    out: dict[str, Any] = {
        "physics_rt_2d": 0.02 / step_2d, "physics_rt_mujoco": 0.02 / step_3d,
        "physics_steps_per_s_mujoco": 0.02 / step_3d / deep.model.opt.timestep,
        "lp_num_threads": os.environ.get("LP_NUM_THREADS", ""),
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0,
    }
    square = (OVERHEAD, replace(WRIST, width=640, height=480, cx=320.0, cy=240.0))
    for label, cams in (("640x480", square), ("published", (OVERHEAD, WRIST))):
        r3 = MujocoRenderer(arm, cameras=cams)
        r2 = Renderer(arm, cameras=cams)
        try:
            out[f"tick_ms_mujoco_{label}"] = 1000 * _time_per_call(
                lambda r=r3: r.render_all(deep), seconds)  # type: ignore[misc]
            out[f"tick_ms_2d_{label}"] = 1000 * _time_per_call(
                lambda r=r2: r.render_all(flat), seconds)  # type: ignore[misc]
        finally:
            r3.close()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m solarian_agent.sim.mujoco.speed")
    p.add_argument("--one-core", action="store_true", help="one CPU, one rasteriser thread")
    p.add_argument("--seconds", type=float, default=1.0, help="per measurement")
    a = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    if a.one_core:
        _pin_one_core()
    print(json.dumps(measure(a.seconds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
