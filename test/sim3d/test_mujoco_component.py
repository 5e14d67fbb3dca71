"""The sim node's core over the MuJoCo backend: the same topics, services and safety layer
as over the 2D world, and a pick through the safety layer that squeezes and holds."""

from __future__ import annotations

import numpy as np
import pytest

from solarian_agent.arm.grasp import descent, grasp_joints, open_angle
from solarian_agent.arm.jaw import SO101_JAW
from solarian_agent.arm.kinematics import JOINT_NAMES
from solarian_agent.core import names
from solarian_agent.core.messages import CameraInfo, Image, JointState
from solarian_agent.sim.layout import APPROACH_PITCHES
from solarian_agent.sim.mujoco.render import MujocoRenderer
from solarian_agent.sim.mujoco.world import MujocoWorld
from solarian_agent.sim.rig import SimRig


class Rig(SimRig):
    def __init__(self, world: MujocoWorld, renderer: MujocoRenderer) -> None:
        world.reset(3)
        super().__init__(world, renderer)

    def tip_to(self, x: float, y: float, z: float, seconds: float = 2.5,
               **extra: float) -> None:
        q, _ = self.world.arm.ik_search((x, y, z), APPROACH_PITCHES, self.world.q[:5])
        self.command(**dict(zip(JOINT_NAMES[:5], map(float, q), strict=True)), **extra)
        self.run(seconds)

    def joints_to(self, q: np.ndarray, seconds: float = 2.5, **extra: float) -> None:
        self.command(**dict(zip(JOINT_NAMES[:5], map(float, q), strict=True)), **extra)
        self.run(seconds)


@pytest.fixture
def rig(world: MujocoWorld, renderer: MujocoRenderer) -> Rig:
    r = Rig(world, renderer)
    yield r
    r.sim.close()


def test_publishes_the_same_topics_as_the_2d_world(rig: Rig) -> None:
    rig.run(1.0)
    states: list[JointState] = rig.js.drain()
    assert len(states) == 50 and states[-1].name == JOINT_NAMES
    assert states[-1].position == pytest.approx(tuple(rig.world.q))
    for cam, (w, h) in {"overhead": (640, 480), "wrist": (480, 360)}.items():
        frames: list[Image] = rig.imgs[cam].drain()
        assert [f.seq for f in frames] == list(range(1, 11))
        assert (frames[0].width, frames[0].height) == (w, h)
        assert frames[0].frame_id == f"{cam}_camera_optical"
        assert not frames[0].data.flags.writeable
    info: CameraInfo = rig.bus.subscribe(names.camera_info_topic("wrist"),
                                         names.T_CAMERA_INFO).latest()
    assert info is not None and info.k[0] == 300.0 and info.width == 480
    truth = rig.truth.latest()
    assert truth["backend"] == "mujoco" and set(truth["objects"]) == {"red_cup",
                                                                      "yellow_paper"}


def test_commands_pass_the_safety_layer(rig: Rig) -> None:
    lim = rig.world.arm.limits["shoulder_pan"]
    rig.command(shoulder_pan=5.0)  # beyond its limit
    rig.run(0.1)
    assert rig.world.setpoint[0] <= lim.velocity * 0.1 + 1e-9  # no faster than allowed
    rig.run(2.5)
    assert rig.world.setpoint[0] == pytest.approx(lim.upper)
    assert rig.world.q[0] == pytest.approx(lim.upper, abs=0.01)
    rig.command(elbow=0.3)
    rig.command(shoulder_pan=float("nan"))
    rig.run(0.1)
    assert rig.sim.commands_rejected == 2
    # a target that takes the tip into the table is refused by the workspace guard
    rig.command(shoulder_pan=0.0, shoulder_lift=1.7, elbow_flex=0.0, wrist_flex=1.0)
    rig.run(0.1)
    assert rig.sim.commands_rejected == 3 and "outside [0.005" in rig.sim.last_rejection


def test_estop_holds_the_physical_arm_and_refuses_commands(rig: Rig) -> None:
    rig.command(shoulder_pan=1.0)
    rig.run(0.3)
    rig.bus.call(names.ESTOP, {"reason": "test"})
    held = rig.world.q[0]
    rig.run(0.5)
    assert rig.world.q[0] == pytest.approx(held, abs=0.08)  # it stops where the servo was
    rig.command(shoulder_pan=-1.0)
    rig.run(0.3)
    # the rig's resend of its first command after the trip, then the new one: both refused
    assert rig.sim.commands_rejected == 2 and "e-stop" in rig.sim.last_rejection
    assert rig.bus.call(names.ESTOP_RESET, None)["success"]


def test_reset_and_fault_services(rig: Rig) -> None:
    before = rig.world.truth()["objects"]["red_cup"]
    ans = rig.bus.call(names.SIM_RESET, {"seed": 8})
    assert ans["ok"] and ans["seed"] == 8 and rig.world.seed == 8
    assert rig.world.truth()["objects"]["red_cup"]["x"] != before["x"]
    assert not rig.bus.call(names.SIM_RESET, {"seed": 1.5})["ok"]
    assert rig.bus.call(names.SIM_INJECT_FAULT, {"kind": "slip"})["ok"]
    bad = rig.bus.call(names.SIM_INJECT_FAULT, {"kind": "move_object", "object": "mug"})
    assert not bad["ok"] and "mug" in bad["message"]
    rig.run(0.3)
    rig.imgs["overhead"].drain()
    assert rig.bus.call(names.SIM_INJECT_FAULT, {"kind": "camera_freeze",
                                                 "camera": "overhead",
                                                 "duration_s": 0.5})["ok"]
    rig.command(shoulder_pan=0.8)
    rig.run(0.5)
    frozen: list[Image] = rig.imgs["overhead"].drain()
    # the frames inside the window are one old frame again; the tick at its end is new
    assert len(frozen) == 5 and all(f is frozen[0] for f in frozen[:4])
    assert rig.world.faults.counts["camera_freeze"] == 1


def test_a_pick_through_the_safety_layer_squeezes_and_holds(rig: Rig) -> None:
    cup = rig.world.objects["red_cup"]
    centre = (cup.x, cup.y, 0.015)
    arm = rig.world.arm
    above, _ = grasp_joints(arm, (cup.x, cup.y, 0.09), cup.width, APPROACH_PITCHES,
                            rig.world.q[:5])
    rig.joints_to(above, gripper=open_angle(cup.width))
    for q in descent(arm, centre, cup.width, 0.09, APPROACH_PITCHES, above):
        rig.joints_to(q, seconds=0.6)
    rig.command(gripper=SO101_JAW.lower)
    rig.run(1.5)
    # the servo leads the jaw by the controller's lead (0.4 rad), not by one tick's step
    assert rig.world.setpoint[5] < rig.world.q[5] - 0.3
    rig.tip_to(float(rig.world.tip_xyz[0]), float(rig.world.tip_xyz[1]), 0.12)
    truth = rig.truth.latest()
    assert truth["held"] == "red_cup" and truth["objects"]["red_cup"]["z"] > 0.08
    js: JointState = rig.js.drain()[-1]
    # the jaw angle: the opened jaws' narrowest gap (the moving finger's upper end) is the
    # cup's width
    assert SO101_JAW.clearance(js.position[5]) == pytest.approx(0.04, abs=0.003)
