"""``skills_node``: the skill executor as ROS 2 action servers (``skills/<tool>``).

One goal at a time per arm (the executor's resource claims), the generation checked on every
goal (a stale one ends with outcome ``refused`` and the reason), cancels accepted and honoured
at the next control tick, goals aborted with a result on shutdown.  Also serves
``skills/catalogue``, ``skills/advance_generation``, ``skills/conclude`` and ``trackers/seed``,
and publishes ``skills/events``, ``skills/generation`` and ``joint_commands``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rclpy.node import Node

from ..core.errors import ConfigError
from . import common, components, liveness
from .bridge import Bridge


def main(args: Sequence[str] | None = None) -> int:
    stop = common.init(args)
    node = Node("skills")
    try:
        cfg = common.agent_config(node)
        tools = str(common.declare(node, "tool_set", "tidy", "tidy | toy"))
        sim = str(common.declare(node, "sim", "2d", "the simulated scene pointed at: 2d | "
                                                     "mujoco (2d also on the robot)"))
        pick = str(common.declare(node, "pick", "scripted", "pick_object: scripted | policy "
                                                            "(the learned pick policy)"))
        timeout = float(common.declare(node, "service_timeout_s", 5.0))
        planner_timeout = float(common.declare(
            node, "planner_timeout_s", liveness.DEFAULT_PLANNER_TIMEOUT_S,
            "stop the running skills when agent/heartbeat is missing this long (0 = never)"))
        models, cal_dir = common.camera_model_params(node)
        core = components.build_skills_core(common.RosClock(node), cfg, tools=tools,
                                            planner_timeout_s=planner_timeout,
                                            camera_models=models, calibration_dir=cal_dir,
                                            sim=sim, pick=pick)
    except ConfigError as e:
        return common.config_error_exit(node, e)
    bridge = Bridge(node, core.bus, service_timeout_s=timeout)
    bridge.add(core.spec.endpoints)
    return common.run(node, core, bridge, stop=stop)


if __name__ == "__main__":
    sys.exit(main())
