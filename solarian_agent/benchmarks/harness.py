"""Harness benchmarks: planner turns per pick-and-place with and without the plan queue,
the harness's own overhead per planner turn and per control tick, and responsiveness."""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

from ..core import names
from ..core.clock import SystemClock
from ..core.messages import MonitorVerdict, OperatorEvent
from ..core.model_api import ModelReply, ModelRequest
from ..core.planner import ThreadCaller
from ..core.runtime import Runtime
from ..core.skill import Tool
from ..core.transport import QoS
from ..models.scripted import reply
from ..testing.harness import MoveJoint, PointAt, Wait, make_harness

TOOLS = {"move_joint": Tool(MoveJoint), "pick": Tool(PointAt, {"camera": "cam"}),
         "place": Tool(PointAt, {"camera": "cam"}), "home": Tool(Wait)}


def _newest_obs(req: ModelRequest) -> str:
    ids = [p.observation_id for m in req.messages for p in m.content
           if getattr(p, "observation_id", "")]
    return ids[-1]


class GoodPlanner:
    """Answers as a good model would: plans with complete steps where it can and points when
    woken for a point.  With ``use_queue=False`` it starts every step itself (the baseline)."""

    def __init__(self, use_queue: bool) -> None:
        self.use_queue = use_queue
        self.stage = 0

    def __call__(self, req: ModelRequest) -> ModelReply:
        self.stage += 1
        woke = [m for m in req.messages if m.role == "user"][-1].text()
        if not self.use_queue:
            if self.stage == 1:
                return reply("", ("move_joint", {"to": 0.3}))
            if self.stage in (2, 3):
                tool = "pick" if self.stage == 2 else "place"
                return reply("", (tool, {"point": [200, 150],
                                         "observation_id": _newest_obs(req)}))
            if self.stage == 4:
                return reply("", ("home", {"seconds": 0.2}))
            return reply("", ("finish_task", {"summary": "cup on tray", "success": True}))
        if self.stage == 1:
            if self.use_queue:
                steps = [{"description": "look pose", "tool": "move_joint", "args": {"to": 0.3}},
                         {"description": "pick the cup", "tool": "pick"},
                         {"description": "place it on the tray", "tool": "place"},
                         {"description": "go home", "tool": "home", "args": {"seconds": 0.2}},
                         {"description": "check the table"}]
            else:
                steps = [{"description": d} for d in
                         ("look pose", "pick", "place", "home", "check")]
            return reply("", ("update_plan", {"steps": steps}), ("move_joint", {"to": 0.3}))
        if "has no tool" in woke:
            return reply("", ("finish_task", {"summary": "cup on tray", "success": True}))
        tool = "pick" if self.stage == 2 else "place"
        return reply("", (tool, {"point": [200, 150], "observation_id": _newest_obs(req)}))


def turns_per_pick_and_place(use_queue: bool) -> tuple[int, float, float]:
    h = make_harness([GoodPlanner(use_queue)] * 10, tools=TOOLS)
    tick_times: list[float] = []
    planner_time = 0.0
    orig_planner_tick = h.planner.tick
    orig_exec_tick = h.executor.tick

    def timed_planner() -> None:
        nonlocal planner_time
        t = time.perf_counter()
        orig_planner_tick()
        planner_time += time.perf_counter() - t

    def timed_exec() -> None:
        t = time.perf_counter()
        orig_exec_tick()
        tick_times.append(time.perf_counter() - t)

    h.runtime.components = [c for c in h.runtime.components if c.name == "robot"]
    h.runtime.add("executor", lambda dt: timed_exec())
    h.runtime.add("planner", lambda dt: timed_planner())
    h.say("put the cup on the tray")
    if not h.run_until(lambda: h.planner.status == "succeeded", 60):
        raise RuntimeError(f"pick-and-place run did not finish: {h.planner.status}")
    return h.planner.turns, planner_time / h.planner.turns, statistics.median(tick_times)


def control_rate_during_model_call(duration_s: float = 1.0) -> tuple[float, float, float]:
    """Realtime control loop at 50 Hz while a planner call takes 0.5 s on its worker thread."""
    gate = threading.Event()

    def slow(req: ModelRequest) -> ModelReply:
        gate.wait(0.5)
        return reply("", ("wait", {"seconds": 0.1}))

    clock = SystemClock()
    h = make_harness([slow], caller=ThreadCaller(), planner_clock=clock)
    rt = Runtime(clock, h.bus, period_s=0.02, realtime=True)
    stamps: list[float] = []
    rt.add("robot", h.robot.tick)
    rt.add("executor", lambda dt: (stamps.append(time.perf_counter()), h.executor.tick()))
    rt.add("planner", lambda dt: h.planner.tick())
    h.say("wait")
    rt.run_for(duration_s)
    gate.set()
    gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    rate = (len(stamps) - 1) / (stamps[-1] - stamps[0])
    return rate, max(gaps), 50.0


def ticks_to_stop_on_takeover() -> int:
    h = make_harness([reply("", ("wait", {"seconds": 30}))])
    ended = []
    h.bus.subscribe(names.SKILL_EVENTS, names.T_AGENT_EVENT,
                    callback=lambda e: ended.append(h.executor.ticks)
                    if e.kind == "skill_ended" else None, qos=QoS(depth=50))
    h.say("wait")
    h.run_until(lambda: bool(h.executor.running), 5)
    pub = h.bus.publisher(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT)
    t0 = h.executor.ticks
    pub.publish(OperatorEvent("key", {"key": "space"}))
    h.run_until(lambda: bool(ended), 5)
    return ended[0] - t0


def ticks_to_stop_on_monitor_finish() -> int:
    """A monitor finish rule fires (published in the monitor's slot of a step, as the runtime
    orders it) until the executor has stopped the action."""
    h = make_harness([reply("", ("wait", {"seconds": 30}))])
    ended: list[int] = []
    h.bus.subscribe(names.SKILL_EVENTS, names.T_AGENT_EVENT,
                    callback=lambda e: ended.append(h.executor.ticks)
                    if e.kind == "skill_ended" else None, qos=QoS(depth=50))
    pub = h.bus.publisher(names.MONITOR_VERDICTS, names.T_MONITOR_VERDICT)
    armed: list[str] = []
    fired: list[int] = []

    def monitor(dt: float) -> None:
        if armed:
            aid = armed.pop()
            fired.append(h.executor.ticks)
            pub.publish(MonitorVerdict(aid, "wait", "done", "true", 0.95, decision="finish",
                                       generation=h.executor.generation))

    planner = h.runtime.components.pop()  # keep the order: executor, monitor, planner
    h.runtime.add("monitor", monitor)
    h.runtime.components.append(planner)
    h.say("wait")
    h.run_until(lambda: bool(h.executor.running), 5)
    armed.append(next(iter(h.executor.running)))
    h.run_until(lambda: bool(ended), 5)
    return ended[0] - fired[0]


def ticks_from_action_end_to_next_step() -> int:
    h = make_harness([reply("", ("update_plan", {"steps": [
        {"description": "a", "tool": "wait", "args": {"seconds": 0.1}},
        {"description": "b", "tool": "wait", "args": {"seconds": 0.1}},
        {"description": "check"}]}), ("wait", {"seconds": 0.1})),
        reply("", ("finish_task", {"summary": "ok", "success": True}))])
    seen: list[tuple[str, int]] = []
    h.bus.subscribe(names.SKILL_EVENTS, names.T_AGENT_EVENT,
                    callback=lambda e: seen.append((e.kind, h.executor.ticks))
                    if e.kind in ("skill_started", "skill_ended") else None,
                    qos=QoS(depth=50))
    h.say("two waits")
    h.run_until(lambda: h.planner.status == "succeeded", 10)
    first_end = next(t for k, t in seen if k == "skill_ended")
    second_start = [t for k, t in seen if k == "skill_started"][1]
    return second_start - first_end


def run(quick: bool = False) -> list[dict[str, Any]]:
    q_turns, q_turn_s, q_tick_s = turns_per_pick_and_place(True)
    b_turns, b_turn_s, _ = turns_per_pick_and_place(False)
    rate, max_gap, target = control_rate_during_model_call(0.6 if quick else 1.0)
    stop_ticks = ticks_to_stop_on_takeover()
    monitor_ticks = ticks_to_stop_on_monitor_finish()
    step_ticks = ticks_from_action_end_to_next_step()
    return [
        {"name": "planner turns per pick-and-place (plan queue)", "value": q_turns,
         "unit": "turns", "baseline": f"{b_turns} without the queue",
         "note": "expected about 4: plan and move, point the pick, point the place, finish"},
        {"name": "harness overhead per planner turn", "value": q_turn_s * 1e3, "unit": "ms",
         "baseline": "20 ms control period"},
        {"name": "executor overhead per control tick", "value": q_tick_s * 1e6, "unit": "us",
         "baseline": "20000 us control period"},
        {"name": "control rate while a model call is in flight", "value": rate, "unit": "Hz",
         "baseline": f"{target:g} Hz target", "note": f"max gap {max_gap * 1e3:.1f} ms"},
        {"name": "monitor finish decision to skill stopped", "value": monitor_ticks,
         "unit": "control ticks", "baseline": "1 tick required"},
        {"name": "action end to next plan step started", "value": step_ticks,
         "unit": "control ticks", "baseline": "1 tick required"},
        {"name": "operator takeover to skill stopped", "value": stop_ticks,
         "unit": "control ticks", "baseline": "1 tick required"},
    ]
