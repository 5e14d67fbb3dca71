"""Monitor benchmark: its judgement on the labelled ticks of the product's own episodes
(:mod:`.monitor_ticks`: accuracy, wrong-tick fires and the per-pick replay per backend), and
the monitor's own image work per tick (select, crop, resize, mark, encode)
for 2 cameras x 2 frames at ``image_max_side: 448``, against its 1.5 s tick period (the design's
aim: a small fraction, under 2 %).

* ``engine tick``: a real :class:`~solarian_agent.core.monitor.MonitorEngine` tick on the bus
  (the overhead camera resized to 448 px, the wrist camera as a close-up at capture resolution,
  ``mark_target`` and ``reference`` on, history 2) with a backend that answers at once, so the
  time is the engine's own.  Its baseline is the same pipeline done from scratch for all 2 x 2
  frames every tick (no reuse of the previous tick's frame).
* ``share of period``: the engine tick over ``period_s``; baseline the 2 % aim.

Frames are the simulator's renders (the cameras the demo runs), or noise where the simulator is
not importable.  Run alone with ``python -m solarian_agent.benchmarks.monitor``.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np

from ..core import names
from ..core.clock import FakeClock
from ..core.config import MonitorConfig
from ..core.messages import AgentEvent, Image
from ..core.monitor import MonitorEngine, draw_mark, select_view
from ..core.planner import InlineCaller
from ..core.transport import Bus, QoS
from ..perception import images as im
from ..perception.vision import MonitorTickRequest, TickReply

PERIOD_S = 1.5
SIDE = 448
CLOSE_UP = [0.1, 0.4, 0.9, 1.0]


class _Instant:
    name = "instant"
    model = "none"

    def answer_tick(self, request: MonitorTickRequest, *, timeout_s: float) -> TickReply:
        return TickReply({})

    def describe(self, frame: Any, focus: str, *, timeout_s: float) -> Any:  # pragma: no cover
        raise NotImplementedError


def _frames(n: int) -> dict[str, list[np.ndarray]]:
    try:
        from ..arm.kinematics import ArmModel
        from ..sim.render import Renderer
        from ..sim.world import World

        arm = ArmModel.default()
        world = World(arm, seed=3)
        r = Renderer(arm)
        out: dict[str, list[np.ndarray]] = {"overhead": [], "wrist": []}
        for i in range(n):
            world.command({world.joint_names[0]: 0.02 * i, "gripper": 0.06 - 0.004 * i})
            for _ in range(5):
                world.step(0.02)
            out["overhead"].append(r.render("overhead", world).copy())
            out["wrist"].append(r.render("wrist", world).copy())
        return out
    except Exception:
        rng = np.random.default_rng(0)
        return {"overhead": [rng.integers(0, 256, (480, 640, 3), np.uint8) for _ in range(n)],
                "wrist": [rng.integers(0, 256, (360, 480, 3), np.uint8) for _ in range(n)]}


def _engine_tick_ms(frames: dict[str, list[np.ndarray]], ticks: int) -> list[float]:
    clock, bus = FakeClock(), Bus()
    cat = [{"name": "pick", "description": "pick", "parameters": {"type": "object"},
            "image_points": ["point"], "camera": "overhead",
            "monitor": [{"name": "held", "type": "predicate"}]}]
    bus.create_service(names.TOOL_CATALOGUE, names.T_TOOL_CATALOGUE, lambda _r: cat)
    cfg = MonitorConfig(period_s=PERIOD_S, history=2, image_max_side=SIDE, mark_target=True,
                        reference=True, close_ups={"wrist": CLOSE_UP})
    eng = MonitorEngine(bus, clock, cfg, _Instant(), cameras=["overhead", "wrist"],
                        catalogue=cat, caller=InlineCaller(),
                        target_box=lambda a, t, cam, f: (200, 150, 260, 200))
    pubs = {c: bus.publisher(names.image_topic(c), names.T_IMAGE) for c in frames}
    ev = bus.publisher(names.SKILL_EVENTS, names.T_AGENT_EVENT, QoS(depth=10))

    def publish(i: int) -> None:
        for c, fs in frames.items():
            img = fs[i % len(fs)]
            img.setflags(write=False)
            pubs[c].publish(Image(img, clock.now(), c, i + 1))

    publish(0)
    ev.publish(AgentEvent(clock.wall(), "skill_started", {
        "by": "agent", "skill": "pick", "params": {"point": [320.0, 240.0]},
        "action_id": "a1", "generation": 1, "trackers": ["overhead.target"]}))
    times = []
    for i in range(1, ticks + 1):
        clock.advance(PERIOD_S)
        publish(i)
        t0 = time.perf_counter()
        eng.tick()
        times.append((time.perf_counter() - t0) * 1000)
    return times[2:]  # steady state: after the kept first frame and the reference


def _cold_tick_ms(frames: dict[str, list[np.ndarray]], ticks: int) -> list[float]:
    close = {"wrist": CLOSE_UP}
    times = []
    for i in range(1, ticks + 1):
        t0 = time.perf_counter()
        for cam, fs in frames.items():
            for k in (i - 1, i):  # previous and current, both redone
                px, scaling, _ = select_view(fs[k % len(fs)], cam, close, SIDE)
                px = draw_mark(np.ascontiguousarray(px), (20, 20, 60, 60))
                im.encode(px, "jpeg", 90)
        times.append((time.perf_counter() - t0) * 1000)
    return times


def run(quick: bool = False) -> list[dict[str, Any]]:
    ticks = 15 if quick else 60
    frames = _frames(8)
    eng = statistics.median(_engine_tick_ms(frames, ticks))
    cold = statistics.median(_cold_tick_ms(frames, ticks))
    period_ms = PERIOD_S * 1000
    from .monitor_ticks import run as tick_rows

    return [
        {"name": "monitor tick image work (2 cams x 2 frames, 448 px)", "value": eng,
         "unit": "ms", "baseline": cold, "note": "baseline: every frame redone each tick"},
        {"name": "monitor image work, share of the 1.5 s period", "value": 100 * eng / period_ms,
         "unit": "%", "baseline": 2.0, "note": "baseline: the aim"},
        {"name": "monitor cold pipeline (4 frames) vs period", "value": cold, "unit": "ms",
         "baseline": period_ms, "note": "select, crop, resize, mark, encode"},
    ] + tick_rows(quick)


if __name__ == "__main__":  # pragma: no cover
    from . import format_table

    print(format_table({"suite": "monitor", **r} for r in run()))
