"""ArmController against the pty sim: watchdog, e-stop latch, faults, and the wire property."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator

import pytest
from hw_helpers import PERIOD, TIMEOUT_S, make, property_settings, settle, tick
from hypothesis import given
from hypothesis import strategies as st

from solarian_agent.arm.safety import EStopLatchedError, UnsafeCommandError
from solarian_agent.core.clock import FakeClock
from solarian_agent.core.errors import ConfigError
from solarian_agent.hw.feetech import (
    ArmControllerConfig,
    FeetechArm,
    FeetechArmConfig,
    default_so101,
)
from solarian_agent.hw.feetech.simbus import SimulatedBus


def test_tracks_a_target_at_limited_speed(sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm)
    r = ctl.step()
    settle(sim, arm.bus)
    assert r.mode == "holding" and all(sim.torque(i) for i in range(1, 7))
    ctl.command({"shoulder_pan": 1.0})
    r = tick(ctl, clock)
    assert r.mode == "tracking"
    assert r.goal["shoulder_pan"] == pytest.approx(1.5 * PERIOD)  # max_velocity * dt
    for _ in range(40):
        ctl.command({"shoulder_pan": 1.0})
        r = tick(ctl, clock)
    assert r.state.positions["shoulder_pan"] == pytest.approx(1.0, abs=2e-3)
    assert r.diagnostics.level == "ok" and r.joint_state is not None


def test_watchdog_holds_and_never_resumes_old_target(sim: SimulatedBus,
                                                     arm: FeetechArm) -> None:
    ctl, clock, events = make(arm, command_timeout_s=0.1)
    ctl.step()
    ctl.command({"elbow_flex": 1.5})
    tick(ctl, clock, 4)  # 0.08 s: still fresh
    r = tick(ctl, clock, 2)  # 0.12 s: stale
    assert r.mode == "holding" and r.diagnostics.watchdog_expired
    assert any(k == "watchdog" for k, _ in events)
    held = r.goal["elbow_flex"]
    assert 0 < held < 0.3
    settle(sim, arm.bus)
    sim.clear_frames()
    for _ in range(20):
        r = tick(ctl, clock)
        assert r.mode == "holding" and r.goal["elbow_flex"] == held
    settle(sim, arm.bus)
    goals3 = {raw for sid, raw in sim.goal_writes() if sid == 3}
    assert len(goals3) == 1  # the same hold goal, never further toward 1.5
    # a fresh command starts from where the arm is
    ctl.command({"elbow_flex": 0.0})
    r = tick(ctl, clock)
    assert r.mode == "tracking" and r.goal["elbow_flex"] < held


def test_estop_latch_wins_until_reset(sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, events = make(arm)
    ctl.step()
    ctl.command({"shoulder_lift": 1.0})
    r = tick(ctl, clock, 3)
    ctl.estop("operator pressed stop")
    r = tick(ctl, clock)
    assert r.mode == "estop" and r.estop
    hold = r.goal["shoulder_lift"]
    with pytest.raises(EStopLatchedError, match="operator pressed stop"):
        ctl.command({"shoulder_lift": 1.0})
    for _ in range(10):
        r = tick(ctl, clock)
        assert r.mode == "estop" and r.goal["shoulder_lift"] == hold
    assert "e-stop latched: operator pressed stop" in r.diagnostics.message
    assert r.diagnostics.level == "error"
    assert ctl.reset_estop() is True
    r = tick(ctl, clock)
    assert r.mode == "holding" and r.goal["shoulder_lift"] == pytest.approx(hold, abs=2e-3)
    r = tick(ctl, clock, 5)
    assert r.goal["shoulder_lift"] == pytest.approx(hold, abs=2e-3)  # old target is gone
    assert [k for k, _ in events if k.startswith("estop")] == ["estop", "estop_reset"]


def test_estop_torque_off_mode(sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm, estop_action="torque_off")
    ctl.step()
    ctl.estop("test")
    r = tick(ctl, clock)
    settle(sim, arm.bus)
    assert r.mode == "estop" and not any(sim.torque(i) for i in range(1, 7))
    sim.set_position(2, 2300)  # the arm sagged while limp
    tick(ctl, clock, 3)
    ctl.reset_estop()
    r = tick(ctl, clock)
    settle(sim, arm.bus)
    assert all(sim.torque(i) for i in range(1, 7))
    assert sim.goal(2) == 2300  # torque came back holding where it is: no jump


def test_bus_faults_trip_after_consecutive_failures(sim: SimulatedBus,
                                                    arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm, max_consecutive_faults=2)
    ctl.step()
    sim.inject(4, "no_answer", count=None)
    r = tick(ctl, clock)
    assert r.mode == "fault" and r.state is None and not ctl.latch.tripped
    assert "servo 4 did not answer" in r.faults[0]
    r = tick(ctl, clock)
    assert ctl.latch.tripped and "2 consecutive failed reads" in ctl.latch.reason
    sim.clear_faults()
    r = tick(ctl, clock)
    assert r.mode == "estop"  # the latch stays until reset, even with the bus healthy


def test_servo_flags_and_heat_trip_the_estop(sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm)
    ctl.step()
    sim.set_error_flags(3, 0x01)
    r = tick(ctl, clock)
    assert r.estop and "elbow_flex" in ctl.latch.reason and "voltage" in ctl.latch.reason
    sv = {s.joint: s for s in r.diagnostics.servos}
    assert sv["elbow_flex"].level == "error"
    sim.set_error_flags(3, 0)
    ctl.reset_estop()
    sim.servos[5].temperature_c = 60
    r = tick(ctl, clock)
    assert not r.estop and {s.joint: s for s in r.diagnostics.servos}["wrist_roll"].level \
        == "warn" and r.diagnostics.level == "warn"
    sim.servos[5].temperature_c = 75
    r = tick(ctl, clock)
    assert r.estop and "wrist_roll (servo 5) at 75" in ctl.latch.reason


def test_step_never_raises(sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm)
    ctl.step()
    arm.bus.disconnect()  # used while disconnected: a fault, not an exception
    r = tick(ctl, clock)
    assert r.mode == "fault" and "not connected" in r.faults[0]
    with pytest.raises(ConfigError, match="estop_action"):
        ArmControllerConfig(estop_action="explode")


def test_bad_commands_are_refused(sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm)
    ctl.step()
    with pytest.raises(UnsafeCommandError, match="wrist_flex"):
        ctl.command({"wrist_flex": math.nan})
    with pytest.raises(UnsafeCommandError, match="'knee'"):
        ctl.command({"knee": 0.1})
    assert tick(ctl, clock).mode == "holding"  # nothing was stored


def test_run_loop_paces_with_the_clock(sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm)
    t0 = clock.now()
    ctl.run(threading.Event(), max_steps=10)
    assert ctl.steps == 10 and clock.now() == pytest.approx(t0 + 10 * PERIOD)


# --------------------------------------------------------------------------- the wire property

@pytest.fixture(scope="module")
def wire() -> Iterator[tuple[SimulatedBus, FeetechArm]]:
    with SimulatedBus(speed_ticks_per_s=None) as s:
        a = FeetechArm(FeetechArmConfig(port=s.port_name, timeout_s=TIMEOUT_S),
                       calibration=default_so101())
        a.connect()
        yield s, a
        a.disconnect()


NAMES = default_so101().names
value = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(-1e9, 1e9),
    st.floats(-4.0, 4.0),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e308, 0.06, 0.061, -0.0]),
)
command = st.dictionaries(st.sampled_from([*NAMES, "bogus"]), value, min_size=1, max_size=7)
action = st.one_of(
    st.tuples(st.just("cmd"), command, st.floats(0.0, 0.5)),
    st.tuples(st.just("estop"), st.just({}), st.floats(0.0, 0.1)),
    st.tuples(st.just("reset"), st.just({}), st.floats(0.0, 0.1)),
    st.tuples(st.just("wait"), st.just({}), st.floats(0.0, 2.0)),
)


@property_settings(150)
@given(actions=st.lists(action, min_size=1, max_size=25))
def test_no_goal_outside_limits_ever_reaches_the_wire(
        wire: tuple[SimulatedBus, FeetechArm], actions: list[tuple[str, dict, float]]) -> None:
    sim, arm = wire
    for i in sim.servos:  # every example starts from the nominal pose
        sim.set_position(i, 2048)
    arm.write_goal({n: 0.0 for n in NAMES})
    settle(sim, arm.bus)
    sim.clear_frames()
    ctl, clock, _ = make(arm)
    ctl.step()
    for kind, cmd, dt in actions:
        if kind == "cmd":
            try:
                ctl.command(cmd, max_velocity=None)
            except (UnsafeCommandError, EStopLatchedError):
                pass
        elif kind == "estop":
            ctl.estop("hypothesis")
        elif kind == "reset":
            ctl.reset_estop()
        clock.advance(dt)
        ctl.step()
    settle(sim, arm.bus)
    cal = arm.calibration
    writes = sim.goal_writes()
    assert writes, "the controller wrote no goals"
    last: dict[int, int] = {}
    for sid, raw in writes:
        j = cal.by_id(sid)
        lo, hi = j.raw_window()
        assert j.range_min <= lo <= raw <= hi <= j.range_max, (j.name, raw)
        u = j.to_units(raw)
        assert j.lower - j.units_per_tick <= u <= j.upper + j.units_per_tick, (j.name, u)
        # speed on the wire: no tick moves a joint more than max_velocity * (2 periods)
        if sid in last:
            step = min(j.max_velocity * 2 * PERIOD, cal.max_step)
            assert abs(raw - last[sid]) * j.units_per_tick <= step + 2 * j.units_per_tick
        last[sid] = raw


arm_cmd = st.fixed_dictionaries({n: st.floats(-2.0, 2.0) for n in NAMES[:5]})


@property_settings(60)
@given(cmds=st.lists(st.tuples(arm_cmd, st.floats(0.05, 1.0)), min_size=1, max_size=8))
def test_no_goal_outside_the_workspace_ever_reaches_the_wire(
        wire: tuple[SimulatedBus, FeetechArm], cmds: list[tuple[dict, float]]) -> None:
    """Whatever joint targets arrive, the goals on the wire keep the gripper tip inside the
    workspace box (off the table): refused targets, and steps held at the boundary."""
    from solarian_agent.arm.kinematics import ArmModel
    from solarian_agent.arm.safety import Workspace, WorkspaceError

    sim, arm = wire
    for i in sim.servos:
        sim.set_position(i, 2048)
    arm.write_goal({n: 0.0 for n in NAMES})
    settle(sim, arm.bus)
    sim.clear_frames()
    ctl, clock, _ = make(arm, workspace=True)
    ctl.step()
    for cmd, dt in cmds:
        try:
            ctl.command(cmd)
        except WorkspaceError:
            pass
        t_end = clock.now() + dt
        while clock.now() < t_end:
            clock.advance(PERIOD)
            ctl.step()
    settle(sim, arm.bus)
    cal = arm.calibration
    model = ArmModel.default()
    box = Workspace()
    frame: dict[str, float] = {}
    for sid, raw in sim.goal_writes():
        j = cal.by_id(sid)
        frame[j.name] = j.to_units(raw)
        if all(n in frame for n in NAMES[:5]):
            xyz = model.fk([frame[n] for n in NAMES[:5]])[0]
            assert box.excess(xyz) <= 0.002, (frame, xyz)  # a tick of quantization at most
            frame = {}


def test_target_outside_the_workspace_is_refused_with_the_reason(sim: SimulatedBus,
                                                                  arm: FeetechArm) -> None:
    from solarian_agent.arm.safety import WorkspaceError

    ctl, clock, _ = make(arm, workspace=True)
    tick(ctl, clock)
    with pytest.raises(WorkspaceError, match="tip z="):
        # shoulder and elbow folded forward: the fingers would go through the table
        ctl.command({"shoulder_lift": 0.8, "elbow_flex": 0.5, "wrist_flex": 0.0})


# --------------------------------------------------------------------------- lead and reset

@pytest.fixture
def blocked() -> Iterator[tuple[SimulatedBus, FeetechArm, FakeClock]]:
    """An arm that cannot move: the simulated servos advance on their own clock, which this
    fixture never advances, so every goal is taken and none is reached (a blocked arm)."""
    frozen = FakeClock()
    with SimulatedBus(clock=frozen, speed_ticks_per_s=3400.0) as s:
        a = FeetechArm(FeetechArmConfig(port=s.port_name, timeout_s=TIMEOUT_S),
                       calibration=default_so101())
        a.connect()
        yield s, a, frozen
        a.disconnect()


def test_the_goal_never_runs_ahead_of_a_blocked_arm(
        blocked: tuple[SimulatedBus, FeetechArm, FakeClock]) -> None:
    """The last goal is kept within lead_time_s x max_velocity of where the arm really is: a
    blocked arm's goal stops there, instead of running on toward the target (and the arm
    jumping there once it is free)."""
    sim, arm, frozen = blocked
    ctl, clock, _ = make(arm, lead_time_s=0.1)
    start = ctl.step().state.positions["shoulder_pan"]
    vmax = ctl.limits.as_dict()["shoulder_pan"].max_velocity
    lead, step = vmax * 0.1, vmax * PERIOD
    goals = []
    for _ in range(50):  # 1 s: unblocked, the goal would be 1.5 rad away by now
        ctl.command({"shoulder_pan": start + 1.5})
        r = tick(ctl, clock)
        present = r.state.positions["shoulder_pan"]
        assert present == pytest.approx(start, abs=2e-3)  # it really is blocked
        assert r.goal["shoulder_pan"] - present <= lead + step + 2e-3
        goals.append(r.goal["shoulder_pan"])
    assert goals[-1] - start == pytest.approx(lead + step, abs=3e-3)  # it went up to the lead


def test_the_goal_follows_a_lagging_arm(
        blocked: tuple[SimulatedBus, FeetechArm, FakeClock]) -> None:
    """An arm much slower than its goal (a heavy load): the goal keeps its lead over the arm,
    at most one lead (plus one step) ahead however long the motion lasts."""
    sim, arm, frozen = blocked
    ctl, clock, _ = make(arm, lead_time_s=0.1)
    start = ctl.step().state.positions["shoulder_pan"]
    vmax = ctl.limits.as_dict()["shoulder_pan"].max_velocity
    lead, step = vmax * 0.1, vmax * PERIOD
    for _ in range(60):
        ctl.command({"shoulder_pan": start + 1.0})
        r = tick(ctl, clock)
        frozen.advance(PERIOD / 20)  # the servos get a twentieth of the time: about 0.26 rad/s
        present = r.state.positions["shoulder_pan"]
        assert r.goal["shoulder_pan"] - present <= lead + step + 3e-3
    assert 0.1 < present - start < 0.6  # it moved, slower than the goal could


def test_an_estop_reset_within_one_period_drops_the_old_target(sim: SimulatedBus,
                                                               arm: FeetechArm) -> None:
    """Tripped and reset before the loop ran once (another thread, within one period): the
    step never saw the latch, so only reset_estop can drop the target."""
    ctl, clock, events = make(arm)
    ctl.step()
    ctl.command({"shoulder_lift": 1.0})
    r = tick(ctl, clock, 3)
    held = r.state.positions["shoulder_lift"]
    ctl.estop("operator pressed stop")
    assert ctl.reset_estop() is True
    # at once, not only at the next step: a jog taken from the setpoint now (teleop) starts
    # from where the arm aims, never from the old target
    assert ctl.setpoint()["shoulder_lift"] < 0.5
    for _ in range(10):
        r = tick(ctl, clock)
        assert r.mode == "holding"
    assert r.goal["shoulder_lift"] == pytest.approx(held, abs=0.05)
    assert r.goal["shoulder_lift"] < 0.5  # never on toward the old target (1.0)
    assert [k for k, _ in events if k.startswith("estop")] == ["estop", "estop_reset"]
    assert "watchdog" not in [k for k, _ in events]  # the reset dropped it, not the watchdog


def test_an_estop_reset_clears_the_bus_fault_count(sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm, max_consecutive_faults=2)
    ctl.step()
    sim.inject(1, "no_answer", count=None)
    tick(ctl, clock, 2)
    assert ctl.bus_lost and ctl.latch.tripped
    sim.clear_faults()
    assert ctl.reset_estop() is True
    assert not ctl.bus_lost


def test_hold_drops_the_target_and_holds_where_the_arm_is(sim: SimulatedBus,
                                                          arm: FeetechArm) -> None:
    ctl, clock, events = make(arm)
    ctl.step()
    ctl.command({"elbow_flex": 1.0})
    r = tick(ctl, clock, 3)
    assert r.mode == "tracking"
    ctl.hold("operator asked")
    assert ("hold", {"reason": "operator asked"}) in events
    r = tick(ctl, clock)
    at = r.state.positions["elbow_flex"]
    assert r.mode == "holding" and r.goal["elbow_flex"] == pytest.approx(at, abs=2e-3)
    for _ in range(5):
        r = tick(ctl, clock)
        assert r.mode == "holding" and r.goal["elbow_flex"] < 0.5
    assert "watchdog" not in [k for k, _ in events]  # dropped by hold, not timed out


def test_torque_off_follows_the_arm_and_torque_on_holds_where_it_is(sim: SimulatedBus,
                                                                    arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm)
    ctl.step()
    ctl.command({"wrist_flex": 1.0})
    ctl.disable_torque()
    settle(sim, arm.bus)
    assert not any(sim.torque(i) for i in range(1, 7))
    sim.set_position(4, 2300)  # moved by hand while limp
    r = tick(ctl, clock, 2)
    assert r.mode == "torque_off"
    moved = r.state.positions["wrist_flex"]
    assert ctl.setpoint()["wrist_flex"] == pytest.approx(moved)  # no old target survives
    ctl.enable_torque()
    r = tick(ctl, clock)
    settle(sim, arm.bus)
    assert all(sim.torque(i) for i in range(1, 7))
    assert r.mode == "holding" and sim.goal(4) == 2300  # no jump back, no old target
    ctl.estop("stop")
    with pytest.raises(EStopLatchedError):
        ctl.enable_torque()


def test_setpoint_before_any_goal_is_where_the_arm_is(sim: SimulatedBus,
                                                      arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm)
    assert ctl.setpoint() == {}
    ctl.disable_torque()
    r = tick(ctl, clock)
    assert ctl.setpoint() == r.state.positions
