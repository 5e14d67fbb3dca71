"""Tidy-up benchmark (DESIGN.md §5), through the product: one task (cup on the tray, paper in
the bin, arm home), its execution strategies, its ideal upper bound and a domain-shift test.

* Execution strategies (6-13): open-loop, step-verified and predictive execution are the
  ``rules`` planner's strategies (:mod:`solarian_agent.models.rules_planner`), each run through
  the same system ``solarian-agent demo`` builds (:func:`~solarian_agent.system.build_sim_system`:
  bus, skills, executor, monitor, planner, trackers) on the same seeds with injected grasp
  faults and slips, in simulated time.  Per strategy: success (the planner claims it, and both a
  fresh ``verify_state`` through the skill's action server and the simulator's truth confirm
  the task's goal: :mod:`solarian_agent.task_check`; disagreements are listed), planner turns,
  tool calls (skill actions the planner or its plan queue started, and observes), recoveries
  (picks and places redone) and wall seconds per episode.
* The ideal controller (6-11) drives the World directly and reads its truth: no bus, no skills,
  no planner.  It is the labelled upper bound, never a strategy's result.
* Domain shift (6-14): the step-verified strategy through the product under
  ``VisualStyle.randomized`` regimes (background, appearance, lighting, noise, all four) against
  the default look: success and perception accuracy (each thing's first detected table position
  within 15 mm of the truth).

Seeds start at :data:`SEED_BASE`, which no test uses.  A progress line goes to stderr while it
runs.  OpenCV runs on one thread, so the timings are for one core.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..arm.kinematics import ArmModel
from ..sim.faults import FaultConfig, FaultInjector
from ..sim.ideal import IdealController
from ..sim.render import Renderer, VisualStyle
from ..sim.strategies import TidyTools
from ..sim.world import World
from .episodes import FAULTS, TASK, product_episode

SEED_BASE = 70_000  # benchmark seeds: no test uses seeds from here on
SHIFT_SEED_BASE = 80_000
STRATEGIES: tuple[tuple[str, str], ...] = (
    ("open_loop", "open-loop"),
    ("step_verified", "step-verified"),
    ("predictive", "predictive"),
)
REGIMES: dict[str, dict[str, bool]] = {
    "default": {},
    "background": {"background": True},
    "appearance": {"appearance": True},
    "lighting": {"lighting": True},
    "noise": {"noise": True},
    "all": {"background": True, "appearance": True, "lighting": True, "noise": True},
}
# seeds per strategy, per domain-shift regime, and per backend (with --sim mujoco)
FULL: dict[str, int] = {"seeds": 200, "shift_seeds": 10, "harness_seeds": 5,
                        "shift_seeds_3d": 3}
QUICK: dict[str, int] = {"seeds": 4, "shift_seeds": 2, "harness_seeds": 1, "shift_seeds_3d": 1}


def _pct(k: int, n: int) -> float:
    return round(100.0 * k / n, 1) if n else 0.0


def _mean(xs: Iterable[float]) -> float:
    xs = list(xs)
    return statistics.mean(xs) if xs else 0.0


class Progress:
    """One line on stderr while a benchmark runs (rewritten in place on a terminal)."""

    def __init__(self, what: str, total: int, out: Any = None) -> None:
        self.what, self.total = what, total
        self.out = out if out is not None else sys.stderr
        self.done = self.ok = 0
        self.failed: list[str] = []
        self.t0 = time.perf_counter()
        self.tty = bool(getattr(self.out, "isatty", lambda: False)())

    def step(self, ok: bool, which: str = "") -> None:
        self.done += 1
        self.ok += bool(ok)
        if not ok and which:
            self.failed.append(which)
        if self.tty or not ok or self.done % 10 == 0 or self.done == self.total:
            line = (f"tidy bench: {self.what} {self.done}/{self.total} episodes, {self.ok} "
                    f"confirmed, {time.perf_counter() - self.t0:.0f} s"
                    + (f"; not confirmed: {', '.join(self.failed[-8:])}"
                       if self.failed else ""))
            end = "\r" if self.tty and self.done < self.total else "\n"
            print(line, end=end, file=self.out, flush=True)


def pick_rows(runs_by_pick: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """The learned pick policy beside the scripted pick, through the same product: task
    success, seconds per pick_object call and how the calls ended."""
    rows: list[dict[str, Any]] = []
    base = runs_by_pick.get("scripted")
    base_ok = _pct(sum(r["success"] for r in base), len(base)) if base else None
    base_s = _mean(s for r in base for _, s in r["picks"]) if base else None
    for pick, runs in runs_by_pick.items():
        n = len(runs)
        ok = sum(r["success"] for r in runs)
        picks = [p for r in runs for p in r["picks"]]
        how: dict[str, int] = {}
        for h, _ in picks:
            how[h] = how.get(h, 0) + 1
        is_base = pick == "scripted"
        rows.append({"name": f"{pick} pick: tidy success", "value": _pct(ok, n), "unit": "%",
                     "baseline": "(the baseline)" if is_base or base_ok is None
                     else f"scripted pick {base_ok} %",
                     "note": f"{ok}/{n} seeds, step-verified rules planner, cv monitor, through "
                             f"the product; pick_object calls {len(picks)} "
                             f"({len(picks) / n if n else 0:.1f} per episode)"})
        rows.append({"name": f"{pick} pick: seconds per pick_object",
                     "value": round(_mean(s for _, s in picks), 2), "unit": "s (sim)",
                     "baseline": "(the baseline)" if is_base or base_s is None
                     else f"scripted pick {base_s:.2f} s",
                     "note": "how the calls ended: " + (", ".join(
                         f"{k} {v}" for k, v in sorted(how.items(), key=lambda kv: -kv[1]))
                         or "none")})
    return rows


def run_picks(seeds: Sequence[int], faults: FaultConfig | None = None
              ) -> dict[str, list[dict[str, Any]]]:
    """Both picks through the product on ``seeds`` (no faults by default: the pick itself is
    measured)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for pick in ("scripted", "policy"):
        prog = Progress(f"{pick} pick", len(seeds))
        runs = []
        for seed in seeds:
            r = product_episode(seed, "step_verified", faults, pick=pick)
            r.pop("first_look")
            runs.append(r)
            prog.step(r["success"], str(seed))
        out[pick] = runs
    return out


def _episode_task(task: tuple[str, int, FaultConfig, Mapping[str, bool] | None, bool]
                  ) -> dict[str, Any]:
    """One product episode from a picklable task: (strategy, seed, faults, style flags or
    None for the default look, keep the first look)."""
    strategy, seed, faults, flags, keep_look = task
    style = VisualStyle.randomized(seed, **flags) if flags is not None else None
    r = product_episode(seed, strategy, faults, style=style)
    if not keep_look:
        r.pop("first_look")
    return r


def _worker_init() -> None:
    import cv2

    cv2.setNumThreads(1)


def run_episodes(tasks: Sequence[tuple[str, int, FaultConfig, Mapping[str, bool] | None, bool]],
                 label: str, jobs: int = 1) -> list[dict[str, Any]]:
    """The episodes ``tasks`` (see :func:`_episode_task`) in order, on ``jobs`` processes
    (each episode runs on one process from start to end: its wall seconds are its own), with
    a progress line."""
    prog = Progress(label, len(tasks))
    if jobs <= 1:
        out = []
        for t in tasks:
            r = _episode_task(t)
            out.append(r)
            prog.step(r["success"], f"{t[0]} {t[1]}")
        return out
    import concurrent.futures as cf
    import multiprocessing as mp

    results: dict[int, dict[str, Any]] = {}
    with cf.ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn"),
                                initializer=_worker_init) as pool:
        futs = {pool.submit(_episode_task, t): i for i, t in enumerate(tasks)}
        for f in cf.as_completed(futs):
            i = futs[f]
            results[i] = f.result()
            prog.step(results[i]["success"], f"{tasks[i][0]} {tasks[i][1]}")
    return [results[i] for i in range(len(tasks))]


def run_strategy(strategy: str, seeds: Sequence[int], faults: FaultConfig = FAULTS,
                 flags: Mapping[str, bool] | None = None, label: str = "", jobs: int = 1,
                 keep_look: bool = False) -> list[dict[str, Any]]:
    """``strategy`` through the product on ``seeds`` (``flags``: a randomized look)."""
    return run_episodes([(strategy, s, faults, flags, keep_look) for s in seeds],
                        label or strategy, jobs)


def _seeds(runs: Sequence[Mapping[str, Any]], pred: Callable[[Mapping[str, Any]], bool]
           ) -> str:
    hit = [str(r["seed"]) for r in runs if pred(r)]
    return ", ".join(hit[:12]) + (f" (+{len(hit) - 12})" if len(hit) > 12 else "") \
        if hit else "none"


def strategy_rows(label: str, runs: Sequence[Mapping[str, Any]], bound: float | None
                  ) -> list[dict[str, Any]]:
    n = len(runs)
    ok = [r for r in runs if r["success"]]
    claimed = [r for r in runs if r["claimed"]]
    breakdown: dict[str, float] = {}
    for r in runs:
        for k, v in r["calls"].items():
            breakdown[k] = breakdown.get(k, 0.0) + v / n
    calls_note = ", ".join(f"{k} {v:.1f}" for k, v in sorted(breakdown.items()))
    unconfirmed = _seeds(runs, lambda r: r["claimed"] and not (r["verified"] and r["truth"]))
    disagree = _seeds(runs, lambda r: r["verified"] != r["truth"])
    return [
        {"name": f"{label}: success", "value": _pct(len(ok), n), "unit": "%",
         "baseline": "" if bound is None else f"ideal {bound} % (the upper bound)",
         "note": f"{len(ok)}/{n} seeds claimed and confirmed by a fresh verify_state and the "
                 f"truth; claimed {len(claimed)}; claimed but not confirmed: {unconfirmed}; "
                 f"verify_state and truth disagree: {disagree}"},
        {"name": f"{label}: planner turns per episode",
         "value": round(_mean(r["turns"] for r in runs), 2), "unit": "turns", "baseline": "",
         "note": f"max {max((r['turns'] for r in runs), default=0)}"},
        {"name": f"{label}: tool calls per episode",
         "value": round(_mean(r["tool_calls"] for r in runs), 2), "unit": "calls",
         "baseline": "", "note": calls_note},
        {"name": f"{label}: recoveries per episode",
         "value": round(_mean(r["recoveries"] for r in runs), 2), "unit": "skills redone",
         "baseline": "", "note": "faults injected per episode "
                                 f"{_mean(sum(r['faults'].values()) for r in runs):.2f}"},
        {"name": f"{label}: wall seconds per episode",
         "value": round(_mean(r["wall_s"] for r in runs), 2), "unit": "s", "baseline": "",
         "note": f"sim time {_mean(r['sim_s'] for r in runs):.1f} s per episode"},
    ]


# the ideal controller (6-11): the World directly, reading its truth ----------------------------
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


def ideal_runs(seeds: Sequence[int], arm: ArmModel, faults: FaultConfig = FAULTS
               ) -> list[dict[str, Any]]:
    world = World(arm)
    renderer = Renderer(arm, VisualStyle())
    out = []
    for seed in seeds:
        t0 = time.perf_counter()
        world.faults = FaultInjector(faults, seed)
        world.reset(seed)
        ctl = _CountingIdeal(world)
        res = ctl.run()
        check = TidyTools(world, renderer).verify_state()
        out.append({"seed": seed, "success": res.success and check.tidy(),
                    "tool_calls": ctl.picks + ctl.places + ctl.homes,
                    "recoveries": res.retries, "wall_s": time.perf_counter() - t0})
    return out


def ideal_row(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    ok = sum(r["success"] for r in runs)
    return {"name": "ideal controller (reference, reads the truth): success",
            "value": _pct(ok, len(runs)),
            "unit": "%", "baseline": "upper bound: reads the truth, drives the World directly "
                                     "(no bus, skills, planner or camera)",
            "note": f"{ok}/{len(runs)} seeds; skill calls "
                    f"{_mean(r['tool_calls'] for r in runs):.2f}, recoveries "
                    f"{_mean(r['recoveries'] for r in runs):.2f} per episode"}


# domain shift (6-14) ---------------------------------------------------------------------------
def domain_shift(seeds: Sequence[int], regimes: Mapping[str, Mapping[str, bool]] = REGIMES,
                 faults: FaultConfig = FAULTS, strategy: str = "step_verified", jobs: int = 1
                 ) -> list[dict[str, Any]]:
    """Experiment 6-14 through the product: ``strategy``'s success and perception accuracy per
    visual regime; the ``default`` regime (measured in the same run) is every other regime's
    baseline."""
    from .backends import PERCEPTION_TOL_M, first_look_hits

    results: dict[str, tuple[float, float, int, int]] = {}
    tasks = [(strategy, s, faults, dict(flags), True) for flags in regimes.values()
             for s in seeds]
    every = run_episodes(tasks, f"domain shift ({', '.join(regimes)})", jobs)
    for k, regime in enumerate(regimes):
        runs = every[k * len(seeds):(k + 1) * len(seeds)]
        good, total = first_look_hits(runs, "2d")
        ok = sum(r["success"] for r in runs)
        results[regime] = (_pct(ok, len(runs)), _pct(good, total), ok, len(runs))
    base = results.get("default")
    rows: list[dict[str, Any]] = []
    for regime, (succ, acc, ok, n) in results.items():
        is_base = regime == "default" or base is None
        rows.append({"name": f"domain shift, {regime}: {strategy} success", "value": succ,
                     "unit": "%", "baseline": "(the baseline)" if is_base
                     else f"default {base[0]} %",  # type: ignore[index]
                     "note": f"{ok}/{n} seeds through the product, style randomized per seed"})
        rows.append({"name": f"domain shift, {regime}: perception accuracy", "value": acc,
                     "unit": "%", "baseline": "(the baseline)" if is_base
                     else f"default {base[1]} %",  # type: ignore[index]
                     "note": f"things first seen within {PERCEPTION_TOL_M * 1000:.0f} mm of "
                             "the truth"})
    return rows


def run(quick: bool = False, sims: Sequence[str] = ("2d",), jobs: int = 1
        ) -> list[dict[str, Any]]:
    """The tidy-up rows; with ``mujoco`` in ``sims`` also the backends side by side and the
    3D domain shift (:mod:`solarian_agent.benchmarks.backends`).  ``jobs``: episodes run on
    that many processes at once (one episode per process at a time)."""
    from solarian_agent.benchmarks import one_cv_thread

    with one_cv_thread():
        rows = _run(quick, jobs) if "2d" in sims else []
        if "mujoco" in sims:
            from . import backends

            size = QUICK if quick else FULL
            rows += backends.tidy_rows(sims, range(SEED_BASE, SEED_BASE + size["harness_seeds"]),
                                       size["shift_seeds_3d"], FAULTS)
        return rows


def _run(quick: bool, jobs: int = 1) -> list[dict[str, Any]]:
    size = QUICK if quick else FULL
    seeds = range(SEED_BASE, SEED_BASE + size["seeds"])
    ideal = ideal_runs(seeds, ArmModel.default())
    bound = _pct(sum(r["success"] for r in ideal), len(ideal))
    rows: list[dict[str, Any]] = [ideal_row(ideal)]
    # step-verified first (the target), the rows in the table's order
    order = sorted(STRATEGIES, key=lambda s: s[0] != "step_verified")
    every = run_episodes([(name, s, FAULTS, None, False) for name, _ in order for s in seeds],
                         ", ".join(label for _, label in order), jobs)
    runs = {name: every[k * len(seeds):(k + 1) * len(seeds)]
            for k, (name, _) in enumerate(order)}
    for name, label in STRATEGIES:
        rows += strategy_rows(label, runs[name], bound)
    rows.append({"name": "faults injected", "value": "", "unit": "",
                 "baseline": "", "note": f"grasp fail {FAULTS.grasp_fail_p:.0%}, slip "
                                         f"{FAULTS.slip_p:.0%} per attempt, at most "
                                         f"{FAULTS.max_consecutive} failed picks of one object "
                                         "in a row; seeds from "
                                         f"{SEED_BASE}; task: {TASK!r}"})
    shift = range(SHIFT_SEED_BASE, SHIFT_SEED_BASE + size["shift_seeds"])
    rows += domain_shift(shift, REGIMES, jobs=jobs)
    return rows


__all__ = ["FAULTS", "REGIMES", "SEED_BASE", "STRATEGIES", "Progress", "domain_shift",
           "ideal_runs", "pick_rows", "product_episode", "run", "run_episodes", "run_picks",
           "run_strategy", "strategy_rows"]
