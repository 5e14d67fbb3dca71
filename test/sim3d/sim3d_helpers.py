"""Helpers of the MuJoCo backend's tests: drive the world's arm like the pick skill does."""

from __future__ import annotations

import numpy as np

from solarian_agent.arm.grasp import descent, grasp_joints, open_angle
from solarian_agent.arm.jaw import SO101_JAW
from solarian_agent.sim.layout import APPROACH_PITCHES
from solarian_agent.sim.mujoco.world import MujocoWorld

DT = 0.02
HOVER_Z = 0.09  # tool point height above an object before the descent (m)
GRASP_Z = 0.015  # tool point height when closing (the jaw tips 6 mm lower)


def settle(world: MujocoWorld, max_s: float = 8.0) -> None:
    for _ in range(int(max_s / DT)):
        world.step(DT)
        if world.settled():
            return
    raise AssertionError(f"the arm did not settle: target {world.target}, q {world.q}")


def move_joints(world: MujocoWorld, q5: np.ndarray, jaw: float | None = None) -> None:
    world.command(np.concatenate([q5, [world.target[5] if jaw is None else jaw]]))
    settle(world)


def move_tip(world: MujocoWorld, x: float, y: float, z: float,
             jaw: float | None = None) -> None:
    q, _ = world.arm.ik_search((x, y, z), APPROACH_PITCHES, world.q[:5])
    move_joints(world, q, jaw)


def jaws_down_around(world: MujocoWorld, name: str, z: float = GRASP_Z) -> None:
    """Open the jaws over ``name`` (fixed jaw at its near side, the wrist rolled across it)
    and lower them straight down around it to tool point height ``z``."""
    o = world.objects[name]
    jaw = open_angle(o.width)
    above, _ = grasp_joints(world.arm, (o.x, o.y, HOVER_Z), o.width, APPROACH_PITCHES,
                            world.q[:5])
    move_joints(world, above, jaw)
    for q in descent(world.arm, (o.x, o.y, z), o.width, HOVER_Z, APPROACH_PITCHES,
                     world.q[:5]):
        move_joints(world, q)


def close_gripper(world: MujocoWorld, seconds: float = 1.5) -> None:
    world.command({"gripper": SO101_JAW.lower})
    for _ in range(int(seconds / DT)):
        world.step(DT)


def pick(world: MujocoWorld, name: str, lift_z: float = 0.12) -> None:
    """Open above ``name``, descend, close, lift (the pick skill's motion, from the truth)."""
    jaws_down_around(world, name)
    close_gripper(world)
    move_tip(world, float(world.tip_xyz[0]), float(world.tip_xyz[1]), lift_z)
