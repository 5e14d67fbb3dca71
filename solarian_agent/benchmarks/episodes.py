"""One tidy-up episode through the product (the system ``solarian-agent demo`` builds, with the
``rules`` planner), measured: the planner's claim, the goal judged by a fresh ``verify_state``
and by the simulator's truth, planner turns, tool calls, recoveries, how each pick ended, wall
and simulated seconds.

The tidy-up suite (:mod:`.tidy`) and the backends side by side (:mod:`.backends`) both run
episodes from here; neither imports the other's rows, so the two suites stay one way apart
(tidy composes the backends' rows).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..sim.faults import FaultConfig

FAULTS = FaultConfig(grasp_fail_p=0.3, slip_p=0.15)
TASK = "put the red cup on the tray and the yellow paper in the bin, then check the table"
SKILL_TOOLS = ("pick_object", "place_at")


def product_episode(seed: int, strategy: str = "step_verified",
                    faults: FaultConfig | None = FAULTS, *, task: str = TASK,
                    sim_backend: str = "2d", style: Any = None, with_monitor: bool = True,
                    timeout_s: float = 600.0, forced: Sequence[Mapping[str, Any]] = (),
                    pick: str = "scripted") -> dict[str, Any]:
    """One run of ``solarian-agent demo``'s system with the ``rules`` planner's ``strategy``:
    the planner's claim, the goal judged by a fresh verify_state and by the truth, planner
    turns, tool calls (with a breakdown), recoveries, wall and simulated seconds, and
    ``first_look`` (the first overhead frame and the layout, for perception scores).
    ``forced`` fault requests (:meth:`~solarian_agent.sim.faults.FaultInjector.inject`, e.g.
    ``{"kind": "grasp_fail"}``) apply from the start."""
    from ..core import names
    from ..core.transport import QoS
    from ..models.rules_planner import RulesPlanner
    from ..models.task_reading import read_task
    from ..system import build_sim_system
    from ..task_check import final_check, judge

    t0 = time.perf_counter()
    system = build_sim_system(seed=seed, faults=faults, planner=RulesPlanner(strategy=strategy),
                              with_monitor=with_monitor, sim_backend=sim_backend, style=style,
                              pick=pick)
    for req in forced:
        system.world.faults.inject(req, system.world.t, tuple(system.world.objects))
    frame = system.cameras.frame("overhead")
    start = system.world.truth()
    events: list[Any] = []
    system.bus.subscribe(names.AGENT_EVENTS, names.T_AGENT_EVENT, callback=events.append,
                         qos=QoS(depth=5000))
    skill_events: list[Any] = []
    system.bus.subscribe(names.SKILL_EVENTS, names.T_AGENT_EVENT, callback=skill_events.append,
                         qos=QoS(depth=5000))
    planner = system.planner
    try:
        planner.message(task)
        system.run_until(lambda: planner.status not in ("idle", "running", "paused"),
                         timeout_s)
        status = planner.status
        check = final_check(system)
        end = system.world.truth()
    finally:
        system.shutdown()
    reading = read_task(task)
    verdict = judge(reading, start, end, check)
    calls: dict[str, int] = {}
    for e in events:
        tool = e.data.get("tool") if e.kind == "action_started" else (
            "observe" if e.kind == "observe" else None)
        if tool:
            calls[str(tool)] = calls.get(str(tool), 0) + 1
    goals = len(reading.goals)
    recoveries = sum(max(0, calls.get(t, 0) - goals) for t in SKILL_TOOLS)
    claimed = status == "succeeded"
    return {"seed": seed, "strategy": strategy, "status": status, "claimed": claimed,
            "verified": verdict.verified, "truth": verdict.truth,
            "succeeded": claimed,  # the planner's word (backends.py reads these three)
            "success": claimed and verdict.verified and verdict.truth,
            "summary": planner.summary, "tool_calls": sum(calls.values()), "calls": calls,
            "recoveries": recoveries, "turns": planner.turns,
            "wall_s": time.perf_counter() - t0, "sim_s": float(end["t"]),
            "faults": dict(end["faults"]["counts"]),
            "picks": pick_endings(skill_events),
            "first_look": (frame.data if frame is not None else None, start)}


def pick_endings(skill_events: Sequence[Any]) -> list[tuple[str, float]]:
    """How each pick_object ended, with its seconds: ``monitor finish`` (a monitor rule
    concluded it, succeeded), ``monitor fail``, ``succeeded`` (ended by itself), ``timeout``,
    ``failed``, ``stopped`` or ``refused``."""
    out = []
    for e in skill_events:
        if e.kind != "skill_ended" or e.data.get("skill") != "pick_object":
            continue
        outcome = str(e.data.get("outcome", ""))
        by_monitor = str(e.data.get("reason", "")).startswith(("monitor:", "controller check:"))
        how = {"timed_out": "timeout"}.get(outcome, outcome)
        if by_monitor and outcome in ("succeeded", "failed"):
            how = "monitor finish" if outcome == "succeeded" else "monitor fail"
        out.append((how, float(e.data.get("duration_s", 0.0))))
    return out


def harness_episode(seed: int, faults: FaultConfig = FAULTS, timeout_s: float = 300.0,
                    sim_backend: str = "2d", style: Any = None) -> dict[str, Any]:
    """The step-verified product over ``sim_backend`` without the monitor (the backends'
    side-by-side rows)."""
    return product_episode(seed, "step_verified", faults, sim_backend=sim_backend,
                           style=style, with_monitor=False, timeout_s=timeout_s)


__all__ = ["FAULTS", "SKILL_TOOLS", "TASK", "harness_episode", "pick_endings", "product_episode"]
