"""Helpers of the MuJoCo backend's tests: drive the world's arm like the pick skill does."""

from __future__ import annotations

import numpy as np

from solarian_agent.sim.mujoco.world import MujocoWorld
from solarian_agent.sim.world import APPROACH_PITCHES

DT = 0.02


def settle(world: MujocoWorld, max_s: float = 8.0) -> None:
    for _ in range(int(max_s / DT)):
        world.step(DT)
        if world.settled():
            return
    raise AssertionError(f"the arm did not settle: target {world.target}, q {world.q}")


def move_tip(world: MujocoWorld, x: float, y: float, z: float,
             aperture: float | None = None) -> None:
    q, _ = world.arm.ik_search((x, y, z), APPROACH_PITCHES, world.q[:5])
    ap = world.target[5] if aperture is None else aperture
    world.command(np.concatenate([q, [ap]]))
    settle(world)


def close_gripper(world: MujocoWorld, seconds: float = 1.5) -> None:
    world.command({"gripper": 0.0})
    for _ in range(int(seconds / DT)):
        world.step(DT)


def pick(world: MujocoWorld, name: str, lift_z: float = 0.12) -> None:
    """Open above ``name``, descend, close, lift (the pick skill's motion, from the truth)."""
    o = world.objects[name]
    x, y = o.x, o.y
    move_tip(world, x, y, 0.09, 0.055)
    move_tip(world, x, y, 0.015)
    close_gripper(world)
    move_tip(world, x, y, lift_z)
