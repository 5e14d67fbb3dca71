"""Keyboard teleop: the key map, operator events, jogs through the safety clamp."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import pytest

from solarian_agent.arm.safety import EStopLatch, EStopLatchedError
from solarian_agent.hw.feetech import default_so101
from solarian_agent.hw.teleop import KeyboardTeleop, TeleopConfig, key_to_action

LIMITS = default_so101().limits()


class FakeTarget:
    """Records what teleop sends (stands in for ArmController's command interface)."""

    def __init__(self, pos: dict[str, float]) -> None:
        self.pos = pos
        self.commands: list[dict[str, float]] = []
        self.latch = EStopLatch()
        self.holds = 0

    def setpoint(self) -> dict[str, float]:
        return dict(self.pos)

    def command(self, target: Mapping[str, float], source: str = "agent",
                max_velocity: float | None = None) -> None:
        assert source == "operator"
        self.latch.check()
        self.commands.append(dict(target))
        self.pos.update(target)

    def hold(self, reason: str = "") -> None:
        self.holds += 1

    def estop(self, reason: str) -> None:
        self.latch.trip(reason)

    def reset_estop(self) -> bool:
        return self.latch.reset()


def make(pos: dict[str, float] | None = None) -> tuple[KeyboardTeleop, FakeTarget,
                                                       list[tuple[str, dict[str, Any]]]]:
    target = FakeTarget(pos or {n: 0.0 for n in LIMITS.names})
    events: list[tuple[str, dict[str, Any]]] = []
    tele = KeyboardTeleop(target, LIMITS, lambda k, d: events.append((k, d)))
    return tele, target, events


def test_key_map() -> None:
    assert key_to_action("q") == key_to_action("Q")
    assert (key_to_action("q").joint, key_to_action("q").direction) == ("shoulder_pan", 1)
    assert (key_to_action("a").joint, key_to_action("a").direction) == ("shoulder_pan", -1)
    assert key_to_action("t").joint == "wrist_roll"
    assert key_to_action("o").kind == "gripper" and key_to_action("o").direction == 1
    assert key_to_action("c").direction == -1
    assert [key_to_action(k).kind for k in ["h", "x", "z", "\x1b"]] == \
        ["home", "estop", "reset", "quit"]
    assert key_to_action(" ").kind == "hold"
    assert key_to_action("?").kind == "unknown"
    jog_joints = {key_to_action(k).joint for k in "qwertasdfg"}
    assert jog_joints == set(LIMITS.names) - {"gripper"}


def test_every_key_is_an_operator_event_and_jogs_are_clamped() -> None:
    tele, target, events = make()
    n = tele.run(io.StringIO("qqw?o\n"))
    assert n == 5 and len(events) == 5
    assert all(kind == "teleop_key" for kind, _ in events)
    assert [d["action"] for _, d in events] == ["jog", "jog", "jog", "unknown", "gripper"]
    assert target.pos["shoulder_pan"] == pytest.approx(0.10)
    assert target.pos["gripper"] == pytest.approx(0.1)  # one jaw step: 0.1 rad
    assert events[0][1]["target"] == {"shoulder_pan": pytest.approx(0.05)}


def test_jog_respects_limits_and_speed() -> None:
    pos = {n: 0.0 for n in LIMITS.names}
    pos["elbow_flex"] = 1.68
    pos["gripper"] = -0.15
    tele, target, events = make(pos)
    tele.run(io.StringIO("eeec"))
    assert target.pos["elbow_flex"] == 1.69  # the limit, never past it
    assert target.pos["gripper"] == -0.174533  # the jaw's -10 degree limit, never past it
    big = KeyboardTeleop(target, LIMITS, lambda k, d: None, TeleopConfig(jog_step=5.0))
    big.handle_key("q")
    # one key press asks for at most min(max_velocity * jog_dt, max_step) = min(0.15, 0.1)
    assert target.commands[-1]["shoulder_pan"] == pytest.approx(0.10)
    slow = KeyboardTeleop(target, LIMITS, lambda k, d: None,
                          TeleopConfig(jog_step=5.0, jog_dt=0.02))
    slow.handle_key("a")
    assert target.commands[-1]["shoulder_pan"] == pytest.approx(0.10 - 1.5 * 0.02)


def test_home_estop_reset_and_quit() -> None:
    tele, target, events = make({n: 0.5 for n in LIMITS.names})
    n = tele.run(io.StringIO("hxqzq \x1bqqq"))
    actions = [d["action"] for _, d in events]
    assert actions == ["home", "estop", "jog", "reset", "jog", "hold", "quit"]
    assert n == 7  # stopped at the quit key
    assert target.commands[0] == {n: 0.0 for n in LIMITS.names}
    assert events[2][1]["error_type"] == "EStopLatchedError"  # refused while latched
    assert events[2][1]["error"].startswith("E-stop is latched")  # said as a sentence
    assert events[3][1]["released"] is True and "error" not in events[4][1]
    assert target.holds == 1
    assert isinstance(EStopLatchedError("x"), Exception)


def test_broken_listener_or_unknown_position_does_not_kill_the_loop() -> None:
    target = FakeTarget({})

    def boom(kind: str, detail: dict[str, Any]) -> None:
        raise RuntimeError("listener down")

    tele = KeyboardTeleop(target, LIMITS, boom)
    assert tele.run(io.StringIO("qqh")) == 3
    assert target.commands == [{n: 0.0 for n in LIMITS.names}]  # only home went through
