"""ArmController against the pty sim: watchdog, e-stop latch, faults, and the wire property."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Mapping, Sequence

import pytest
from hw_helpers import (
    PERIOD,
    TIMEOUT_S,
    ArmPassThrough,
    make,
    property_settings,
    settle,
    tick,
)
from hypothesis import given
from hypothesis import strategies as st

from solarian_agent.arm.safety import EStopLatchedError, UnsafeCommandError
from solarian_agent.core.clock import FakeClock
from solarian_agent.core.errors import ConfigError
from solarian_agent.hw.errors import HardwareError
from solarian_agent.hw.feetech import (
    ArmController,
    ArmControllerConfig,
    FeetechArm,
    FeetechArmConfig,
    default_so101,
)
from solarian_agent.hw.feetech.arm import ArmState
from solarian_agent.hw.feetech.controller import ArmReading
from solarian_agent.hw.feetech.protocol import STS3215
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
    # the servo's own cut-out set above the controller's limit: the controller's acts alone
    sim.servos[5].mem[STS3215.MAX_TEMPERATURE.address] = 80
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


def _pan_with_lead(arm: FeetechArm) -> tuple[ArmController, FakeClock, float, float, float]:
    """A controller with a 0.1 s lead after its first step: shoulder_pan's start, its lead
    (max_velocity x lead_time_s) and its step (max_velocity x period)."""
    ctl, clock, _ = make(arm, lead_time_s=0.1)
    start = ctl.step().state.positions["shoulder_pan"]
    vmax = ctl.limits.as_dict()["shoulder_pan"].max_velocity
    return ctl, clock, start, vmax * 0.1, vmax * PERIOD


def test_the_goal_never_runs_ahead_of_a_blocked_arm(
        blocked: tuple[SimulatedBus, FeetechArm, FakeClock]) -> None:
    """The last goal is kept within lead_time_s x max_velocity of where the arm really is: a
    blocked arm's goal stops there, instead of running on toward the target (and the arm
    jumping there once it is free)."""
    sim, arm, frozen = blocked
    ctl, clock, start, lead, step = _pan_with_lead(arm)
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
    ctl, clock, start, lead, step = _pan_with_lead(arm)
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


# --------------------------------------------------------------------------- commands and events

class _SpyArm(ArmPassThrough):
    """The sim's arm recording what the controller asks of ``set_torque`` and failing reads
    or torque writes on demand (a bus that stops answering, a torque write that does not go
    through), without the read timeouts."""

    def __init__(self, arm: FeetechArm) -> None:
        super().__init__(arm)
        self.torque_calls: list[tuple[bool, object]] = []
        self.fail_read = False
        self.fail_torque = False

    def read_state(self) -> ArmState:
        if self.fail_read:
            raise HardwareError("servo 1 did not answer (test)")
        return super().read_state()

    def set_torque(self, enabled: bool, joints: Sequence[str] | None = None) -> None:
        self.torque_calls.append((enabled, joints))
        if self.fail_torque:
            raise HardwareError("torque write failed (test)")
        super().set_torque(enabled, joints)


def test_the_command_event_names_the_source_and_the_joints(sim: SimulatedBus,
                                                           arm: FeetechArm) -> None:
    ctl, clock, events = make(arm)
    ctl.step()
    ctl.command({"shoulder_pan": 0.1, "elbow_flex": 0.2})
    ctl.command({"gripper": 0.01}, source="teleop")
    assert [e for e in events if e[0] == "command"] == [
        ("command", {"source": "agent", "joints": ["elbow_flex", "shoulder_pan"]}),
        ("command", {"source": "teleop", "joints": ["gripper"]}),
    ]


def test_a_bad_max_velocity_is_refused_with_its_message_and_nothing_is_stored(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, events = make(arm)
    ctl.step()
    for v in (-0.5, math.inf, -math.inf, math.nan):
        with pytest.raises(UnsafeCommandError) as ei:
            ctl.command({"shoulder_pan": 1.0}, max_velocity=v)
        assert str(ei.value) == f"max_velocity {v!r} must be finite and >= 0"
        assert ei.value.value is v
    assert [k for k, _ in events if k == "command"] == []
    r = tick(ctl, clock)
    assert r.mode == "holding" and r.target is None
    assert r.goal["shoulder_pan"] == pytest.approx(0.0, abs=2e-3)


def test_a_command_max_velocity_lowers_the_speed_and_zero_means_the_joint_limit(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    """JointCommand.msg: ``max_velocity`` 0 is the unset field, the joint's own limit."""
    ctl, clock, events = make(arm)
    ctl.step()
    ctl.command({"shoulder_pan": 1.0}, max_velocity=0.5)
    r1 = tick(ctl, clock)
    assert r1.mode == "tracking"
    assert r1.goal["shoulder_pan"] == pytest.approx(0.5 * PERIOD)
    ctl.command({"shoulder_pan": 1.0}, max_velocity=0.0)
    r2 = tick(ctl, clock)
    assert r2.goal["shoulder_pan"] - r1.goal["shoulder_pan"] == pytest.approx(1.5 * PERIOD)
    assert [k for k, _ in events if k == "command"] == ["command", "command"]


def test_a_full_arm_target_outside_the_workspace_is_refused(sim: SimulatedBus,
                                                            arm: FeetechArm) -> None:
    from solarian_agent.arm.safety import WorkspaceError

    ctl, clock, events = make(arm, workspace=True)
    tick(ctl, clock)
    with pytest.raises(WorkspaceError, match="tip z="):
        # every arm joint given: the fingers would go through the table
        ctl.command({"shoulder_pan": 0.0, "shoulder_lift": 0.8, "elbow_flex": 0.5,
                     "wrist_flex": 0.0, "wrist_roll": 0.0})
    assert [k for k, _ in events if k == "command"] == []
    r = tick(ctl, clock)
    assert r.mode == "holding" and r.target is None


def test_hold_and_estop_events_carry_the_reason(sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, events = make(arm)
    ctl.step()
    ctl.hold()
    ctl.estop("operator pressed stop")
    ctl.estop("pressed again")  # already latched: no second event
    assert ctl.reset_estop() is True
    assert ctl.reset_estop() is False  # nothing latched: no event
    assert events == [("hold", {"reason": "hold requested"}),
                      ("estop", {"reason": "operator pressed stop"}),
                      ("estop_reset", {})]


def test_a_hold_stays_where_it_began_when_the_arm_is_pushed(
        blocked: tuple[SimulatedBus, FeetechArm, FakeClock]) -> None:
    """After hold(), the goal is where the arm was at the next step, and stays there: a push
    (the servos here do not move on their own) does not drag the hold along."""
    sim, arm, frozen = blocked
    ctl, clock, _ = make(arm)
    ctl.step()
    ctl.command({"elbow_flex": 1.0})
    tick(ctl, clock, 3)
    ctl.hold("operator asked")
    r = tick(ctl, clock)
    at = r.state.positions["elbow_flex"]
    assert r.mode == "holding" and r.goal["elbow_flex"] == at
    sim.set_position(3, 2300)  # pushed away
    for _ in range(3):
        r = tick(ctl, clock)
        assert r.state.positions["elbow_flex"] > at + 0.3  # it really is pushed
        assert r.mode == "holding" and r.goal["elbow_flex"] == at


# --------------------------------------------------------------------------- e-stop reset

def test_a_trip_right_after_a_reset_holds_where_the_arm_is(sim: SimulatedBus,
                                                           arm: FeetechArm) -> None:
    """Reset and tripped again before the loop ran: the e-stop holds where the arm is now."""
    ctl, clock, _ = make(arm)
    ctl.step()
    ctl.command({"shoulder_lift": 1.0})
    tick(ctl, clock, 3)
    ctl.estop("first")
    r = tick(ctl, clock)
    assert r.mode == "estop" and r.goal == r.state.positions
    assert ctl.reset_estop() is True
    ctl.estop("second")
    for _ in range(3):
        r = tick(ctl, clock)
        assert r.mode == "estop" and r.goal == r.state.positions
        assert set(r.goal) == set(NAMES)


def test_after_a_reset_a_new_command_starts_from_where_the_arm_is(
        blocked: tuple[SimulatedBus, FeetechArm, FakeClock]) -> None:
    """Tripped and reset within one period: the goal the arm was chasing (a lead ahead of a
    blocked arm) is forgotten; the next command moves one step from where the arm is."""
    sim, arm, frozen = blocked
    ctl, clock, start, lead, step = _pan_with_lead(arm)
    for _ in range(20):
        ctl.command({"shoulder_pan": start + 1.5})
        r = tick(ctl, clock)
    assert r.goal["shoulder_pan"] - start == pytest.approx(lead + step, abs=3e-3)
    ctl.estop("operator pressed stop")
    assert ctl.reset_estop() is True
    ctl.command({"shoulder_pan": start + 1.5})
    r = tick(ctl, clock)
    assert r.mode == "tracking"
    assert r.state.positions["shoulder_pan"] == pytest.approx(start, abs=2e-3)
    assert r.goal["shoulder_pan"] - r.state.positions["shoulder_pan"] == \
        pytest.approx(step, abs=2e-3)


def test_an_estop_reset_clears_a_single_fault_bus_loss(sim: SimulatedBus,
                                                       arm: FeetechArm) -> None:
    spy = _SpyArm(arm)
    ctl, clock, _ = make(spy, max_consecutive_faults=1)  # type: ignore[arg-type]
    ctl.step()
    spy.fail_read = True
    r = tick(ctl, clock)
    assert r.mode == "fault" and ctl.bus_lost and ctl.latch.tripped
    assert r.diagnostics.consecutive_faults == 1
    spy.fail_read = False
    assert ctl.reset_estop() is True
    assert not ctl.bus_lost


# --------------------------------------------------------------------------- setpoint, positions

def test_setpoint_before_any_goal_was_written_is_where_the_arm_is(sim: SimulatedBus,
                                                                 arm: FeetechArm) -> None:
    """Tripped (torque_off) before the first step: no goal was ever written, the setpoint is
    the measured pose, not empty."""
    ctl, clock, _ = make(arm, estop_action="torque_off")
    ctl.estop("stop before start")
    r = ctl.step()
    assert r.mode == "estop" and r.goal == {} and r.state is not None
    assert ctl.setpoint() == r.state.positions and set(ctl.setpoint()) == set(NAMES)


def test_positions_are_empty_before_the_first_read_then_the_measured_ones(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm)
    assert ctl.positions() == {}
    r = ctl.step()
    assert ctl.positions() == r.state.positions and set(ctl.positions()) == set(NAMES)


# --------------------------------------------------------------------------- windows and steps

def test_step_limit_is_the_smaller_of_max_step_and_max_velocity_times_the_period(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, _, _ = make(arm)  # 50 Hz: the speed limits are below max_step (0.1)
    assert ctl.step_limit("shoulder_pan") == pytest.approx(1.5 * PERIOD)
    assert ctl.step_limit("wrist_roll") == pytest.approx(2.5 * PERIOD)
    assert ctl.step_limit("gripper") == pytest.approx(2.0 * PERIOD)
    slow = ArmController(arm, FakeClock(), ArmControllerConfig(rate_hz=10.0), workspace=False)
    assert slow.step_limit("shoulder_pan") == pytest.approx(0.1)  # 0.15 > max_step
    assert slow.step_limit("gripper") == pytest.approx(0.1)  # 0.2 rad > max_step


def test_outside_window_describes_each_joint_beyond_its_window_by_more_than_a_step(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, _, _ = make(arm)
    assert ctl.outside_window({"shoulder_pan": 0.0, "gripper": 0.03}) == []
    assert ctl.outside_window({"shoulder_pan": 1.94, "elbow_flex": -1.71}) == []  # < a step
    assert ctl.outside_window({"shoulder_pan": 2.0, "elbow_flex": -1.8, "wrist_flex": 0.0}) == [
        "shoulder_pan at 2.000 is 0.080 above its calibrated window -1.920..1.920 "
        "(more than one 0.030 step)",
        "elbow_flex at -1.800 is 0.110 below its calibrated window -1.690..1.690 "
        "(more than one 0.030 step)",
    ]


def test_outside_window_allows_exactly_one_step_and_its_rounding_tolerance(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    """The boundary is one step plus 1e-9 (far above the float error of ``lower - p``)."""
    ctl, _, _ = make(arm)
    s = ctl.step_limit("gripper")
    lo = -0.174533  # the jaw's -10 degree limit
    assert ctl.outside_window({"gripper": lo - s}) == []  # exactly one step out
    assert ctl.outside_window({"gripper": lo - (s + 0.9e-9)}) == []  # and the tolerance
    assert ctl.outside_window({"gripper": lo - (s + 2e-9)}) == [
        "gripper at -0.215 is 0.040 below its calibrated window -0.175..1.745 "
        "(more than one 0.040 step)"]


# --------------------------------------------------------------------------- disable_torque

def test_disable_torque_releases_every_joint(sim: SimulatedBus, arm: FeetechArm) -> None:
    spy = _SpyArm(arm)
    ctl, clock, _ = make(spy)  # type: ignore[arg-type]
    ctl.step()
    assert spy.torque_calls == [(True, None)]
    ctl.disable_torque()
    assert spy.torque_calls == [(True, None), (False, None)]
    settle(sim, arm.bus)
    assert not any(sim.torque(i) for i in range(1, 7))
    assert tick(ctl, clock).mode == "torque_off"


def test_disable_torque_drops_the_target_even_when_the_torque_write_fails(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    spy = _SpyArm(arm)
    ctl, clock, _ = make(spy)  # type: ignore[arg-type]
    ctl.step()
    ctl.command({"shoulder_pan": 1.0})
    tick(ctl, clock)
    spy.fail_torque = True
    with pytest.raises(HardwareError, match="torque write failed"):
        ctl.disable_torque()
    r = tick(ctl, clock)  # torque is still on: the arm holds, it does not go on to 1.0
    assert r.mode == "holding" and r.target is None and not ctl.latch.tripped
    assert r.goal["shoulder_pan"] == pytest.approx(r.state.positions["shoulder_pan"], abs=2e-3)


# --------------------------------------------------------------------------- the run loop

P64 = 1 / 64  # a period that is exact in binary: clock sums are exact, boundaries sharp


class _LoopClock(FakeClock):
    """FakeClock for ``run()``: ``sleep_until`` jumps to ``t``, except that, as SystemClock's
    ``stop.wait`` does, it returns at once when ``stop`` is set."""

    def sleep_until(self, t: float, stop: threading.Event | None = None) -> None:
        if stop is not None and stop.is_set():
            return
        super().sleep_until(t, stop)


def _timed_steps(arm: FeetechArm, costs: list[float], stop_after: int | None = None,
                 stop: threading.Event | None = None
                 ) -> tuple[ArmController, _LoopClock, list[float]]:
    """A 64 Hz controller whose n-th step takes ``costs[n]`` seconds of the clock; the times
    the steps began are returned in the list (filled by ``run``)."""
    clock = _LoopClock()
    ctl = ArmController(arm, clock, ArmControllerConfig(rate_hz=64.0), workspace=False)
    real_step, starts = ctl.step, list[float]()

    def step() -> ArmReading:
        starts.append(clock.now())
        r = real_step()
        clock.advance(costs[len(starts) - 1])
        if stop is not None and len(starts) == stop_after:
            stop.set()
        return r

    ctl.step = step  # type: ignore[method-assign]
    return ctl, clock, starts


def test_run_catches_up_a_step_at_most_one_period_late(sim: SimulatedBus,
                                                       arm: FeetechArm) -> None:
    """A step within its period, then one a whole period late: no overrun, the missed tick
    runs at once and the loop is back on its grid."""
    ctl, clock, starts = _timed_steps(arm, [P64 / 2, 2 * P64, 0.0, 0.0])
    t0 = clock.now()
    ctl.run(threading.Event(), max_steps=4)
    assert ctl.overruns == 0
    assert starts == [t0, t0 + P64, t0 + 3 * P64, t0 + 3 * P64]
    assert clock.now() == t0 + 4 * P64


def test_run_counts_overruns_and_skips_the_missed_ticks(sim: SimulatedBus,
                                                       arm: FeetechArm) -> None:
    ctl, clock, starts = _timed_steps(arm, [3 * P64, 0.0, 3 * P64, 0.0, 0.0])
    t0 = clock.now()
    ctl.run(threading.Event(), max_steps=5)
    assert ctl.overruns == 2
    # after an overrun the next step comes one period after it ended, never in a burst
    assert starts == [t0, t0 + 3 * P64, t0 + 4 * P64, t0 + 7 * P64, t0 + 8 * P64]
    assert clock.now() == t0 + 9 * P64


def test_run_returns_on_stop_without_sleeping_out_the_period(sim: SimulatedBus,
                                                             arm: FeetechArm) -> None:
    stop = threading.Event()
    ctl, clock, starts = _timed_steps(arm, [0.0, 0.0, 0.0], stop_after=2, stop=stop)
    t0 = clock.now()
    ctl.run(stop)
    assert ctl.steps == 2 and starts == [t0, t0 + P64]
    assert clock.now() == t0 + P64  # stopped during the step: no wait for the next tick


# --------------------------------------------------------------------------- config validation

@pytest.mark.parametrize(("kw", "path", "message"), [
    ({"rate_hz": 0}, "controller.rate_hz", "must be in (0, 1000], got 0"),
    ({"rate_hz": 0.0}, "controller.rate_hz", "must be in (0, 1000], got 0.0"),
    ({"rate_hz": -50.0}, "controller.rate_hz", "must be in (0, 1000], got -50.0"),
    ({"rate_hz": 1000.5}, "controller.rate_hz", "must be in (0, 1000], got 1000.5"),
    ({"rate_hz": 1001}, "controller.rate_hz", "must be in (0, 1000], got 1001"),
    ({"rate_hz": 5000.0}, "controller.rate_hz", "must be in (0, 1000], got 5000.0"),
    ({"rate_hz": math.nan}, "controller.rate_hz", "must be in (0, 1000], got nan"),
    ({"rate_hz": math.inf}, "controller.rate_hz", "must be in (0, 1000], got inf"),
    ({"rate_hz": -math.inf}, "controller.rate_hz", "must be in (0, 1000], got -inf"),
    ({"command_timeout_s": 0.0}, "controller.command_timeout_s", "must be > 0, got 0.0"),
    ({"command_timeout_s": -1.0}, "controller.command_timeout_s", "must be > 0, got -1.0"),
    ({"command_timeout_s": math.nan}, "controller.command_timeout_s", "must be > 0, got nan"),
    ({"command_timeout_s": math.inf}, "controller.command_timeout_s", "must be > 0, got inf"),
    ({"estop_action": "explode"}, "controller.estop_action",
     "must be one of ('hold', 'torque_off'), got 'explode'"),
    ({"estop_action": "Hold"}, "controller.estop_action",
     "must be one of ('hold', 'torque_off'), got 'Hold'"),
    ({"max_consecutive_faults": 0}, "controller.max_consecutive_faults",
     "must be >= 1, got 0"),
    ({"max_consecutive_faults": -3}, "controller.max_consecutive_faults",
     "must be >= 1, got -3"),
    ({"lead_time_s": 0.0}, "controller.lead_time_s", "must be > 0, got 0.0"),
    ({"lead_time_s": -0.2}, "controller.lead_time_s", "must be > 0, got -0.2"),
    ({"lead_time_s": math.nan}, "controller.lead_time_s", "must be > 0, got nan"),
    ({"lead_time_s": math.inf}, "controller.lead_time_s", "must be > 0, got inf"),
])
def test_each_bad_controller_config_value_is_refused_naming_its_path(
        kw: dict, path: str, message: str) -> None:
    with pytest.raises(ConfigError) as ei:
        ArmControllerConfig(**kw)
    assert ei.value.path == path
    assert str(ei.value) == f"{path}: {message}"


@pytest.mark.parametrize("rate_hz", [1e-3, 0.5, 1, 1.0, 999.5, 1000, 1000.0])
def test_every_rate_in_the_half_open_range_is_accepted_up_to_1000_hz(rate_hz: float) -> None:
    cfg = ArmControllerConfig(rate_hz=rate_hz)
    assert cfg.rate_hz == rate_hz and cfg.period_s == 1.0 / rate_hz


def test_the_smallest_accepted_values_of_the_other_settings() -> None:
    cfg = ArmControllerConfig(command_timeout_s=1e-6, max_consecutive_faults=1,
                              lead_time_s=1e-6, estop_action="torque_off")
    assert (cfg.command_timeout_s, cfg.max_consecutive_faults, cfg.lead_time_s,
            cfg.estop_action) == (1e-6, 1, 1e-6, "torque_off")


# --------------------------------------------------------------------------- the step itself

def test_the_first_step_takes_no_time_so_a_waiting_command_moves_nothing_yet(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    """A command that arrived before the loop started: the first step has no elapsed time to
    move by (max_velocity x 0), so it takes the torque holding where the arm is; the motion
    begins on the next tick, one period's worth.  Each reading is stamped with its step's
    time."""
    ctl, clock, _ = make(arm)
    ctl.command({"shoulder_pan": 1.0})
    r = ctl.step()
    assert r.stamp == clock.now()
    assert r.mode == "tracking" and r.target == {"shoulder_pan": 1.0}
    start = r.state.positions["shoulder_pan"]
    assert r.goal["shoulder_pan"] == pytest.approx(start, abs=1e-12)
    r = tick(ctl, clock)
    assert r.stamp == clock.now() and r.mode == "tracking"
    assert r.goal["shoulder_pan"] - start == pytest.approx(1.5 * PERIOD)


class _RaisingArm(_SpyArm):
    """A stand-in whose read raises ``error`` (not a HardwareError: a bug below the loop)."""

    error: Exception | None = None

    def read_state(self) -> ArmState:
        if self.error is not None:
            raise self.error
        return super().read_state()


def test_an_unexpected_error_in_a_step_is_a_fault_reading_and_trips_the_estop(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    spy = _RaisingArm(arm)
    ctl, clock, events = make(spy)  # type: ignore[arg-type]
    ctl.step()
    spy.error = RuntimeError("state block garbled")
    r = tick(ctl, clock)  # does not raise
    msg = "control step failed: RuntimeError: state block garbled"
    assert isinstance(r, ArmReading) and ctl.latest is r
    assert r.stamp == clock.now()
    assert (r.mode, r.state, r.goal, r.target, r.faults) == ("fault", None, {}, None, (msg,))
    assert r.estop and ctl.latch.reason == msg
    d = r.diagnostics
    assert (d.level, d.estop, d.estop_reason, d.servos) == ("error", True, msg, ())
    assert d.message == f"e-stop latched: {msg}; {msg}"
    assert [e for e in events if e[0] == "estop"] == [("estop", {"reason": msg})]
    spy.error = None  # readable again: the latch holds the arm where it is until reset
    r = tick(ctl, clock)
    assert r.mode == "estop" and r.goal == r.state.positions and r.faults == ()


class _NoTelemetryArm(_SpyArm):
    """A stand-in (a simulator's arm) that reports positions but no servo telemetry."""

    def read_state(self) -> ArmState:
        s = super().read_state()
        return ArmState(s.stamp, s.positions, s.velocities, {}, s.faults)


def test_an_arm_without_servo_telemetry_reads_ok_until_something_is_wrong(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    spy = _NoTelemetryArm(arm)
    ctl, clock, _ = make(spy)  # type: ignore[arg-type]
    r = ctl.step()
    assert r.mode == "holding" and r.faults == ()
    d = r.diagnostics
    assert (d.level, d.message, d.servos, d.estop) == ("ok", "ok", (), False)
    ctl.estop("operator pressed stop")
    r = tick(ctl, clock)
    assert r.diagnostics.level == "error"
    assert r.diagnostics.message == "e-stop latched: operator pressed stop"
    assert ctl.reset_estop() is True
    r = tick(ctl, clock)
    assert r.mode == "holding" and r.diagnostics.level == "ok"


def test_every_event_is_kept_with_its_time_kind_and_detail(sim: SimulatedBus,
                                                          arm: FeetechArm) -> None:
    ctl, clock, events = make(arm)
    ctl.step()
    clock.advance(0.5)
    ctl.hold("operator asked")
    t_hold = clock.now()
    clock.advance(0.25)
    ctl.estop("operator pressed stop")
    t_estop = clock.now()
    assert list(ctl.events) == [(t_hold, "hold", {"reason": "operator asked"}),
                                (t_estop, "estop", {"reason": "operator pressed stop"})]
    assert [(k, d) for _, k, d in ctl.events] == events
def test_a_failed_release_of_a_blocked_arm_holds_where_the_arm_is(
        blocked: tuple[SimulatedBus, FeetechArm, FakeClock]) -> None:
    """disable_torque() whose torque write fails: the torque stays on, the target is dropped,
    and the arm must hold where it is (as hold() and the watchdog do), not keep pushing
    toward the last goal, which leads a blocked arm by up to lead_time_s x max_velocity."""
    sim, arm, frozen = blocked
    spy = _SpyArm(arm)
    ctl, clock, _ = make(spy)  # type: ignore[arg-type]
    start = ctl.step().state.positions["shoulder_pan"]
    for _ in range(15):
        ctl.command({"shoulder_pan": start + 1.5})
        r = tick(ctl, clock)
    assert r.goal["shoulder_pan"] - start > 0.3  # the goal leads the blocked arm
    spy.fail_torque = True
    with pytest.raises(HardwareError, match="torque write failed"):
        ctl.disable_torque()
    r = tick(ctl, clock)
    assert r.mode == "holding" and r.target is None
    assert r.goal["shoulder_pan"] == pytest.approx(r.state.positions["shoulder_pan"], abs=2e-3)


def test_a_step_that_keeps_failing_unexpectedly_releases_the_joints_when_so_configured(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    """A bug below the loop raising every tick never reaches _step's e-stop branch again: with
    estop_action torque_off the joints are released at once all the same."""
    spy = _RaisingArm(arm)
    ctl, clock, _ = make(spy, estop_action="torque_off")  # type: ignore[arg-type]
    ctl.step()
    settle(sim, arm.bus)
    assert all(sim.torque(i) for i in range(1, 7))
    spy.error = RuntimeError("state block garbled")
    r = tick(ctl, clock, 3)
    settle(sim, arm.bus)
    assert r.estop and not any(sim.torque(i) for i in range(1, 7))
    assert spy.torque_calls[-1][0] is False
    # a torque write that fails too is reported, and step() still does not raise
    spy.fail_torque = True
    r = tick(ctl, clock)
    assert r.faults[0] == "control step failed: RuntimeError: state block garbled"
    assert r.faults[1].startswith("torque off failed: ")


# --------------------------------------------------------------------------- one tick: faults,
# flags, heat, the e-stop branch, torque

READ_ERR = "servo 1 did not answer (test)"
TORQUE_ERR = "torque write failed (test)"


class _FailWriteArm(_SpyArm):
    """A stand-in whose goal writes fail on demand (the SYNC_WRITE does not go out)."""

    fail_write = False

    def write_goal(self, positions: Mapping[str, float]) -> Mapping[str, int]:
        if self.fail_write:
            raise HardwareError("goal write failed (test)")
        return super().write_goal(positions)


def test_failed_reads_are_counted_in_each_fault_event_and_trip_a_hold_estop(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    """Each failed read: a fault reading stamped with its step, the error and the count so far
    in the event; the last of max_consecutive_faults trips the e-stop, and with the hold
    action the torque stays on (a limp arm would fall)."""
    spy = _SpyArm(arm)
    ctl, clock, events = make(spy, max_consecutive_faults=2)  # type: ignore[arg-type]
    ctl.step()
    assert spy.torque_calls == [(True, None)]
    events.clear()
    spy.fail_read = True
    r = tick(ctl, clock)
    assert (r.stamp, r.mode, r.state, r.goal) == (clock.now(), "fault", None, {})
    assert r.faults == (f"read failed: {READ_ERR}",)
    assert events == [("fault", {"error": READ_ERR, "consecutive": 1})]
    assert not ctl.latch.tripped
    r = tick(ctl, clock)
    assert (r.stamp, r.mode, r.state, r.goal) == (clock.now(), "fault", None, {})
    assert r.faults == (f"read failed: {READ_ERR}",)
    reason = f"servo bus: 2 consecutive failed reads; last: {READ_ERR}"
    assert events == [("fault", {"error": READ_ERR, "consecutive": 1}),
                      ("fault", {"error": READ_ERR, "consecutive": 2}),
                      ("estop", {"reason": reason})]
    assert ctl.latch.reason == reason
    assert spy.torque_calls == [(True, None)]  # hold: no torque write
    settle(sim, arm.bus)
    assert all(sim.torque(i) for i in range(1, 7))


def test_a_bus_loss_with_torque_off_releases_the_joints_at_once(sim: SimulatedBus,
                                                                arm: FeetechArm) -> None:
    spy = _SpyArm(arm)
    ctl, clock, events = make(spy, max_consecutive_faults=2,  # type: ignore[arg-type]
                              estop_action="torque_off")
    ctl.step()
    spy.fail_read = True
    r = tick(ctl, clock)
    assert spy.torque_calls == [(True, None)] and r.faults == (f"read failed: {READ_ERR}",)
    r = tick(ctl, clock)
    assert spy.torque_calls == [(True, None), (False, None)]
    assert (r.stamp, r.mode, r.state) == (clock.now(), "fault", None)
    assert r.faults == (f"read failed: {READ_ERR}",) and ctl.latch.tripped
    settle(sim, arm.bus)
    assert not any(sim.torque(i) for i in range(1, 7))
    # the torque write failing too: both are said, the step does not fail
    ctl2, clock2, events2 = make(spy, max_consecutive_faults=1,  # type: ignore[arg-type]
                                 estop_action="torque_off")
    spy.fail_torque = True
    r = tick(ctl2, clock2)
    assert r.faults == (f"read failed: {READ_ERR}", f"torque off failed: {TORQUE_ERR}")
    assert spy.torque_calls[-1] == (False, None)
    assert events2 == [("fault", {"error": READ_ERR, "consecutive": 1}),
                       ("estop", {"reason": f"servo bus: 1 consecutive failed reads; "
                                            f"last: {READ_ERR}"}),
                       ("fault", {"error": TORQUE_ERR})]


def test_a_servo_flag_trip_reports_the_flag_itself_as_the_fault(sim: SimulatedBus,
                                                                arm: FeetechArm) -> None:
    ctl, clock, events = make(arm)
    ctl.step()
    sim.set_error_flags(3, 0x01)
    r = tick(ctl, clock)
    assert r.mode == "estop" and len(r.faults) == 1
    assert r.faults == (ctl.latch.reason,)
    assert "elbow_flex" in r.faults[0] and "voltage" in r.faults[0]
    assert [e for e in events if e[0] == "estop"] == [("estop", {"reason": r.faults[0]})]


def test_a_servo_exactly_at_the_temperature_limit_trips_the_estop(sim: SimulatedBus,
                                                                  arm: FeetechArm) -> None:
    ctl, clock, events = make(arm)
    ctl.step()
    # the servo's own cut-out set above the controller's limit: the controller's acts alone
    sim.servos[5].mem[STS3215.MAX_TEMPERATURE.address] = 80
    sim.servos[5].temperature_c = 69
    r = tick(ctl, clock)
    assert r.mode == "holding" and not r.estop and r.faults == ()
    sim.servos[5].temperature_c = 70  # max_temperature_c: at it is too hot
    r = tick(ctl, clock)
    msg = "wrist_roll (servo 5) at 70 °C, above 70 °C"
    assert r.mode == "estop" and r.faults == (msg,) and ctl.latch.reason == msg
    assert [e for e in events if e[0] == "estop"] == [("estop", {"reason": msg})]


def test_a_hold_estop_keeps_the_pose_it_tripped_at_when_the_arm_is_pushed(
        blocked: tuple[SimulatedBus, FeetechArm, FakeClock]) -> None:
    sim, arm, frozen = blocked
    ctl, clock, _ = make(arm)
    ctl.step()
    ctl.estop("operator pressed stop")
    r = tick(ctl, clock)
    held = dict(r.goal)
    assert r.mode == "estop" and r.stamp == clock.now() and held == r.state.positions
    sim.set_position(3, 2300)  # pushed away
    for _ in range(3):
        r = tick(ctl, clock)
        assert r.state.positions["elbow_flex"] > held["elbow_flex"] + 0.3
        assert r.mode == "estop" and r.goal == held and r.stamp == clock.now()


def test_a_torque_off_estop_releases_once_and_retries_a_failed_release(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    """The release is written on the first latched tick; one that fails is said and tried
    again every tick until the joints are free; then nothing more is written."""
    spy = _SpyArm(arm)
    ctl, clock, events = make(spy, estop_action="torque_off")  # type: ignore[arg-type]
    ctl.step()
    events.clear()
    ctl.estop("stop")
    spy.fail_torque = True
    r = tick(ctl, clock)
    assert (r.mode, r.goal, r.stamp) == ("estop", {}, clock.now())
    assert r.faults == (f"torque off failed: {TORQUE_ERR}",)
    assert events == [("estop", {"reason": "stop"}), ("fault", {"error": TORQUE_ERR})]
    assert spy.torque_calls == [(True, None), (False, None)]
    settle(sim, arm.bus)
    assert all(sim.torque(i) for i in range(1, 7))  # still on: the release must be retried
    spy.fail_torque = False
    r = tick(ctl, clock)
    assert (r.mode, r.goal, r.faults, r.stamp) == ("estop", {}, (), clock.now())
    assert spy.torque_calls == [(True, None), (False, None), (False, None)]
    settle(sim, arm.bus)
    assert not any(sim.torque(i) for i in range(1, 7))
    tick(ctl, clock, 3)
    assert len(spy.torque_calls) == 3  # released: nothing more is written


def test_a_torque_off_estop_writes_no_release_while_the_joints_stay_free(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    spy = _SpyArm(arm)
    ctl, clock, _ = make(spy, estop_action="torque_off")  # type: ignore[arg-type]
    ctl.step()
    ctl.estop("stop")
    tick(ctl, clock, 4)
    assert spy.torque_calls == [(True, None), (False, None)]


def test_a_hold_estop_with_the_joints_free_writes_no_goal(sim: SimulatedBus,
                                                          arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm)
    ctl.step()
    ctl.disable_torque()
    tick(ctl, clock)
    settle(sim, arm.bus)
    sim.clear_frames()
    ctl.estop("stop")
    r = tick(ctl, clock, 3)
    settle(sim, arm.bus)
    assert (r.mode, r.goal, r.faults) == ("estop", {}, ())
    assert sim.goal_writes() == []


def test_a_hold_estop_whose_goal_write_fails_says_so(sim: SimulatedBus,
                                                     arm: FeetechArm) -> None:
    spy = _FailWriteArm(arm)
    ctl, clock, events = make(spy)  # type: ignore[arg-type]
    ctl.step()
    ctl.estop("stop")
    spy.fail_write = True
    events.clear()
    r = tick(ctl, clock)
    assert (r.mode, r.goal) == ("estop", {})
    assert r.faults == ("write failed: goal write failed (test)",)
    assert events == [("fault", {"error": "goal write failed (test)"})]


def test_after_a_reset_the_hold_stays_where_it_began_when_the_arm_is_pushed(
        blocked: tuple[SimulatedBus, FeetechArm, FakeClock]) -> None:
    """The reset takes the pose once, at the first step after it; it does not keep following
    the arm (a push must be resisted, as in any hold)."""
    sim, arm, frozen = blocked
    ctl, clock, _ = make(arm)
    ctl.step()
    ctl.estop("stop")
    tick(ctl, clock)
    assert ctl.reset_estop() is True
    r = tick(ctl, clock)
    at = dict(r.goal)
    assert r.mode == "holding" and at == r.state.positions
    sim.set_position(3, 2300)  # pushed away
    for _ in range(3):
        r = tick(ctl, clock)
        assert r.state.positions["elbow_flex"] > at["elbow_flex"] + 0.3
        assert r.mode == "holding" and r.goal == at


def test_a_latch_released_behind_the_controllers_back_never_resumes_the_old_target(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    """The e-stop branch itself drops the target: a latch reset directly (not through
    reset_estop) finds no target to go on to, and no stale one for the watchdog to drop."""
    ctl, clock, events = make(arm)
    ctl.step()
    ctl.command({"shoulder_lift": 1.0})
    tick(ctl, clock, 3)
    ctl.estop("stop")
    tick(ctl, clock)
    assert ctl.latch.reset() is True
    r = tick(ctl, clock)
    assert r.mode == "holding" and r.target is None
    assert r.goal == r.state.positions and r.goal["shoulder_lift"] < 0.5
    assert "watchdog" not in [k for k, _ in events]


def test_a_release_outside_the_controller_is_followed_not_undone(sim: SimulatedBus,
                                                                 arm: FeetechArm) -> None:
    """Torque switched off on the arm itself (a calibration tool): the controller follows the
    free joints and never takes the torque back on its own, until enable_torque()."""
    ctl, clock, _ = make(arm)
    ctl.step()
    tick(ctl, clock)
    arm.set_torque(False)
    for _ in range(3):
        r = tick(ctl, clock)
        assert (r.mode, r.goal, r.stamp) == ("torque_off", {}, clock.now())
    settle(sim, arm.bus)
    assert not any(sim.torque(i) for i in range(1, 7)) and not arm.torque_enabled
    ctl.enable_torque()
    r = tick(ctl, clock)
    assert r.mode == "holding" and arm.torque_enabled


def test_a_torque_on_that_fails_leaves_no_stale_target_for_the_watchdog(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    """The first torque-on fails: the joints stay free and followed, with no target; when it
    goes through at the next step the arm holds, with nothing for the watchdog to drop."""
    spy = _SpyArm(arm)
    ctl, clock, events = make(spy)  # type: ignore[arg-type]
    spy.fail_torque = True
    r = ctl.step()
    assert r.mode == "torque_off" and r.target is None
    assert r.faults == (f"torque on failed: {TORQUE_ERR}",)
    spy.fail_torque = False
    r = tick(ctl, clock)
    assert r.mode == "holding" and r.target is None and r.faults == ()
    assert [k for k, _ in events] == ["fault"]


def test_the_setpoint_survives_a_failed_read_while_the_joints_are_free(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    spy = _SpyArm(arm)
    ctl, clock, _ = make(spy)  # type: ignore[arg-type]
    ctl.step()
    ctl.disable_torque()
    r = tick(ctl, clock)
    assert r.mode == "torque_off"
    spy.fail_read = True
    assert tick(ctl, clock).state is None
    assert ctl.setpoint() == r.state.positions


def test_the_setpoint_after_a_reset_is_where_the_arm_is_even_before_a_goal_goes_out(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    """A reset takes the pose as the new setpoint at once: a hold write that fails and a read
    that fails after it leave a jog starting from where the arm is, not from nothing."""
    spy = _FailWriteArm(arm)
    ctl, clock, _ = make(spy)  # type: ignore[arg-type]
    ctl.step()
    ctl.estop("stop")
    tick(ctl, clock)
    assert ctl.reset_estop() is True
    spy.fail_write = True
    r = tick(ctl, clock)
    assert (r.mode, r.goal) == ("holding", {})
    assert r.faults == ("write failed: goal write failed (test)",)
    spy.fail_read = True
    assert tick(ctl, clock).state is None
    assert ctl.setpoint() == r.state.positions


class _TelemetryArm(_SpyArm):
    """The sim's arm with chosen servo telemetry (per joint: field overrides of the reading),
    and ``bus`` as given (the real bus, one without stats, or none at all)."""

    def __init__(self, arm: FeetechArm, bus: object = None) -> None:
        super().__init__(arm)
        self.overrides: dict[str, dict[str, object]] = {}
        if bus is not None:
            self.bus = bus

    def read_state(self) -> ArmState:
        import dataclasses
        s = super().read_state()
        servos = {n: dataclasses.replace(r, **self.overrides.get(n, {}))
                  for n, r in s.servos.items()}
        return ArmState(s.stamp, s.positions, s.velocities, servos, s.faults)


_CALM = {"voltage_v": 7.4, "temperature_c": 30.0, "load": 0.0, "moving": False,
         "error_flags": ()}


def _diag_after(arm: FeetechArm, overrides: dict[str, dict[str, object]]
                ) -> tuple[ArmReading, ArmController]:
    spy = _TelemetryArm(arm)
    spy.overrides = {n: {**_CALM, **overrides.get(n, {})} for n in arm.joint_names}
    ctl, clock, _ = make(spy)  # type: ignore[arg-type]
    ctl.step()
    return tick(ctl, clock), ctl


def test_diagnostics_of_healthy_servos_are_ok_with_each_servos_telemetry(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    from solarian_agent.hw.feetech.controller import ServoDiagnostic
    r, _ = _diag_after(arm, {"elbow_flex": {"voltage_v": 6.0, "temperature_c": 54.0,
                                            "load": -0.79, "moving": True},
                             "wrist_flex": {"voltage_v": 13.0}})
    d = r.diagnostics
    assert (d.level, d.message, d.estop, d.estop_reason) == ("ok", "ok", False, "")
    ids = {n: s.servo_id for n, s in r.state.servos.items()}
    assert ids["elbow_flex"] == 3 and ids["wrist_roll"] == 5
    want = []
    for n in arm.joint_names:
        v, t, ld, mv = 7.4, 30.0, 0.0, False
        if n == "elbow_flex":
            v, t, ld, mv = 6.0, 54.0, -0.79, True
        if n == "wrist_flex":
            v = 13.0
        want.append(ServoDiagnostic(n, ids[n], "ok", "ok", v, t, ld, mv))
    assert d.servos == tuple(want)


def test_diagnostics_of_a_warm_servo_warn_with_the_temperature(sim: SimulatedBus,
                                                               arm: FeetechArm) -> None:
    r, _ = _diag_after(arm, {"wrist_roll": {"temperature_c": 55.0}})
    d = r.diagnostics
    sv = {s.joint: s for s in d.servos}
    assert (sv["wrist_roll"].level, sv["wrist_roll"].message) == ("warn", "hot: 55 °C")
    assert all((s.level, s.message) == ("ok", "ok") for s in d.servos if s.joint != "wrist_roll")
    assert (d.level, d.message) == ("warn", "wrist_roll: hot: 55 °C")
    assert not d.estop and r.faults == ()


def test_diagnostics_of_a_hot_servo_at_the_limit_are_an_error(sim: SimulatedBus,
                                                              arm: FeetechArm) -> None:
    r, ctl = _diag_after(arm, {"wrist_roll": {"temperature_c": 70.0}})
    d = r.diagnostics
    sv = {s.joint: s for s in d.servos}
    assert (sv["wrist_roll"].level, sv["wrist_roll"].message) == ("error", "70 °C")
    trip = "wrist_roll (servo 5) at 70 °C, above 70 °C"
    assert d.estop and d.estop_reason == trip == ctl.latch.reason
    assert (d.level, d.message) == (
        "error", f"e-stop latched: {trip}; {trip}; wrist_roll: 70 °C")


def test_diagnostics_of_a_low_or_high_supply_and_a_heavy_load_warn(sim: SimulatedBus,
                                                                   arm: FeetechArm) -> None:
    r, _ = _diag_after(arm, {"shoulder_pan": {"voltage_v": 5.94},
                             "shoulder_lift": {"voltage_v": 13.06},
                             "elbow_flex": {"load": 0.8},
                             "wrist_flex": {"load": -0.9, "temperature_c": 60.0,
                                            "voltage_v": 5.0}})
    d = r.diagnostics
    sv = {s.joint: (s.level, s.message) for s in d.servos}
    assert sv["shoulder_pan"] == ("warn", "supply 5.9 V")
    assert sv["shoulder_lift"] == ("warn", "supply 13.1 V")
    assert sv["elbow_flex"] == ("warn", "load 80%")
    assert sv["wrist_flex"] == ("warn", "hot: 60 °C; supply 5.0 V; load 90%")
    assert sv["wrist_roll"] == ("ok", "ok")
    assert d.level == "warn"
    assert d.message == ("shoulder_pan: supply 5.9 V; shoulder_lift: supply 13.1 V; "
                         "elbow_flex: load 80%; wrist_flex: hot: 60 °C; supply 5.0 V; load 90%")


def test_diagnostics_of_servo_flags_name_every_flag(sim: SimulatedBus, arm: FeetechArm) -> None:
    r, _ = _diag_after(arm, {"elbow_flex": {"error_flags": ("voltage", "overheat"),
                                            "load": 0.85}})
    d = r.diagnostics
    sv = {s.joint: (s.level, s.message) for s in d.servos}
    assert sv["elbow_flex"] == ("error", "voltage, overheat; load 85%")
    assert (d.level, d.message) == ("error", "elbow_flex: voltage, overheat; load 85%")


def test_diagnostics_of_an_estop_and_a_stale_command_stream(sim: SimulatedBus,
                                                            arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm, command_timeout_s=0.1)
    ctl.step()
    ctl.command({"elbow_flex": 0.2})
    d = tick(ctl, clock).diagnostics
    assert d.watchdog_expired is False and (d.level, d.message) == ("ok", "ok")
    d = tick(ctl, clock, 6).diagnostics
    assert d.watchdog_expired is True
    ctl.estop("operator pressed stop")
    d = tick(ctl, clock).diagnostics
    assert (d.level, d.message, d.estop, d.estop_reason) == (
        "error", "e-stop latched: operator pressed stop", True, "operator pressed stop")
    assert d.consecutive_faults == 0


def test_diagnostics_carry_the_bus_stats_only_when_the_bus_has_them(sim: SimulatedBus,
                                                                    arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm)
    ctl.step()
    d = tick(ctl, clock).diagnostics
    assert d.bus == dict(vars(arm.bus.stats)) and d.bus["tx_frames"] > 0
    spy = _TelemetryArm(arm, bus=object())  # a bus without stats
    ctl, clock, _ = make(spy)  # type: ignore[arg-type]
    ctl.step()
    r = tick(ctl, clock)
    assert r.faults == () and (r.diagnostics.level, r.diagnostics.bus) == ("ok", {})


# --------------------------------------------------------------------------- survivors (E):
# the workspace hold, the watchdog's event, start-up settings, the loop's last resort


def _dip_guard() -> object:
    """A one-joint workspace guard whose tip dips below the box for shoulder_pan in
    (0.04, 0.2): a straight path from 0 to the safe target 0.3 crosses the dip."""
    from solarian_agent.arm.safety import Workspace, WorkspaceGuard

    def fk(q: Sequence[float]) -> tuple[float, float, float]:
        return (0.1, 0.0, -0.1 if 0.04 < q[0] < 0.2 else 0.1)

    return WorkspaceGuard(Workspace(), fk, ("shoulder_pan",))


def test_a_step_into_the_dip_is_held_at_the_boundary_where_the_arm_is(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    guard = _dip_guard()
    ctl, clock, _ = make(arm, workspace=guard)
    ctl.step()
    ctl.command({"shoulder_pan": 0.3})
    r1 = tick(ctl, clock)
    assert (r1.mode, r1.faults) == ("tracking", ())
    assert r1.goal["shoulder_pan"] == pytest.approx(1.5 * PERIOD)  # 0.03: still inside
    ctl.command({"shoulder_pan": 0.3})
    r2 = tick(ctl, clock)  # 0.06 would dip out of the box: held where the arm is
    assert r2.mode == "tracking"
    assert r2.faults == ("workspace: step held at the workspace boundary",)
    assert r2.goal == r2.state.positions
    assert r2.goal["shoulder_pan"] == pytest.approx(1.5 * PERIOD, abs=2e-3)
    assert guard.rejected == 1  # type: ignore[attr-defined]


def test_the_watchdog_event_says_how_stale_and_what_was_done_once(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, events = make(arm, command_timeout_s=0.1)
    ctl.step()
    ctl.command({"elbow_flex": 1.0})
    t0 = clock.now()
    tick(ctl, clock, 5)
    events.clear()
    r = tick(ctl, clock)  # 0.12 s: stale
    assert r.mode == "holding" and r.stamp == clock.now()
    assert events == [("watchdog", {
        "age_s": pytest.approx(clock.now() - t0), "timeout_s": 0.1,
        "action": "holding at present position; target dropped"})]
    for _ in range(5):
        r = tick(ctl, clock)
        assert (r.mode, r.stamp, r.target) == ("holding", clock.now(), None)
    assert [k for k, _ in events] == ["watchdog"]  # said once: the target is gone


def test_the_default_controller_guards_the_workspace(sim: SimulatedBus,
                                                     arm: FeetechArm) -> None:
    ctl = ArmController(arm, FakeClock())
    assert ctl.guard is not None and "shoulder_lift" in ctl.guard.joints


def test_with_torque_on_start_off_the_first_steps_leave_the_joints_free(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    spy = _SpyArm(arm)
    ctl, clock, _ = make(spy, enable_torque_on_start=False)  # type: ignore[arg-type]
    r = ctl.step()
    r = tick(ctl, clock, 2)
    settle(sim, arm.bus)
    assert r.mode == "torque_off" and spy.torque_calls == []
    assert not any(sim.torque(i) for i in range(1, 7))


def test_the_event_log_keeps_the_last_200(sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, _, _ = make(arm)
    for i in range(205):
        ctl.hold(f"h{i}")
    assert len(ctl.events) == 200
    assert ctl.events[0][2] == {"reason": "h5"} and ctl.events[-1][2] == {"reason": "h204"}


def test_a_failing_release_in_the_last_resort_is_reported_as_it_failed(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    spy = _RaisingArm(arm)
    ctl, clock, _ = make(spy, estop_action="torque_off")  # type: ignore[arg-type]
    ctl.step()
    spy.error = RuntimeError("garbled")
    spy.fail_torque = True
    r = tick(ctl, clock)
    assert r.faults == ("control step failed: RuntimeError: garbled",
                        f"torque off failed: {TORQUE_ERR}")

    class _BadTorque(_RaisingArm):
        def set_torque(self, enabled: bool, joints: Sequence[str] | None = None) -> None:
            if self.fail_torque:
                raise ValueError("torque register out of range")
            super().set_torque(enabled, joints)

    spy2 = _BadTorque(arm)
    ctl2, clock2, _ = make(spy2, estop_action="torque_off")  # type: ignore[arg-type]
    ctl2.step()
    spy2.error = RuntimeError("garbled")
    spy2.fail_torque = True
    r = tick(ctl2, clock2)
    assert r.faults == ("control step failed: RuntimeError: garbled",
                        "torque off failed: ValueError: torque register out of range")


def test_a_failed_release_while_latched_holds_where_the_arm_is(sim: SimulatedBus,
                                                                arm: FeetechArm) -> None:
    spy = _SpyArm(arm)
    ctl, clock, _ = make(spy)  # type: ignore[arg-type]
    ctl.step()
    ctl.estop("test")
    tick(ctl, clock, 2)
    spy.fail_torque = True
    with pytest.raises(HardwareError, match="torque write failed"):
        ctl.disable_torque()
    r = tick(ctl, clock)
    assert r.mode == "estop" and r.goal == r.state.positions and len(r.goal) == 6


def test_a_command_after_a_failed_release_goes_on_from_the_last_goal(
        blocked: tuple[SimulatedBus, FeetechArm, FakeClock]) -> None:
    """disable_torque() whose torque write fails leaves the torque on and resumes nothing: a
    new command tracks from the last goal written (kept within the lead of the arm), as any
    command does, not from a reset to where the arm is."""
    sim, arm, frozen = blocked
    spy = _SpyArm(arm)
    ctl, clock, _ = make(spy, lead_time_s=0.1)  # type: ignore[arg-type]
    start = ctl.step().state.positions["shoulder_pan"]
    for _ in range(3):
        ctl.command({"shoulder_pan": start + 1.5})
        r = tick(ctl, clock)
    g = r.goal["shoulder_pan"]
    assert g - start == pytest.approx(3 * 1.5 * PERIOD, abs=2e-3)
    spy.fail_torque = True
    with pytest.raises(HardwareError, match="torque write failed"):
        ctl.disable_torque()
    ctl.command({"shoulder_pan": start + 1.5})
    r = tick(ctl, clock)
    assert r.mode == "tracking"
    assert r.goal["shoulder_pan"] == pytest.approx(g + 1.5 * PERIOD)


def test_a_command_right_after_a_hold_leaves_the_other_joints_where_the_arm_is(
        blocked: tuple[SimulatedBus, FeetechArm, FakeClock]) -> None:
    """hold() then, before the next step, a command for another joint: the joints it does not
    name hold where the arm is, never the old goal (a lead ahead of a blocked arm)."""
    sim, arm, frozen = blocked
    ctl, clock, _ = make(arm, lead_time_s=0.1)
    start = ctl.step().state.positions["shoulder_pan"]
    for _ in range(3):
        ctl.command({"shoulder_pan": start + 1.5})
        r = tick(ctl, clock)
    assert r.goal["shoulder_pan"] - r.state.positions["shoulder_pan"] > 0.05  # leads the arm
    ctl.hold()
    ctl.command({"elbow_flex": r.state.positions["elbow_flex"] + 0.5})
    r = tick(ctl, clock)
    assert r.goal["shoulder_pan"] == pytest.approx(r.state.positions["shoulder_pan"], abs=2e-3)
