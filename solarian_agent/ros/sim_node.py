"""``sim_node``: the tabletop simulator in place of the camera and arm drivers.  Publishes the
same topics (``<cam>/image_raw``, ``<cam>/camera_info``, ``joint_states``), takes
``joint_commands``, and adds ``sim/ground_truth``, ``sim/reset`` and ``sim/inject_fault``.
The world advances by the control period on the node's clock; ``sim`` picks the backend
(``2d`` or ``mujoco``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rclpy.node import Node

from ..core.errors import CoreError
from . import common, components
from .bridge import Bridge


def main(args: Sequence[str] | None = None) -> int:
    stop = common.init(args)
    node = Node("sim_world")
    try:
        cfg = common.agent_config(node)
        sim = str(common.declare(node, "sim", "2d", "simulator backend: 2d | mujoco"))
        seed = int(common.declare(node, "seed", 0, "the first episode's layout seed"))
        grasp = float(common.declare(node, "grasp_fail_p", 0.0, "injected grasp failures"))
        slip = float(common.declare(node, "slip_p", 0.0, "injected slips"))
        core = components.build_sim_core(common.RosClock(node), cfg, seed=seed,
                                         grasp_fail_p=grasp, slip_p=slip, sim=sim)
    except (CoreError, ValueError) as e:  # a bad parameter, or no OpenGL for mujoco
        return common.config_error_exit(node, e)
    bridge = Bridge(node, core.bus)
    bridge.add(core.spec.endpoints)
    return common.run(node, core, bridge, stop=stop)


if __name__ == "__main__":
    sys.exit(main())
