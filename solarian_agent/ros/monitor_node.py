"""``monitor_node``: the monitor engine.  Samples the camera topics and joint states at its
period, judges the running actions (learnt from ``skills/events``) with the vision model and
publishes ``monitor/verdicts``; the decision to finish / fail stays with the planner's harness.
The tool catalogue (the monitor questions) is fetched from ``skills/catalogue`` at start-up.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rclpy.node import Node

from ..core.errors import ConfigError
from . import common, components
from .bridge import Bridge


def main(args: Sequence[str] | None = None) -> int:
    stop = common.init(args)
    node = Node("monitor")
    try:
        cfg = common.agent_config(node)
        log_root = str(common.declare(node, "log_root", "", "episode log directory"))
        timeout = float(common.declare(node, "service_timeout_s", 5.0))
        startup = float(common.declare(node, "startup_timeout_s", 60.0))
        core = components.build_monitor_core(common.RosClock(node), cfg, log_root=log_root)
    except ConfigError as e:
        return common.config_error_exit(node, e)
    bridge = Bridge(node, core.bus, service_timeout_s=timeout)
    bridge.add(core.spec.endpoints)
    return common.run(node, core, bridge, stop=stop, startup_timeout_s=startup)


if __name__ == "__main__":
    sys.exit(main())
