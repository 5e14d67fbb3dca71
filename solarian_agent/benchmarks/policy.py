"""The learned pick policy, through the product (``solarian-agent bench policy``).

* Policy pick beside scripted pick: the tidy task through ``solarian-agent demo``'s system
  (step-verified ``rules`` planner, ``cv`` monitor) with ``pick_object`` bound to either, on
  seeds from :data:`PICK_SEED_BASE` (the policy trained on seeds from 1 000 000): task success,
  simulated seconds per ``pick_object`` call and how the calls ended (monitor finish, timeout,
  failure).  The scripted pick is the baseline.
* Control rate under slow inference: the policy skill on a real-time control loop (system
  clock, 50 Hz) with a backend that takes :data:`SLOW_S` per call (longer than the control
  period), against the same loop with an instant backend: control ticks per second, the
  longest gap between two ticks, and how many chunks arrived late.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

PICK_SEED_BASE = 90_000
SEEDS = {"full": 20, "quick": 2}
SLOW_S = 0.15
RATE_S = 3.0


class _Timed:
    """A backend answering a constant chunk after ``delay_s`` (on the inference thread)."""

    name = "timed"

    def __init__(self, delay_s: float, chunk: int) -> None:
        self.delay_s = delay_s
        self.chunk = chunk

    def run(self, feeds: Any) -> dict[str, np.ndarray]:
        if self.delay_s:
            time.sleep(self.delay_s)
        return {"action": np.zeros((1, self.chunk, 6))}

    def close(self) -> None:
        pass


class _Arm:
    def __init__(self) -> None:
        self.sent = 0

    def state(self) -> Any:
        from ..arm.kinematics import JOINT_NAMES
        from ..core.messages import JointState

        return JointState(0.0, JOINT_NAMES, (0.0,) * 6, (0.0,) * 6)

    def command(self, target: Any, max_velocity: float = 0.0) -> Any:
        self.sent += 1
        return target

    def hold(self) -> None:
        pass


def control_rate(delay_s: float, seconds: float = RATE_S) -> dict[str, float]:
    """The policy skill on a real-time 50 Hz loop for ``seconds``; its backend takes
    ``delay_s`` per call on the inference thread."""
    from ..core import names
    from ..core.clock import SystemClock
    from ..core.executor import SkillExecutor
    from ..core.messages import SkillGoal
    from ..core.skill import Tool
    from ..core.transport import Bus
    from ..skills.policy import LoadedPolicy, PolicySkill, default_policy_config_path
    from ..skills.policy.config import load_policy_config

    cfg = load_policy_config(default_policy_config_path())
    cfg = type(cfg)(**{**cfg.__dict__, "state": type(cfg.state)(
        cfg.state.input, cfg.state.joints, "none", cfg.state.goal_camera, None,
        cfg.state.velocities)})
    pol = LoadedPolicy(cfg, _Timed(delay_s, cfg.chunking.chunk_length))
    clock, bus, arm = SystemClock(), Bus(), _Arm()
    ex = SkillExecutor(bus, clock, {"pol": Tool(PolicySkill, {"policy": pol,
                                                             "inference": "thread"})},
                       {"arm": arm})
    bus.send_goal(names.skill_action("pol"),
                  SkillGoal("pol", {"point": [320, 240]}, ex.generation, "b1"))
    period = 0.02
    stamps: list[float] = []
    t0 = time.perf_counter()
    nxt = t0
    ra = None
    while time.perf_counter() - t0 < seconds:
        ex.tick()
        stamps.append(time.perf_counter())
        ra = ra or ex.running.get("b1")
        nxt += period
        time.sleep(max(0.0, nxt - time.perf_counter()))
    stats = ra.skill.runner.stats() if ra is not None else {}
    ex.stop_all("benchmark over")
    ex.tick()
    gaps = np.diff(stamps)
    return {"hz": (len(stamps) - 1) / (stamps[-1] - stamps[0]), "max_gap_ms": 1000 * gaps.max(),
            "late": float(stats.get("late_chunks", 0)), "chunks": float(stats.get("chunks", 0)),
            "sent": float(arm.sent)}


def run(quick: bool = False) -> list[dict[str, Any]]:
    from .tidy import pick_rows, run_picks

    n = SEEDS["quick" if quick else "full"]
    rows = pick_rows(run_picks(range(PICK_SEED_BASE, PICK_SEED_BASE + n)))
    fast = control_rate(0.0, 1.0 if quick else RATE_S)
    slow = control_rate(SLOW_S, 1.0 if quick else RATE_S)
    rows.append({"name": f"control rate, inference {SLOW_S * 1000:.0f} ms per chunk",
                 "value": round(slow["hz"], 1), "unit": "Hz",
                 "baseline": f"instant inference {fast['hz']:.1f} Hz (target 50 Hz)",
                 "note": f"longest tick gap {slow['max_gap_ms']:.1f} ms (instant: "
                         f"{fast['max_gap_ms']:.1f} ms); chunks {slow['chunks']:.0f}, late "
                         f"{slow['late']:.0f} (held each time; instant: {fast['chunks']:.0f}, "
                         f"late {fast['late']:.0f}); inference on its own thread"})
    return rows
