"""The simulator backends side by side (the ``tidy`` and ``sim`` suites' ``--sim`` rows).

* The full harness — the ``rules`` planner, the skills and the executor on the bus, through
  :func:`~solarian_agent.system.build_sim_system` — on the same seeds with the same injected
  grasp faults over each backend: success (the planner's claim confirmed by its own fresh
  ``verify_state``; the note says how often the simulator's truth agrees), planner turns and
  wall seconds per episode.  The 2D world is every other backend's baseline.
* Domain shift in 3D: the same harness over MuJoCo under ``SceneStyle.randomized`` regimes
  (lighting, textures, camera pose jitter, all three) against the default look: success and
  perception accuracy (each thing's first detected table position within 15 mm of the truth,
  unprojected at the heights the skills use).
* Speed (``sim`` suite): MuJoCo physics in simulated seconds per wall second and a two-camera
  tick in milliseconds, each beside the 2D world's in the same run, measured in a child process
  held to one CPU and one rasteriser thread (:mod:`solarian_agent.sim.mujoco.speed`).

A backend that cannot start here (no ``mujoco`` package, no OpenGL) gives one row saying why.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.errors import CoreError
from ..sim.faults import FaultConfig

REGIMES_3D: dict[str, dict[str, bool]] = {
    "default": {},
    "lighting": {"lighting": True},
    "textures": {"textures": True},
    "camera": {"camera": True},
    "all": {"lighting": True, "textures": True, "camera": True},
}
PERCEPTION_TOL_M = 0.015
THINGS = ("red_cup", "yellow_paper", "tray", "bin")
PHYSICS_TARGET_RT = 10.0
TICK_TARGET_MS = 100.0


def _mean(xs: Sequence[float]) -> float:
    return statistics.mean(xs) if xs else 0.0


def _pct(k: int, n: int) -> float:
    return round(100.0 * k / n, 1) if n else 0.0


def unavailable(sim: str, why: str) -> dict[str, Any]:
    return {"name": f"backend {sim}: (not available)", "value": "", "unit": "",
            "baseline": "", "note": why[:300]}


def run_backend(sim: str, seeds: Sequence[int], faults: FaultConfig,
                style_for: Any = None) -> list[dict[str, Any]]:
    """Harness episodes over ``sim``; ``style_for(seed)`` gives each episode's look."""
    from .episodes import harness_episode

    return [harness_episode(s, faults, sim_backend=sim,
                            style=style_for(s) if style_for is not None else None)
            for s in seeds]


def first_look_hits(runs: Sequence[Mapping[str, Any]], sim: str) -> tuple[int, int]:
    """(things first seen within the tolerance of the truth, things scored)."""
    from ..perception import scene
    from ..sim.backend import point_heights
    from ..sim.camera import overhead_camera

    heights = point_heights(sim)
    z = {n: heights.get("pick_object" if n in ("red_cup", "yellow_paper") else "place_at",
                        {}).get("point_z", 0.0) for n in THINGS}
    cam = overhead_camera()
    good = total = 0
    for r in runs:
        img, truth = r["first_look"]
        dets = scene.detect(img) if img is not None else {}
        where = {**truth["objects"], **truth["receptacles"]}
        for name in THINGS:
            total += 1
            d = dets.get(name)
            if d is None:
                continue
            x, y, _ = cam.unproject(*d.inner, z[name])
            if math.hypot(x - where[name]["x"], y - where[name]["y"]) <= PERCEPTION_TOL_M:
                good += 1
    return good, total


def summary(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if r["succeeded"] and r["verified"]]
    return {"n": len(runs), "ok": len(ok), "success": _pct(len(ok), len(runs)),
            "truth": sum(bool(r["truth"]) for r in ok),
            "turns": _mean([r["turns"] for r in runs]),
            "tool_calls": _mean([r["tool_calls"] for r in runs]),
            "wall_s": _mean([r["wall_s"] for r in runs]),
            "sim_s": _mean([r["sim_s"] for r in runs])}


def side_by_side(results: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Rows per backend (success, planner turns, wall seconds per episode); the first
    backend in ``results`` (the 2D world) is the others' baseline."""
    rows: list[dict[str, Any]] = []
    base_name = next(iter(results))
    base = summary(results[base_name])
    for sim, runs in results.items():
        s = summary(runs)

        def baseline(key: str, unit: str, is_base: bool = sim == base_name,
                     digits: int = 1) -> str:
            # the baseline at the precision of the row's own value, so the two compare
            return ("(the baseline)" if is_base
                    else f"{base_name} {round(base[key], digits):.{digits}f}{unit}")

        rows += [
            {"name": f"backend {sim}: harness success", "value": s["success"], "unit": "%",
             "baseline": baseline("success", " %"),
             "note": f"{s['ok']}/{s['n']} seeds; truth agrees {s['truth']}/{s['ok']}; "
                     f"tool calls {s['tool_calls']:.1f} per episode"},
            {"name": f"backend {sim}: planner turns per episode", "value": round(s["turns"], 1),
             "unit": "turns", "baseline": baseline("turns", ""), "note": "rules planner"},
            {"name": f"backend {sim}: wall seconds per episode", "value": round(s["wall_s"], 2),
             "unit": "s", "baseline": baseline("wall_s", " s", digits=2),
             "note": f"{s['sim_s']:.1f} s simulated per episode, cameras at 10 Hz"},
        ]
    return rows


def domain_shift_3d(seeds: Sequence[int], faults: FaultConfig,
                    regimes: Mapping[str, Mapping[str, bool]] = REGIMES_3D,
                    default_runs: Sequence[Mapping[str, Any]] | None = None
                    ) -> list[dict[str, Any]]:
    """Per regime, harness success and perception accuracy over MuJoCo; ``default_runs``
    (the same seeds in the default look, already run) stand for the default regime."""
    from ..sim.mujoco.style import SceneStyle

    rows: list[dict[str, Any]] = []
    base: tuple[float, float] | None = None
    for regime, flags in regimes.items():
        if regime == "default" and default_runs is not None:
            runs = list(default_runs)
        else:
            runs = run_backend("mujoco", seeds, faults,
                               lambda s, f=flags: SceneStyle.randomized(  # type: ignore[misc]
                                   s, **f))
        s = summary(runs)
        good, total = first_look_hits(runs, "mujoco")
        acc = _pct(good, total)
        if regime == "default":
            base = (s["success"], acc)
        ref = "(the baseline)" if regime == "default" or base is None else None
        rows.append({"name": f"mujoco domain shift, {regime}: harness success",
                     "value": s["success"], "unit": "%",
                     "baseline": ref or f"default {base[0]} %",  # type: ignore[index]
                     "note": f"{s['ok']}/{s['n']} seeds, style randomized per seed; "
                             f"{s['turns']:.1f} planner turns per episode"})
        rows.append({"name": f"mujoco domain shift, {regime}: perception accuracy",
                     "value": acc, "unit": "%",
                     "baseline": ref or f"default {base[1]} %",  # type: ignore[index]
                     "note": f"{good}/{total} things first seen within "
                             f"{PERCEPTION_TOL_M * 1000:.0f} mm of the truth"})
    return rows


def tidy_rows(sims: Sequence[str], seeds: Sequence[int], shift_seeds: int,
              faults: FaultConfig, regimes: Mapping[str, Mapping[str, bool]] = REGIMES_3D
              ) -> list[dict[str, Any]]:
    """The backends side by side over ``seeds``, then (with mujoco) its domain shift over the
    first ``shift_seeds`` of them (the default look's runs are the side-by-side ones)."""
    results: dict[str, list[dict[str, Any]]] = {}
    rows: list[dict[str, Any]] = []
    for sim in sims:
        try:
            results[sim] = run_backend(sim, seeds, faults)
        except CoreError as e:  # no mujoco package or no OpenGL here: say so, go on
            rows.append(unavailable(sim, str(e)))
    if results:
        rows = side_by_side(results) + rows
    if "mujoco" in results and shift_seeds > 0:
        shift = list(seeds)[:shift_seeds]
        rows += domain_shift_3d(shift, faults, regimes, results["mujoco"][:len(shift)])
    return rows


def speed_rows(seconds: float = 1.0, timeout_s: float = 300.0) -> list[dict[str, Any]]:
    """Physics and camera-tick speed of MuJoCo against the 2D world, on one core."""
    cmd = [sys.executable, "-m", "solarian_agent.sim.mujoco.speed", "--one-core",
           "--seconds", str(seconds)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                              env=dict(os.environ), stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return [unavailable("mujoco", f"the speed measurement did not finish in {timeout_s} s")]
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return [unavailable("mujoco", f"speed measurement failed: {last}")]
    m = json.loads(done.stdout.strip().splitlines()[-1])
    one = f"one core ({m['cpus']} CPU, LP_NUM_THREADS={m['lp_num_threads']})"
    return [
        {"name": "mujoco physics, simulated s per wall s", "unit": "x real time",
         "value": round(m["physics_rt_mujoco"], 1),
         "baseline": f"target {PHYSICS_TARGET_RT:g}x; 2D world {m['physics_rt_2d']:.0f}x",
         "note": f"{m['physics_steps_per_s_mujoco']:.0f} physics steps/s (2 ms), arm sweeping, "
                 f"no cameras; {one}"},
        {"name": "mujoco two-camera tick, both 640x480", "unit": "ms",
         "value": round(m["tick_ms_mujoco_640x480"], 1),
         "baseline": f"target {TICK_TARGET_MS:g} ms; 2D renderer {m['tick_ms_2d_640x480']:.1f} ms",
         "note": f"overhead + wrist rendered and read back, median; {one}"},
        {"name": "mujoco two-camera tick, published sizes", "unit": "ms",
         "value": round(m["tick_ms_mujoco_published"], 1),
         "baseline": f"2D renderer {m['tick_ms_2d_published']:.1f} ms",
         "note": f"overhead 640x480 + wrist 480x360, median; {one}"},
    ]


__all__ = ["REGIMES_3D", "domain_shift_3d", "first_look_hits", "run_backend", "side_by_side",
           "speed_rows", "summary", "tidy_rows"]
