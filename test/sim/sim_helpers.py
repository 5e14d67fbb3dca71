"""Helpers shared by the simulator tests: drive the world's arm to a tip position."""

from __future__ import annotations

import numpy as np

from solarian_agent.sim.layout import APPROACH_PITCHES
from solarian_agent.sim.world import World

DT = 0.02


def settle(world: World, max_steps: int = 2000) -> None:
    for _ in range(max_steps):
        if world.settled():
            return
        world.step(DT)
    raise AssertionError("world did not settle")


def move_tip(world: World, x: float, y: float, z: float, aperture: float | None = None,
             max_steps: int = 2000) -> None:
    q, _ = world.arm.ik_search((x, y, z), APPROACH_PITCHES, world.q[:5])
    ap = world.q[5] if aperture is None else aperture
    world.command(np.concatenate([q, [ap]]))
    settle(world, max_steps)


def set_gripper(world: World, aperture: float) -> None:
    world.command({"gripper": aperture})
    settle(world)


JAW_OPEN = 0.8  # rad: the jaws ~75 mm apart, wider than any object
JAW_CLOSE = -0.1745  # rad: the joint's closed limit


def jaws_around(world: World, name: str, z: float = 0.015, jaw: float = JAW_OPEN) -> None:
    """Put the jaws open around object ``name`` (fixed jaw at its near side), tool point at z."""
    from solarian_agent.arm.grasp import grasp_joints

    obj = world.objects[name]
    q, _ = grasp_joints(world.arm, (obj.x, obj.y, z), obj.width, APPROACH_PITCHES, world.q[:5])
    world.command(np.concatenate([q, [jaw]]))
    settle(world)
