"""Tidy-up benchmark (DESIGN.md §5; seed 004, experiments 6-11, 6-13 and 6-14).

* Execution strategies (6-13) over the same seeds with injected recoverable grasp faults: the
  ideal controller (6-11, reads the ground truth: the upper bound) against open-loop,
  step-verified and predictive execution (:mod:`solarian_agent.sim.strategies`), plus the
  predictive strategy that looks only when in doubt.  Per controller: success rate (a success
  counts only when the strategy claims it and a fresh ``verify_state`` taken afterwards
  confirms it; the note says how often the ground truth agrees), tool calls, recoveries, tip
  path (and simulated time), and the share of claimed successes a fresh ``verify_state``
  confirms.
* Domain shift (6-14): the step-verified strategy under ``VisualStyle.randomized`` regimes
  (background, appearance, lighting, noise, all four) against the default look: success and
  perception accuracy (each thing's first detected table position within 15 mm of the truth).
* The full harness: the ``rules`` planner through :func:`build_sim_system` on a few seeds with
  the same faults: success (its own fresh ``verify_state`` via ``final_check``), planner turns,
  tool calls.

OpenCV runs on one thread, so the timings are for one core.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..arm.kinematics import ArmModel
from ..sim.faults import FaultConfig, FaultInjector
from ..sim.ideal import IdealController
from ..sim.render import Renderer, VisualStyle
from ..sim.strategies import EpisodeRecord, TidyTools, make_strategy, run_episode
from ..sim.world import World

FAULTS = FaultConfig(grasp_fail_p=0.3, slip_p=0.15)
CONTROLLERS: tuple[tuple[str, str], ...] = (
    ("ideal", "ideal controller (exp. 6-11, reads truth)"),
    ("open_loop", "open-loop"),
    ("step_verified", "step-verified"),
    ("predictive", "predictive"),
    ("predictive_on_doubt", "predictive, verify on doubt"),
)
REGIMES: dict[str, dict[str, bool]] = {
    "default": {},
    "background": {"background": True},
    "appearance": {"appearance": True},
    "lighting": {"lighting": True},
    "noise": {"noise": True},
    "all": {"background": True, "appearance": True, "lighting": True, "noise": True},
}
PERCEPTION_TOL_M = 0.015
# seeds per controller, per domain-shift regime, and full-harness runs
FULL: dict[str, int] = {"seeds": 200, "shift_seeds": 30, "harness_seeds": 5,
                        "shift_seeds_3d": 3}
QUICK: dict[str, int] = {"seeds": 20, "shift_seeds": 5, "harness_seeds": 3, "shift_seeds_3d": 1}
TASK = "put the red cup on the tray and the yellow paper in the bin, then check the table"


class _CountingIdeal(IdealController):
    """The ideal controller, counting its skill calls like tool calls."""

    places = 0
    homes = 0

    def place(self, name: str, receptacle: str) -> bool:
        self.places += 1
        return super().place(name, receptacle)

    def home(self) -> None:
        self.homes += 1
        super().home()


def ideal_episode(world: World, renderer: Renderer, seed: int,
                  faults: FaultConfig = FAULTS) -> EpisodeRecord:
    world.faults = FaultInjector(faults, seed)
    world.reset(seed)
    ctl = _CountingIdeal(world)
    res = ctl.run()
    check = TidyTools(world, renderer).verify_state()
    calls = {"pick": ctl.picks, "place": ctl.places, "home": ctl.homes}
    return EpisodeRecord(
        strategy="ideal", seed=seed, claimed=res.success, verified=check.tidy(),
        truth=res.success, tool_calls=sum(calls.values()), calls=calls,
        recoveries=res.retries, path_length_m=res.path_length_m, sim_time_s=res.sim_time_s,
        steps=res.steps, stopped=bool(res.failures), faults=res.faults,
        notes=res.failures,
    )


def run_controller(name: str, seeds: Iterable[int], arm: ArmModel,
                   faults: FaultConfig = FAULTS, style: VisualStyle | None = None
                   ) -> list[EpisodeRecord]:
    world = World(arm)
    renderer = Renderer(arm, style or VisualStyle())
    if name == "ideal":
        return [ideal_episode(world, renderer, s, faults) for s in seeds]
    strategy = make_strategy(name, arm)
    return [run_episode(strategy, s, faults=faults, world=world, renderer=renderer)
            for s in seeds]


def _pct(k: int, n: int) -> float:
    return round(100.0 * k / n, 1) if n else 0.0


def _mean(xs: Iterable[float]) -> float:
    xs = list(xs)
    return statistics.mean(xs) if xs else 0.0


def controller_rows(label: str, recs: Sequence[EpisodeRecord],
                    ideal: Sequence[EpisodeRecord] | None) -> list[dict[str, Any]]:
    n = len(recs)
    ok = [r for r in recs if r.success]
    claimed = [r for r in recs if r.claimed]
    confirmed = [r for r in claimed if r.verified]
    truth_ok = sum(r.truth for r in ok)
    calls: dict[str, float] = {}
    for r in recs:
        for k, v in r.calls.items():
            calls[k] = calls.get(k, 0.0) + v / n
    breakdown = ", ".join(f"{k} {v:.1f}" for k, v in calls.items() if v)
    base = ideal if ideal is not None else recs
    is_ideal = ideal is None
    ideal_succ = _pct(sum(r.success for r in base), len(base))
    rows: list[dict[str, Any]] = [
        {"name": f"{label}: success", "value": _pct(len(ok), n), "unit": "%",
         "baseline": ("upper bound" if is_ideal else f"ideal {ideal_succ} %"),
         "note": f"{len(ok)}/{n} seeds; truth agrees with {truth_ok}/{len(ok)} counted "
                 f"successes; claimed {len(claimed)}"},
        {"name": f"{label}: tool calls per episode",
         "value": round(_mean(r.tool_calls for r in recs), 2), "unit": "calls",
         "baseline": ("" if is_ideal else
                      f"ideal {_mean(r.tool_calls for r in base):.2f} (no looks)"),
         "note": breakdown},
        {"name": f"{label}: recoveries per episode",
         "value": round(_mean(r.recoveries for r in recs), 2), "unit": "skills redone",
         "baseline": "" if is_ideal else f"ideal {_mean(r.recoveries for r in base):.2f}",
         "note": "faults injected per episode "
                 f"{_mean(sum(r.faults.values()) for r in recs):.2f}"},
        {"name": f"{label}: tip path per episode",
         "value": round(_mean(r.path_length_m for r in recs), 3), "unit": "m",
         "baseline": "" if is_ideal else f"ideal {_mean(r.path_length_m for r in base):.3f} m",
         "note": f"sim time {_mean(r.sim_time_s for r in recs):.2f} s per episode"
                 + ("" if is_ideal else
                    f" (ideal {_mean(r.sim_time_s for r in base):.2f} s)")},
        {"name": f"{label}: claimed successes confirmed by a fresh verify_state",
         "value": _pct(len(confirmed), len(claimed)), "unit": "%", "baseline": "100 %",
         "note": f"{len(confirmed)}/{len(claimed)} claims"},
    ]
    mis = sum(r.mispredictions for r in recs)
    if label.startswith("predictive"):
        rows[2]["note"] += f"; {mis} outcome(s) departed from the model's prediction"
    return rows


def perception_accuracy(recs: Sequence[EpisodeRecord], tol_m: float = PERCEPTION_TOL_M
                        ) -> tuple[float, int]:
    """Share (%) of things (objects and receptacles) whose first observed table position lies
    within ``tol_m`` of the truth, and how many were scored."""
    good = total = 0
    for r in recs:
        obs = r.first_observation
        for name, (x, y) in r.layout.items():
            total += 1
            p = obs.positions.get(name) if obs is not None else None
            if p is not None and math.hypot(p[0] - x, p[1] - y) <= tol_m:
                good += 1
    return _pct(good, total), total


def domain_shift(seeds: Sequence[int], arm: ArmModel | None = None,
                 regimes: Mapping[str, Mapping[str, bool]] = REGIMES,
                 faults: FaultConfig = FAULTS, strategy: str = "step_verified"
                 ) -> list[dict[str, Any]]:
    """Experiment 6-14: ``strategy``'s success and perception accuracy per visual regime;
    the ``default`` regime (measured in the same run) is every other regime's baseline."""
    arm = arm if arm is not None else ArmModel.default()
    world = World(arm)
    results: dict[str, tuple[float, float, int, int]] = {}
    for regime, flags in regimes.items():
        recs = []
        for s in seeds:
            style = VisualStyle.randomized(s, **flags)
            recs.append(run_episode(make_strategy(strategy, arm), s, faults=faults,
                                    world=world, renderer=Renderer(arm, style)))
        acc, _ = perception_accuracy(recs)
        ok = sum(r.success for r in recs)
        results[regime] = (_pct(ok, len(recs)), acc, ok, len(recs))
    base = results.get("default")
    rows: list[dict[str, Any]] = []
    for regime, (succ, acc, ok, n) in results.items():
        is_base = regime == "default"
        rows.append({
            "name": f"domain shift, {regime}: {strategy} success", "value": succ, "unit": "%",
            "baseline": ("(the baseline)" if is_base or base is None
                         else f"default {base[0]} %"),
            "note": f"{ok}/{n} seeds, style randomized per seed"})
        rows.append({
            "name": f"domain shift, {regime}: perception accuracy", "value": acc, "unit": "%",
            "baseline": ("(the baseline)" if is_base or base is None
                         else f"default {base[1]} %"),
            "note": f"things first seen within {PERCEPTION_TOL_M * 1000:.0f} mm of the truth"})
    return rows


def harness_episode(seed: int, faults: FaultConfig = FAULTS,
                    timeout_s: float = 300.0, sim_backend: str = "2d",
                    style: Any = None) -> dict[str, Any]:
    """One run of the whole controller (rules planner, skills, executor, bus) over the
    simulator backend ``sim_backend``: whether the planner succeeded, its own fresh
    ``verify_state`` (``final_check``) and the truth, planner turns, tool calls, wall seconds
    and ``first_look`` (the first overhead frame and the layout, for perception scores)."""
    from ..core import names
    from ..core.transport import QoS
    from ..demo import final_check
    from ..system import build_sim_system

    t0 = time.perf_counter()
    system = build_sim_system(seed=seed, faults=faults, with_monitor=False,
                              sim_backend=sim_backend, style=style)
    frame = system.cameras.frame("overhead")
    truth0 = system.world.truth()
    events: list[Any] = []
    system.bus.subscribe(names.AGENT_EVENTS, names.T_AGENT_EVENT, callback=events.append,
                         qos=QoS(depth=1000))
    planner = system.planner
    try:
        planner.message(TASK)
        system.run_until(lambda: planner.status not in ("idle", "running", "paused"),
                         timeout_s)
        succeeded = planner.status == "succeeded"
        tool_calls = sum(e.kind == "action_started" for e in events)
        ended = [e for e in events if e.kind == "run_ended"]
        check = final_check(system)
        return {"seed": seed, "succeeded": succeeded, "verified": bool(check["ok"]),
                "truth": system.world.success(), "tool_calls": tool_calls,
                "turns": int(ended[-1].data.get("turns", 0)) if ended else 0,
                "wall_s": time.perf_counter() - t0, "sim_s": system.world.t,
                "first_look": (frame.data if frame is not None else None, truth0)}
    finally:
        system.shutdown()


def harness_row(seeds: Sequence[int], faults: FaultConfig = FAULTS,
                timeout_s: float = 300.0) -> dict[str, Any]:
    """The full harness over ``seeds``: success counted when the planner says so and its
    fresh ``verify_state`` confirms it."""
    t0 = time.perf_counter()
    runs = [harness_episode(s, faults, timeout_s) for s in seeds]
    wall = time.perf_counter() - t0
    ok = [r for r in runs if r["succeeded"] and r["verified"]]
    truth = sum(bool(r["truth"]) for r in ok)
    n = len(runs)
    return {"name": "full harness (rules planner, build_sim_system): success", "unit": "%",
            "value": _pct(len(ok), n), "baseline": "step-verified success above",
            "note": f"{len(ok)}/{n} seeds; truth agrees {truth}/{len(ok)}; planner turns "
                    f"{_mean(r['turns'] for r in runs):.1f}, tool calls "
                    f"{_mean(r['tool_calls'] for r in runs):.1f} per episode; "
                    f"{wall / max(n, 1):.1f} s wall per episode"}


def run(quick: bool = False, sims: Sequence[str] = ("2d",)) -> list[dict[str, Any]]:
    """The tidy-up rows; with ``mujoco`` in ``sims`` also the backends side by side and the
    3D domain shift (:mod:`solarian_agent.benchmarks.backends`)."""
    from solarian_agent.benchmarks import one_cv_thread

    with one_cv_thread():
        rows = _run(quick) if "2d" in sims else []
        if "mujoco" in sims:
            from . import backends

            size = QUICK if quick else FULL
            rows += backends.tidy_rows(sims, range(size["harness_seeds"]),
                                       size["shift_seeds_3d"], FAULTS)
        return rows


def _run(quick: bool) -> list[dict[str, Any]]:
    size = QUICK if quick else FULL
    n, n_shift, n_harness = size["seeds"], size["shift_seeds"], size["harness_seeds"]
    arm = ArmModel.default()
    seeds = range(n)
    t0 = time.perf_counter()
    recs = {name: run_controller(name, seeds, arm) for name, _ in CONTROLLERS}
    wall = time.perf_counter() - t0
    rows: list[dict[str, Any]] = []
    for name, label in CONTROLLERS:
        rows += controller_rows(label, recs[name], None if name == "ideal" else recs["ideal"])
    episodes = n * len(CONTROLLERS)
    rows.append({"name": "tidy-up episodes per minute, all controllers",
                 "value": round(60 * episodes / wall), "unit": "episodes/min",
                 "baseline": "hundreds per minute (target)",
                 "note": f"{episodes} episodes, faults: grasp fail "
                         f"{FAULTS.grasp_fail_p:.0%}, slip {FAULTS.slip_p:.0%}, at most "
                         f"{FAULTS.max_consecutive} in a row"})
    rows += domain_shift(range(1000, 1000 + n_shift), arm, regimes=REGIMES)
    rows.append(harness_row(range(n_harness)))
    return rows


__all__ = ["CONTROLLERS", "FAULTS", "REGIMES", "domain_shift", "harness_episode", "harness_row",
           "perception_accuracy", "run", "run_controller"]
