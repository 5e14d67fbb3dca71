"""Helpers shared by the simulator tests: drive the world's arm to a tip position."""

from __future__ import annotations

import numpy as np

from solarian_agent.sim.world import APPROACH_PITCHES, World

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
