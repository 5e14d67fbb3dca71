"""ArmController's limits on what reaches the wire: no goal outside the joint limits, faster
than the speed limits or outside the workspace box, whatever commands arrive (hypothesis
over the pty sim); targets outside the box refused with the reason, steps into it held."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import pytest
from hw_helpers import NAMES, PERIOD, TIMEOUT_S, make, property_settings, settle, tick
from hypothesis import given
from hypothesis import strategies as st

from solarian_agent.arm.safety import EStopLatchedError, UnsafeCommandError
from solarian_agent.core.clock import FakeClock
from solarian_agent.hw.feetech import ArmController, FeetechArm, FeetechArmConfig, default_so101
from solarian_agent.hw.feetech.simbus import SimulatedBus


@pytest.fixture(scope="module")
def wire() -> Iterator[tuple[SimulatedBus, FeetechArm]]:
    with SimulatedBus(speed_ticks_per_s=None) as s:
        a = FeetechArm(FeetechArmConfig(port=s.port_name, timeout_s=TIMEOUT_S),
                       calibration=default_so101())
        a.connect()
        yield s, a
        a.disconnect()


value = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(-1e9, 1e9),
    st.floats(-4.0, 4.0),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e308, 0.06, 0.061, -0.0])
)
command = st.dictionaries(st.sampled_from([*NAMES, "bogus"]), value, min_size=1, max_size=7)
action = st.one_of(
    st.tuples(st.just("cmd"), command, st.floats(0.0, 0.5)),
    st.tuples(st.just("estop"), st.just({}), st.floats(0.0, 0.1)),
    st.tuples(st.just("reset"), st.just({}), st.floats(0.0, 0.1)),
    st.tuples(st.just("wait"), st.just({}), st.floats(0.0, 2.0))
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


def test_target_outside_the_workspace_is_refused_with_the_reason(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    from solarian_agent.arm.safety import WorkspaceError

    ctl, clock, _ = make(arm, workspace=True)
    tick(ctl, clock)
    with pytest.raises(WorkspaceError, match="tip z="):
        # shoulder and elbow folded forward: the fingers would go through the table
        ctl.command({"shoulder_lift": 0.8, "elbow_flex": 0.5, "wrist_flex": 0.0})


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


def test_the_default_controller_guards_the_workspace(sim: SimulatedBus,
                                                     arm: FeetechArm) -> None:
    ctl = ArmController(arm, FakeClock())
    assert ctl.guard is not None and "shoulder_lift" in ctl.guard.joints
