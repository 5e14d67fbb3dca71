"""Torque coming on over the pty bus never drives a joint back into its calibrated window in
one write: every goal and torque-enable frame on the wire is decoded and checked, at start-up
and on an e-stop reset after ``torque_off``."""

from __future__ import annotations

from hw_helpers import make, settle, tick

from solarian_agent.hw.feetech import FeetechArm
from solarian_agent.hw.feetech import protocol as P
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
