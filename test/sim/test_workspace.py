"""The workspace box: no command makes the (simulated) arm's tip leave it."""

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from solarian_agent.arm.kinematics import ARM_JOINTS, ArmModel, workspace_guard
from solarian_agent.arm.safety import Workspace, WorkspaceError
from solarian_agent.core import names
from solarian_agent.core.clock import FakeClock
from solarian_agent.core.errors import ConfigError
from solarian_agent.core.messages import JointCommand
from solarian_agent.core.transport import Bus
from solarian_agent.sim.component import SimWorldComponent
from solarian_agent.sim.render import Renderer
from solarian_agent.sim.world import World

MODEL = ArmModel.default()


def test_workspace_box_and_its_config_errors():
    box = Workspace()
    assert box.excess((0.2, 0.0, 0.1)) == 0.0
    assert box.excess((0.2, 0.0, -0.01)) == pytest.approx(0.015)
    assert "tip z=-0.010" in box.violation((0.2, 0.0, -0.01))
    with pytest.raises(ConfigError, match="workspace.w"):
        Workspace.from_mapping({"w": [0, 1]})
    with pytest.raises(ConfigError, match="lo < hi"):
        Workspace.from_mapping({"z": [0.3, 0.1]})


def test_guard_refuses_targets_and_holds_steps_that_leave_the_box():
    g = workspace_guard(MODEL)
    home = dict(zip(ARM_JOINTS, (0.0, -0.6, 0.7, 1.1, 0.0), strict=True))
    into_table = {"shoulder_lift": 0.8, "elbow_flex": 0.5, "wrist_flex": 0.0}
    with pytest.raises(WorkspaceError):
        g.check_target(into_table, home)
    assert g.safe_step(home, {**home, **into_table}) == {**home}  # held
    inside = {**home, "shoulder_pan": 0.3}
    assert g.safe_step(home, inside) == inside
    # an arm already outside may move back in, never further out
    outside = {**home, **into_table}
    back = {**outside, "shoulder_lift": 0.7}
    assert Workspace().excess(MODEL.fk([back[j] for j in ARM_JOINTS])[0]) < \
        Workspace().excess(MODEL.fk([outside[j] for j in ARM_JOINTS])[0])
    assert g.safe_step(outside, back) == back


joint_cmd = st.fixed_dictionaries({j: st.floats(-3.0, 3.0) for j in ARM_JOINTS})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(joint_cmd, st.integers(1, 60)), min_size=1, max_size=6))
def test_no_command_drives_the_simulated_tip_out_of_the_workspace(cmds):
    clock, bus = FakeClock(), Bus()
    world = World(MODEL, seed=1)
    sim = SimWorldComponent(bus, clock, world, Renderer(MODEL))
    pub = bus.publisher(names.JOINT_COMMANDS, names.T_JOINT_COMMAND)
    box = Workspace()
    for cmd, steps in cmds:
        pub.publish(JointCommand(clock.now(), tuple(cmd), tuple(cmd.values())))
        for _ in range(steps):
            clock.advance(0.02)
            sim.step(0.02)
            xyz = MODEL.fk(world.q[:5])[0]
            assert box.excess(xyz) <= 1e-9, (world.q, xyz)
    assert math.isfinite(float(world.q[0]))


def test_the_guard_keeps_the_jaw_tips_off_the_table_not_only_the_tool_point():
    # pointing straight down, the jaw tips reach 6 mm below the tool point: a tool point 8 mm
    # up is inside the box, but the tips would be 2 mm up, under the 5 mm floor
    from solarian_agent.arm.kinematics import JAW_TIPS_PAST_TOOL_POINT

    g = workspace_guard(MODEL)
    floor = Workspace().z[0]
    start = dict(zip(ARM_JOINTS, MODEL.ik_search((0.2, 0.0, 0.1), [math.pi / 2])[0],
                     strict=True))
    for z, allowed in ((0.008, False), (floor + JAW_TIPS_PAST_TOOL_POINT + 0.002, True)):
        q, pitch = MODEL.ik_search((0.2, 0.0, z), [math.pi / 2])
        assert pitch == pytest.approx(math.pi / 2)
        assert MODEL.fk(q)[0][2] == pytest.approx(z, abs=1e-3)
        tips = MODEL.guard_point(q)
        assert tips[2] == pytest.approx(z - JAW_TIPS_PAST_TOOL_POINT, abs=1e-3)
        target = dict(zip(ARM_JOINTS, q, strict=True))
        if allowed:
            g.check_target(target, start)
        else:
            with pytest.raises(WorkspaceError, match="tip z=0.002"):
                g.check_target(target, start)
    # a level approach: the tips are beside the tool point, not below it
    q, pitch = MODEL.ik_search((0.25, 0.0, 0.12), [0.0])
    assert MODEL.guard_point(q)[2] == pytest.approx(MODEL.fk(q)[0][2], abs=1e-3)
