"""The revolute jaw grasps by contact: it closes on the cup against the fixed jaw and lifts it."""

from __future__ import annotations

import math

import mujoco
import numpy as np

from solarian_agent.arm.jaw import SO101_JAW
from solarian_agent.arm.kinematics import ArmModel
from solarian_agent.sim.mujoco.world import MujocoWorld

DOWN = math.pi / 2  # approach straight down


def _pose_beside(arm: ArmModel, centre: np.ndarray, radius: float, z: float,
                 jaw: float) -> np.ndarray:
    """Joints putting the fixed jaw's face (the tool point) 5 mm outside the cup, the cup on
    the moving jaw's side (gripper_link +x is the closing direction)."""
    q = np.array([0.0, 0.0, 0.0, 0.0, 0.0, jaw])
    for _ in range(3):  # the closing direction depends on the pose: settle it
        closing = arm.frame_pose(q, "gripper_link")[:3, 0]
        target = centre - (radius + 0.005) * closing
        target[2] = z
        q = arm.ik(target, DOWN, q)
        q[5] = jaw
    return q


def _teleport(world: MujocoWorld, q: np.ndarray) -> None:
    world._set_joints(q)
    world.setpoint[:] = q
    world.target[:] = q
    mujoco.mj_forward(world.model, world.data)
    world._read_state()


def test_the_jaw_closes_on_the_cup_by_contact_and_lifts_it(arm: ArmModel,
                                                           world: MujocoWorld) -> None:
    world.reset(world.seed)
    cup = world.objects["red_cup"]
    centre = np.array([cup.x, cup.y, 0.0])
    open_jaw = SO101_JAW.angle_for(2 * cup.radius + 0.03)
    q = _pose_beside(arm, centre, cup.radius, cup.height / 2, open_jaw)
    _teleport(world, q)
    assert world.held is None
    world.command({"gripper": -0.17})
    for _ in range(60):
        world.step(1 / 60)
    assert world.held is cup
    # the jaw closed from 70 mm and the cup stopped it (closed, the jaws are 3 mm apart);
    # the boxes meet the round cup a little outside the tool point's depth, hence the slack
    width = SO101_JAW.opening(world.q[5])
    assert 2 * cup.radius - 0.008 < width < 2 * cup.radius + 0.025, width
    # shoulder_lift negative tips the upper arm back and up: the tool point rises
    world.command({"shoulder_lift": float(world.q[1]) - 0.35})
    for _ in range(180):
        world.step(1 / 60)
    assert world.held is cup
    assert cup.z > 0.02, cup.z  # its bottom lifted 2 cm clear of the table (z 0)
