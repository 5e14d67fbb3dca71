"""The MuJoCo arm, too, stops within 200 ms when its commands go quiet (the same command path
as the 2D world: the sim component's command timeout and smooth stop)."""

from __future__ import annotations

import numpy as np

from solarian_agent.sim.mujoco.render import MujocoRenderer
from solarian_agent.sim.mujoco.world import MujocoWorld
from solarian_agent.sim.rig import SimRig, quiet_after_motion


def test_the_mujoco_arm_stops_within_200_ms_of_its_commands_going_quiet(
        world: MujocoWorld, renderer: MujocoRenderer) -> None:
    world.reset(3)
    rig = SimRig(world, renderer)
    still_at, q_rest, _ = quiet_after_motion(rig)
    assert still_at <= 0.2
    assert rig.world.q[0] < 1.0  # far short of the dead commander's target (1.5)
    rig.run(0.5)
    assert np.allclose(rig.world.q[:5], q_rest[:5], atol=0.01)  # it holds there
