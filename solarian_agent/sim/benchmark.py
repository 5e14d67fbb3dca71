"""Simulator benchmark (DESIGN.md §5: "fast enough to evaluate hundreds of tidy-up episodes
per minute on one core").

Rows: world steps per second, renders per second per camera, and ideal-controller tidy-up
episodes per minute, without cameras and with both cameras rendered at their rates and
published on the in-process bus; plus the ideal controller's success rate, steps and path
length (experiment 6-11), clean and with injected recoverable grasp faults.  The ``sim`` suite
holds OpenCV to one thread while it measures, so the figures are for one core.  Baselines:
real time (50 steps/s, 10 Hz cameras) and the design's target of hundreds of episodes per
minute.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np

from solarian_agent.arm.kinematics import ArmModel
from solarian_agent.core.clock import FakeClock
from solarian_agent.core.transport import Bus

from .component import SimRates, SimWorldComponent
from .faults import FaultConfig, FaultInjector
from .ideal import EpisodeResult, IdealController, run_ideal_episode
from .render import Renderer, VisualStyle
from .world import World

TARGET_EPISODES_PER_MIN = 200.0


def _rate(fn: Any, seconds: float, min_n: int = 20) -> float:
    fn()  # warm-up: caches (static layers, light masks, noise banks) are built once
    n = 0
    t0 = time.perf_counter()
    while True:
        fn()
        n += 1
        dt = time.perf_counter() - t0
        if n >= min_n and dt >= seconds:
            return n / dt


def arm_sweep(world: Any, dt: float = 0.02) -> Any:
    """A step function that sweeps ``world``'s arm back and forth (a speed test's load)."""
    flip = [1.0]

    def step() -> None:
        if world.settled():
            flip[0] = -flip[0]
            world.command([0.8 * flip[0], 0.6, 0.4 * flip[0], 0.5, flip[0], 0.05])
        world.step(dt)

    world.command([0.8, 0.6, 0.4, 0.5, 1.0, 0.05])
    return step


def _episodes(world: World, seeds: range, step: Any = None,
              reset: Any = None) -> tuple[list[EpisodeResult], float]:
    out = []
    t0 = time.perf_counter()
    for seed in seeds:
        if reset is not None:
            reset(seed)
            out.append(IdealController(world, step=step).run())
        else:
            out.append(run_ideal_episode(world, seed, step=step))
    return out, time.perf_counter() - t0


def measure(quick: bool = False) -> list[dict[str, Any]]:
    """The rows; the ``sim`` suite (:mod:`solarian_agent.benchmarks.sim`) runs this with OpenCV
    held to one thread (the simulator never imports the benchmarks: they sit above it)."""
    span = 0.5 if quick else 1.5
    n_eps = 20 if quick else 100
    arm = ArmModel.from_urdf()
    rows: list[dict[str, Any]] = []

    world = World(arm, seed=0)
    step = arm_sweep(world)

    rows.append({"name": "world steps per second", "value": round(_rate(step, span)),
                 "unit": "steps/s", "baseline": "50 steps/s (real time at 20 ms)"})

    world.reset(1)
    renderer = Renderer(arm)
    shifted = Renderer(arm, VisualStyle.randomized(1, background=True, appearance=True,
                                                   lighting=True, noise=True))
    for cam in renderer.cameras:
        rows.append({"name": f"{cam} renders per second", "value": round(
            _rate(lambda c=cam: renderer.render(c, world), span)), "unit": "frames/s",
            "baseline": "10 frames/s (camera rate)"})
        rows.append({"name": f"{cam} renders per second, domain-shifted style",
                     "value": round(_rate(lambda c=cam: shifted.render(c, world), span)),
                     "unit": "frames/s", "baseline": "10 frames/s (camera rate)"})

    clean, wall = _episodes(World(arm), range(n_eps))
    rows.append({"name": "ideal tidy-up episodes per minute, no cameras",
                 "value": round(60 * len(clean) / wall), "unit": "episodes/min",
                 "baseline": f"{TARGET_EPISODES_PER_MIN:.0f}/min (hundreds per minute)"})

    bus = Bus()
    cam_world = World(arm)
    comp = SimWorldComponent(bus, FakeClock(), cam_world, Renderer(arm), SimRates())
    with_cams, wall_c = _episodes(cam_world, range(max(5, n_eps // 4)), step=comp.step,
                                  reset=comp.reset)
    frames = sum(comp.frames_published.values())
    rows.append({"name": "ideal tidy-up episodes per minute, cameras at 10 Hz on the bus",
                 "value": round(60 * len(with_cams) / wall_c), "unit": "episodes/min",
                 "baseline": f"{TARGET_EPISODES_PER_MIN:.0f}/min (hundreds per minute)",
                 "note": f"{frames / len(with_cams):.0f} frames per episode"})

    rows.append(_success_row("ideal controller success (reference: reads the truth)", clean))
    steps = [r.steps for r in clean]
    rows.append({"name": "ideal controller steps per episode",
                 "value": round(statistics.mean(steps), 1), "unit": "steps",
                 "baseline": "", "note": f"min {min(steps)} / max {max(steps)} at 20 ms"})
    rows.append({"name": "ideal controller tip path per episode",
                 "value": round(statistics.mean(r.path_length_m for r in clean), 3),
                 "unit": "m", "baseline": "",
                 "note": f"sd {np.std([r.path_length_m for r in clean]):.3f} m"})

    faults = FaultConfig(grasp_fail_p=0.3, slip_p=0.2)
    faulty, _ = _episodes(World(arm, faults=FaultInjector(faults)), range(n_eps))
    row = _success_row("ideal controller success, grasp faults (fail 30 %, slip 20 %)", faulty)
    row["note"] += f"; {statistics.mean(r.retries for r in faulty):.2f} retries per episode"
    rows.append(row)
    return rows


def _success_row(name: str, results: list[EpisodeResult]) -> dict[str, Any]:
    ok = sum(r.success for r in results)
    return {"name": name, "value": round(100.0 * ok / len(results), 1), "unit": "%",
            "baseline": "100 % (perfect perception and decisions)",
            "note": f"{ok}/{len(results)} seeds"}
