"""The ``teleop`` command's two modes: keyboard jogging, and an SO-101 leader arm.

Both run the follower's ``ArmController`` on its own thread at the control rate, so every
target goes through the joint limits, the speed clamp, the workspace box and the e-stop latch.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import IO, Any

from solarian_agent.core.clock import Clock, SystemClock
from solarian_agent.hw.feetech.arm import FeetechArm
from solarian_agent.hw.feetech.controller import ArmController, ArmControllerConfig
from solarian_agent.hw.feetech.health import HealthMonitor
from solarian_agent.hw.leader import LeaderConfig, LeaderFollower, LeaderStatus
from solarian_agent.hw.teleop import HELP, KeyboardTeleop, raw_terminal, status_line

LEADER_KEYS = """
    e-stop   x        reset the e-stop   z        pause / follow again   p
    quit     Esc or Ctrl-D (end of input)
"""


def _controller(arm: FeetechArm, clock: Clock) -> tuple[ArmController, threading.Event,
                                                         threading.Thread]:
    ctl = ArmController(arm, clock, ArmControllerConfig(rate_hz=arm.config.rate_hz,
                                                        command_timeout_s=2.0),
                        health=HealthMonitor(arm.config.health,
                                             read_current=arm.read_current_a))
    ctl.step()  # the first reading (and torque on, holding here) before any key counts
    stop = threading.Event()
    loop = threading.Thread(target=ctl.run, args=(stop,), name="arm-control", daemon=True)
    loop.start()
    return ctl, stop, loop


def run_keyboard(arm: FeetechArm, keys: IO[str] | None = None,
                 out: Callable[[str], None] = print) -> int:
    """Jog from the terminal; one line per key with whole joint names."""
    ctl, stop, loop = _controller(arm, SystemClock())

    def show(kind: str, detail: dict[str, Any]) -> None:
        out(status_line(detail, ctl.positions()))

    out("Teleop keys:" + HELP)
    tele = KeyboardTeleop(ctl, arm.limits, show)
    try:
        with raw_terminal():
            tele.run(keys or sys.stdin)
    finally:
        stop.set()
        loop.join(timeout=2.0)
    return 0


def run_leader(follower: FeetechArm, leader: FeetechArm, keys: IO[str] | None = None,
               out: Callable[[str], None] = print, clock: Clock | None = None,
               config: LeaderConfig | None = None, max_steps: int | None = None) -> int:
    """Follow the leader arm until Esc / end of input on ``keys`` (or ``max_steps``)."""
    clock = clock or SystemClock()
    leader.set_torque(False)  # the leader is moved by hand
    ctl, stop, loop = _controller(follower, clock)
    lf = LeaderFollower(lambda: leader.read_state().positions, ctl, follower.limits, config,
                        estop_reason=lambda: ctl.latch.reason if ctl.latch.tripped else None)
    out("Leader-arm teleop: move the leader by hand; keys:" + LEADER_KEYS)
    last: list[str] = [""]

    def report(status: LeaderStatus) -> None:
        # a new line when the state or its reason changes; positions change all the time
        key = status.state if status.state == "following" else status.message
        if key != last[0]:
            last[0] = key
            out(status.message)

    def follow() -> None:
        period = 1.0 / follower.config.rate_hz
        next_t = clock.now()
        n = 0
        while not stop.is_set() and (max_steps is None or n < max_steps):
            report(lf.step())
            n += 1
            next_t += period
            clock.sleep_until(next_t, stop)
        stop.set()

    worker = threading.Thread(target=follow, name="leader-follow", daemon=True)
    worker.start()
    stream = keys or sys.stdin
    try:
        with raw_terminal():
            while not stop.is_set():
                key = stream.read(1)
                if not key or key in ("\x1b", "\x04"):
                    break
                if key.lower() == "x":
                    ctl.estop("operator e-stop (leader teleop key)")
                    out("E-stop latched: the follower holds. Press z to reset it.")
                elif key.lower() == "z":
                    released = ctl.reset_estop()
                    lf.disengage()
                    out("E-stop reset: bring the leader to the follower's pose to follow again."
                        if released else "The e-stop was not latched.")
                elif key.lower() == "p":
                    if lf.paused:
                        lf.resume()
                        out("Following again once the leader is at the follower's pose.")
                    else:
                        lf.pause()
                        out("Paused: the follower holds.")
    finally:
        stop.set()
        worker.join(timeout=2.0)
        loop.join(timeout=2.0)
    out(f"Leader teleop ended after {lf.commands} follower commands.")
    return 0


__all__ = ["LEADER_KEYS", "run_keyboard", "run_leader"]
