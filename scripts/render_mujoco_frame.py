"""Write the README's picture of the MuJoCo backend: the overhead and wrist cameras side by
side while the arm lifts the red cup (``python scripts/render_mujoco_frame.py [out.png]``)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import cv2
import numpy as np

from solarian_agent.arm.grasp import grasp_joints
from solarian_agent.arm.jaw import SO101_JAW
from solarian_agent.arm.kinematics import ArmModel
from solarian_agent.sim.mujoco.render import MujocoRenderer
from solarian_agent.sim.mujoco.world import MujocoWorld

DOWN = math.pi / 2  # approach straight down


def main(out: str = "docs/mujoco_frame.png") -> int:
    arm = ArmModel.default()
    world = MujocoWorld(arm, seed=7)
    cup = world.objects["red_cup"]
    # the product's own grasp: the fixed jaw's face 4 mm off the cup, the jaws straddling it
    q5, _ = grasp_joints(arm, (cup.x, cup.y, cup.height / 2), 2 * cup.radius, (DOWN,),
                         np.zeros(5))
    q = np.array([*q5, SO101_JAW.angle_for(2 * cup.radius + 0.03)])
    world._set_joints(q)
    world.setpoint[:] = q
    world.target[:] = q
    world.command({"gripper": -0.17})  # the jaw closes until the cup stops it
    for _ in range(60):
        world.step(1 / 60)
    world.command({"shoulder_lift": float(world.q[1]) - 0.35})  # lift
    for _ in range(180):
        world.step(1 / 60)
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
