"""``planner_node``: the planner harness with its model.

Serves ``agent/message``, ``agent/cancel``, ``agent/reset`` and ``agent/observe_scene``;
publishes ``agent/state`` (transient local: a late viewer gets the latest), ``agent/events``,
``agent/view`` and ``agent/markers`` (the plan's targets for rviz); listens to images, joint
states, skill events, monitor verdicts, operator events and the executor's generation; sends
skill goals (carrying the generation) to ``skills/<tool>``.  The tools' action clients are made
at start-up from ``skills/catalogue`` (or the ``tools`` parameter).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence

from rclpy.node import Node

from ..core import names
from ..core.errors import ConfigError, TransportError
from ..core.model_api import ModelConfigError
from ..rosmsg import graph
from . import common, components
from .bridge import Bridge


def main(args: Sequence[str] | None = None) -> int:
    stop = common.init(args)
    node = Node("planner")
    log = node.get_logger()
    try:
        cfg = common.agent_config(node)
        provider = str(common.declare(node, "planner_provider", "",
                                      "override agent.planner.provider ('' = config)"))
        tools = common.csv(common.declare(node, "tools", "",
                                          "skill tools ('' = ask skills/catalogue)"))
        log_root = str(common.declare(node, "log_root", "", "episode log directory"))
        timeout = float(common.declare(node, "service_timeout_s", 5.0))
        wait_s = float(common.declare(node, "catalogue_timeout_s", 60.0))
        models, cal_dir = common.camera_model_params(node)
        core = components.build_planner_core(common.RosClock(node), cfg, log_root=log_root,
                                             planner_name=provider or None,
                                             camera_models=models, calibration_dir=cal_dir)
    except (ConfigError, ModelConfigError) as e:
        return common.config_error_exit(node, e)
    bridge = Bridge(node, core.bus, service_timeout_s=timeout)
    bridge.add(core.spec.endpoints)

    def add_skill_clients(stop: threading.Event) -> None:
        # on the main thread while the executor spins: every wait is bounded and ends on stop
        names_ = list(tools)
        end = time.monotonic() + wait_s
        while not names_ and not stop.is_set():
            try:
                names_ = [d["name"] for d in core.bus.call(names.TOOL_CATALOGUE, {},
                                                          timeout_s=timeout)]
            except TransportError as e:
                if time.monotonic() > end:
                    raise
                log.info(f"waiting for skills/catalogue: {e}")
                stop.wait(1.0)
                continue
            if not names_:
                if time.monotonic() > end:
                    break
                stop.wait(1.0)
        if stop.is_set():
            return
        spec = graph.planner_node(list(cfg.cameras), names_)
        bridge.add(spec.of("action_client"))
        log.info(f"skill tools: {', '.join(names_) or '(none)'}")
        # "planner running" only once the skills' action servers are matched: a task sent at
        # once is then never refused for a server not discovered yet.  One deadline for the
        # catalogue and the servers: the skills get wait_s in all, not twice
        missing = bridge.wait_for_action_servers(max(0.0, end - time.monotonic()), stop)
        if missing:
            log.warning(f"no action server matched yet for {', '.join(missing)}; their goals "
                        "are refused until it is")

    return common.run(node, core, bridge, stop=stop, on_start=add_skill_clients,
                      startup_timeout_s=wait_s)


if __name__ == "__main__":
    sys.exit(main())
