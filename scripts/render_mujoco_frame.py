"""Write the README's picture of the MuJoCo backend: the overhead and wrist cameras side by
side while the arm lifts the red cup (``python scripts/render_mujoco_frame.py [out.png]``)."""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import numpy as np

from solarian_agent.arm.kinematics import ArmModel
from solarian_agent.sim.mujoco.render import MujocoRenderer
from solarian_agent.sim.mujoco.world import MujocoWorld
from solarian_agent.sim.world import APPROACH_PITCHES


def move(world: MujocoWorld, xyz: tuple[float, float, float], aperture: float) -> None:
    q, _ = world.arm.ik_search(xyz, APPROACH_PITCHES, world.q[:5])
    world.command(np.concatenate([q, [aperture]]))
    for _ in range(300):
        world.step(0.02)
        if world.settled():
            return


def main(out: str = "docs/mujoco_frame.png") -> int:
    arm = ArmModel.default()
    world = MujocoWorld(arm, seed=7)
    cup = world.objects["red_cup"]
    x, y = cup.x, cup.y
    move(world, (x, y, 0.09), 0.055)
    move(world, (x, y, 0.015), 0.055)
    world.command({"gripper": 0.0})
    for _ in range(60):
        world.step(0.02)
    move(world, (x, y, 0.10), 0.0)
    renderer = MujocoRenderer(arm)
    overhead = renderer.render("overhead", world)
    wrist = renderer.render("wrist", world)
    pad = np.full((overhead.shape[0] - wrist.shape[0], wrist.shape[1], 3), 255, np.uint8)
    gap = np.full((overhead.shape[0], 8, 3), 255, np.uint8)
    frame = np.hstack([overhead, gap, np.vstack([wrist, pad])])
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(out, frame)
    renderer.close()
    print(f"wrote {out}: held {world.truth()['held']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:]))
