"""Torque coming on over the pty bus never drives a joint back into its calibrated window in
one write: every goal and torque-enable frame on the wire is decoded and checked, at start-up
and on an e-stop reset after ``torque_off``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hw_helpers import ArmPassThrough, make, settle, tick

from solarian_agent.hw.errors import HardwareError
from solarian_agent.hw.feetech import FeetechArm
from solarian_agent.hw.feetech import protocol as P
from solarian_agent.hw.feetech.arm import ArmState
from solarian_agent.hw.feetech.protocol import STS3215, Instruction
from solarian_agent.hw.feetech.simbus import SimulatedBus

REGISTERS = (STS3215.TORQUE_ENABLE, STS3215.GOAL_POSITION)


def wire(sim: SimulatedBus) -> list[tuple[str, int, int]]:
    """(register, servo id, value) of every torque-enable and goal-position value the host
    wrote, in wire order (WRITE and SYNC_WRITE frames decoded byte for byte)."""
    out: list[tuple[str, int, int]] = []
    for frame in sim.frames():
        try:
            pkt = P.parse_packet(frame)
        except Exception:
            continue
        writes: list[tuple[int, int, bytes]] = []
        if pkt.instruction == Instruction.WRITE and pkt.params:
            writes.append((pkt.servo_id, pkt.params[0], bytes(pkt.params[1:])))
        elif pkt.instruction == Instruction.SYNC_WRITE and len(pkt.params) >= 2:
            addr, n, body = pkt.params[0], pkt.params[1], bytes(pkt.params[2:])
            for k in range(0, len(body) - n, n + 1):
                writes.append((body[k], addr, body[k + 1:k + 1 + n]))
        for sid, addr, data in writes:
            for reg in REGISTERS:
                off = reg.address - addr
                if off >= 0 and off + reg.size <= len(data):
                    out.append((reg.name, sid, P.decode_value(data[off:off + reg.size],
                                                              reg.sign_bit)))
    return out


def check_goals(writes: list[tuple[str, int, int]], sid: int, present: float, step: float,
                window: tuple[int, int]) -> list[int]:
    goals = [v for name, s, v in writes if name == "goal_position" and s == sid]
    assert goals, "no goal was written for the joint"
    for g in goals:
        assert abs(g - present) <= step + 1, (g, present, step)
        assert window[0] <= g <= window[1], (g, window)
    return goals


def test_a_joint_far_outside_its_window_at_start_up_keeps_torque_off(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    j = arm.calibration.joint("shoulder_lift")
    sid, (lo, hi) = j.servo_id, j.raw_window()
    ctl, clock, events = make(arm)
    step = ctl.step_limit("shoulder_lift") / j.units_per_tick  # in ticks
    assert 10 < step < 400
    sim.set_position(sid, hi + 400)  # sagged past its window with torque off
    sim.clear_frames()
    r = tick(ctl, clock, 10)
    settle(sim, arm.bus)
    assert r.mode == "torque_off" and not any(sim.torque(i) for i in range(1, 7))
    why = [f for f in r.faults if f.startswith("torque stays off")]
    assert why and "shoulder_lift" in why[0] and "above its calibrated window" in why[0]
    assert "by hand" in why[0] and "elbow_flex" not in why[0]
    assert r.diagnostics.level == "error" and "torque stays off" in r.diagnostics.message
    assert [k for k, _ in events].count("torque_refused") == 1  # said once, shown every step
    assert wire(sim) == []  # not one goal, not one torque write
    # moved back by hand: still more than a step out, then within one step
    sim.set_position(sid, hi + 2 * step)
    r = tick(ctl, clock, 3)
    settle(sim, arm.bus)
    assert r.mode == "torque_off" and wire(sim) == []
    here = hi + step / 2
    sim.set_position(sid, here)
    r = tick(ctl, clock, 3)
    settle(sim, arm.bus)
    assert r.mode == "holding" and all(sim.torque(i) for i in range(1, 7))
    assert not any(f.startswith("torque stays off") for f in r.faults)
    writes = wire(sim)
    goals = check_goals(writes, sid, here, step, (lo, hi))
    assert goals[0] == hi  # held at the window's edge, half a step away
    # the goal is on the wire before the torque
    first_goal = next(i for i, w in enumerate(writes) if w[0] == "goal_position")
    first_torque = next(i for i, w in enumerate(writes) if w[0] == "torque_enable" and w[2])
    assert first_goal < first_torque


def test_estop_reset_after_torque_off_with_a_joint_moved_out_by_hand(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    j = arm.calibration.joint("elbow_flex")
    sid, (lo, hi) = j.servo_id, j.raw_window()
    ctl, clock, events = make(arm, estop_action="torque_off")
    r = tick(ctl, clock)
    settle(sim, arm.bus)
    assert r.mode == "holding" and all(sim.torque(i) for i in range(1, 7))
    ctl.estop("operator")
    tick(ctl, clock, 2)
    settle(sim, arm.bus)
    assert not any(sim.torque(i) for i in range(1, 7))
    step = ctl.step_limit("elbow_flex") / j.units_per_tick
    sim.set_position(sid, lo - 300)  # pushed below its window while limp
    tick(ctl, clock, 3)
    sim.clear_frames()
    assert ctl.reset_estop() is True
    r = tick(ctl, clock, 5)
    settle(sim, arm.bus)
    assert r.mode == "torque_off" and not r.estop
    assert any("elbow_flex" in f and "below its calibrated window" in f for f in r.faults)
    assert not any(sim.torque(i) for i in range(1, 7)) and wire(sim) == []
    assert ("torque_refused" in [k for k, _ in events])
    here = lo + 20  # back inside
    sim.set_position(sid, here)
    r = tick(ctl, clock, 2)
    settle(sim, arm.bus)
    assert r.mode == "holding" and all(sim.torque(i) for i in range(1, 7))
    goals = check_goals(wire(sim), sid, here, step, (lo, hi))
    assert set(goals) == {here}  # torque came back holding where it is


def test_within_one_step_outside_is_held_at_the_edge(sim: SimulatedBus,
                                                    arm: FeetechArm) -> None:
    j = arm.calibration.joint("wrist_flex")
    sid, (lo, hi) = j.servo_id, j.raw_window()
    ctl, clock, _ = make(arm)
    step = ctl.step_limit("wrist_flex") / j.units_per_tick
    sim.set_position(sid, lo - step * 0.8)
    sim.clear_frames()
    r = tick(ctl, clock, 3)
    settle(sim, arm.bus)
    assert r.mode == "holding" and all(sim.torque(i) for i in range(1, 7))
    goals = check_goals(wire(sim), sid, lo - step * 0.8, step, (lo, hi))
    assert set(goals) == {lo}


def test_joints_the_operator_released_stay_released_through_an_estop_reset(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    """Someone guiding the arm by hand after disable_torque: an e-stop and its reset must not
    stiffen the joints under their hands; only enable_torque does, holding where the arm is."""
    for action in ("hold", "torque_off"):
        ctl, clock, _ = make(arm, estop_action=action)
        ctl.step()
        settle(sim, arm.bus)
        assert all(sim.torque(i) for i in range(1, 7))
        ctl.disable_torque()
        settle(sim, arm.bus)
        assert not any(sim.torque(i) for i in range(1, 7))
        ctl.estop("bumper")
        tick(ctl, clock, 3)
        assert ctl.reset_estop()
        r = tick(ctl, clock, 5)
        settle(sim, arm.bus)
        assert r.mode == "torque_off" and not any(sim.torque(i) for i in range(1, 7))
        sim.set_position(2, sim.servos[2].position + 40)  # moved by hand meanwhile
        ctl.enable_torque()
        r = tick(ctl, clock, 2)
        settle(sim, arm.bus)
        assert r.mode == "holding" and all(sim.torque(i) for i in range(1, 7))
        assert r.goal == r.state.positions  # held where the hand left it


# --------------------------------------------------------------------------- failed writes

WRITE_ERROR = "goal write failed (test)"
TORQUE_ERROR = "torque write failed (test)"


class _FlakyArm(ArmPassThrough):
    """The sim's arm failing the next ``fail_writes`` goal writes, the next ``fail_torque``
    torque writes (nothing reaches the wire then, as when the port write itself fails) and
    every read while ``fail_read``."""

    def __init__(self, arm: FeetechArm) -> None:
        super().__init__(arm)
        self.fail_writes = 0
        self.fail_torque = 0
        self.fail_read = False

    def read_state(self) -> ArmState:
        if self.fail_read:
            raise HardwareError("servo 1 did not answer (test)")
        return super().read_state()

    def write_goal(self, positions: Mapping[str, float]) -> Mapping[str, int]:
        if self.fail_writes > 0:
            self.fail_writes -= 1
            raise HardwareError(WRITE_ERROR)
        return super().write_goal(positions)

    def set_torque(self, enabled: bool, joints: Sequence[str] | None = None) -> None:
        if self.fail_torque > 0:
            self.fail_torque -= 1
            raise HardwareError(TORQUE_ERROR)
        super().set_torque(enabled, joints)


def _torque(sim: SimulatedBus) -> list[bool]:
    return [sim.torque(i) for i in range(1, 7)]


def test_a_failed_holding_write_is_reported_and_the_last_goal_that_went_out_is_kept(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    flaky = _FlakyArm(arm)
    ctl, clock, events = make(flaky)  # type: ignore[arg-type]
    r = tick(ctl, clock)
    settle(sim, arm.bus)
    assert r.mode == "holding" and r.faults == () and all(_torque(sim))
    held = dict(r.goal)
    events.clear()
    flaky.fail_writes = 1
    sim.clear_frames()
    r = tick(ctl, clock)
    settle(sim, arm.bus)
    assert r.mode == "holding" and not r.estop
    assert r.goal == {}  # nothing went out, nothing is reported as written
    assert r.faults == (f"write failed: {WRITE_ERROR}",)
    assert r.diagnostics.level == "error" and f"write failed: {WRITE_ERROR}" in \
        r.diagnostics.message
    assert events == [("fault", {"error": WRITE_ERROR})]
    assert wire(sim) == []
    # the bus then stops answering: the setpoint (jogging base) is still the goal that went
    # out, not empty
    flaky.fail_read = True
    r = tick(ctl, clock)
    assert r.mode == "fault" and r.state is None
    assert ctl.setpoint() == held


def test_after_a_failed_tracking_write_the_next_goal_is_one_step_from_the_last_sent(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    """A goal that did not go out is not a base to step from: the write after it is one step
    from the last goal on the wire, never two."""
    flaky = _FlakyArm(arm)
    ctl, clock, events = make(flaky)  # type: ignore[arg-type]
    j = "shoulder_pan"
    r = tick(ctl, clock)
    assert r.mode == "holding" and r.faults == ()
    lim, step = ctl.limits.joint(j), ctl.step_limit(j)
    p0 = r.goal[j]
    sign = 1.0 if p0 + 10 * step <= lim.upper else -1.0
    ctl.command({j: p0 + sign * 10 * step})
    r1 = tick(ctl, clock)
    assert r1.mode == "tracking" and abs(r1.goal[j] - (p0 + sign * step)) < 1e-9
    events.clear()
    flaky.fail_writes = 1
    r2 = tick(ctl, clock)
    assert r2.mode == "tracking" and r2.goal == {}
    assert r2.faults == (f"write failed: {WRITE_ERROR}",)
    assert events == [("fault", {"error": WRITE_ERROR})]
    settle(sim, arm.bus)
    sim.clear_frames()
    r3 = tick(ctl, clock)
    settle(sim, arm.bus)
    assert r3.mode == "tracking" and r3.faults == ()
    assert abs(r3.goal[j] - (r1.goal[j] + sign * step)) < 1e-9
    sent = [v for name, s, v in wire(sim)
            if name == "goal_position" and s == arm.calibration.joint(j).servo_id]
    assert sent == [arm.calibration.joint(j).to_raw(r3.goal[j])]


def test_a_failed_goal_write_at_torque_on_keeps_torque_off_and_torque_on_is_retried(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    flaky = _FlakyArm(arm)
    flaky.fail_writes = 1
    ctl, clock, events = make(flaky)  # type: ignore[arg-type]
    sim.clear_frames()
    r = tick(ctl, clock)
    settle(sim, arm.bus)
    assert r.mode == "torque_off" and not r.estop and r.goal == {}
    assert r.faults == (f"write failed: {WRITE_ERROR}",)
    assert events == [("fault", {"error": WRITE_ERROR})]
    assert wire(sim) == [] and not any(_torque(sim))  # no torque without its goal first
    r = tick(ctl, clock)
    settle(sim, arm.bus)
    assert r.mode == "holding" and r.faults == () and all(_torque(sim))
    assert events == [("fault", {"error": WRITE_ERROR})]


def test_a_failed_torque_on_write_is_reported_and_retried(sim: SimulatedBus,
                                                         arm: FeetechArm) -> None:
    flaky = _FlakyArm(arm)
    flaky.fail_torque = 1
    ctl, clock, events = make(flaky)  # type: ignore[arg-type]
    sim.clear_frames()
    r = tick(ctl, clock)
    settle(sim, arm.bus)
    assert r.mode == "torque_off" and not r.estop and r.goal == {}
    assert r.faults == (f"torque on failed: {TORQUE_ERROR}",)
    assert events == [("fault", {"error": TORQUE_ERROR})]
    assert not any(_torque(sim))
    assert {name for name, _, _ in wire(sim)} == {"goal_position"}
    r = tick(ctl, clock)
    settle(sim, arm.bus)
    assert r.mode == "holding" and r.faults == () and all(_torque(sim))


def test_a_failed_torque_off_write_at_an_estop_is_reported_and_retried(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    flaky = _FlakyArm(arm)
    ctl, clock, events = make(flaky, estop_action="torque_off")  # type: ignore[arg-type]
    r = tick(ctl, clock)
    settle(sim, arm.bus)
    assert r.mode == "holding" and all(_torque(sim))
    events.clear()
    flaky.fail_torque = 1
    ctl.estop("operator")
    r = tick(ctl, clock)
    settle(sim, arm.bus)
    assert r.mode == "estop" and r.estop
    assert r.faults == (f"torque off failed: {TORQUE_ERROR}",)
    assert events == [("estop", {"reason": "operator"}), ("fault", {"error": TORQUE_ERROR})]
    assert all(_torque(sim))
    r = tick(ctl, clock)  # still on: tried again
    settle(sim, arm.bus)
    assert r.mode == "estop" and r.faults == () and not any(_torque(sim))


def test_the_refusal_names_every_joint_far_outside_its_window_exactly(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    lift, elbow = arm.calibration.joint("shoulder_lift"), arm.calibration.joint("elbow_flex")
    sim.set_position(lift.servo_id, lift.raw_window()[1] + 400)
    sim.set_position(elbow.servo_id, elbow.raw_window()[0] - 300)
    ctl, clock, events = make(arm)
    sim.clear_frames()
    r = tick(ctl, clock, 3)
    settle(sim, arm.bus)
    p = r.state.positions
    parts = []
    for name, side in (("shoulder_lift", "above"), ("elbow_flex", "below")):
        lim, step = ctl.limits.joint(name), ctl.step_limit(name)
        over = p[name] - lim.upper if side == "above" else lim.lower - p[name]
        assert over > step
        parts.append(f"{name} at {p[name]:.3f} is {over:.3f} {side} its calibrated window "
                     f"{lim.lower:.3f}..{lim.upper:.3f} (more than one {step:.3f} step)")
    why = ("torque stays off: " + "; ".join(parts)
           + ": move it back inside its window by hand")
    assert r.mode == "torque_off" and r.faults == (why,)
    assert events == [("torque_refused", {"reason": why})]  # said once, with the reason
    assert wire(sim) == [] and not any(_torque(sim))


def test_a_joint_within_one_step_outside_is_held_at_the_edge_in_the_readings(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    """The goal the controller reports (and keeps holding) is the window's edge, not the
    present position outside it."""
    j = arm.calibration.joint("wrist_flex")
    ctl, clock, _ = make(arm)
    step = ctl.step_limit("wrist_flex") / j.units_per_tick
    sim.set_position(j.servo_id, j.raw_window()[0] - step * 0.8)
    lim = ctl.limits.joint("wrist_flex")
    r = tick(ctl, clock)
    assert r.mode == "holding" and r.state.positions["wrist_flex"] < lim.lower
    edge = {n: ctl.limits.joint(n).clip(v) for n, v in r.state.positions.items()}
    assert edge["wrist_flex"] == lim.lower
    assert r.goal == edge and ctl.setpoint() == edge
    r = tick(ctl, clock, 2)
    assert r.mode == "holding" and r.goal == edge


def test_a_refusal_is_said_once_while_the_same_joints_are_out_even_with_a_flickering_reading(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    """A reading that flickers by one tick changes the refusal's text every step; the event
    is said again only when other joints are out, so it cannot flood the event log (where
    it would push the e-stop and fault events out)."""
    lift = arm.calibration.joint("shoulder_lift")
    pan = arm.calibration.joint("shoulder_pan")
    ctl, clock, events = make(arm)
    for i in range(20):
        sim.set_position(lift.servo_id, lift.raw_window()[1] + 400 + (i % 2))
        r = tick(ctl, clock)
    assert r.mode == "torque_off" and r.faults[0].startswith("torque stays off: shoulder_lift")
    assert [k for k, _ in events].count("torque_refused") == 1
    sim.set_position(pan.servo_id, pan.raw_window()[0] - 400)  # a second joint out
    tick(ctl, clock, 3)
    refused = [d["reason"] for k, d in events if k == "torque_refused"]
    assert len(refused) == 2 and "shoulder_pan" in refused[1]
