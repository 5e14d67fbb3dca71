"""``panel``: the operator panel as a node of the graph (``panel:=true`` of the launch files).

The page of ``solarian-agent panel`` served from inside the graph: a :class:`.ui_link.RosLink`
on this node, the panel's HTTP server on its own thread.  Parameters: ``host`` (default
127.0.0.1; beyond loopback every request needs the access token: ``$SOLARIAN_PANEL_TOKEN``, else
one is generated and logged with the address), ``port``, ``allow_hosts`` (comma separated),
``config_file`` / ``cameras`` (the camera views: the config's ``agent.cameras`` unless given),
``service_timeout_s``, ``profile`` (the robot profile whose readiness the page shows).
SIGINT / SIGTERM stop it (exit 0); a port it cannot listen on, or a bad parameter, exits 2
with the reason.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from rclpy.node import Node

from ..core.errors import ConfigError
from . import common
from .ui_link import RosLink


def _robot_summary(path: str, log: Any) -> dict[str, Any] | None:
    """The profile's summary for the page; a profile that cannot be read is shown as such
    (the panel still serves: it is how the operator stops the arm)."""
    if not path:
        return None
    from ..bringup.profile import RobotProfile

    try:
        return RobotProfile.load(path).summary()
    except (ConfigError, OSError) as e:
        log.warning(f"the robot profile cannot be read: {e}")
        return {"name": "robot", "ready": False, "missing_steps": ["a readable profile"]}


def main(args: Sequence[str] | None = None) -> int:
    from ..ui.panel import serve_panel
    from ..ui.panel_cli import PANEL_TOKEN_ENV, public_url
    from ..ui.panel_door import DoorPolicy, is_loopback, new_secret

    stop = common.init(args)
    node = Node("panel")
    log = node.get_logger()
    try:
        cfg = common.agent_config(node)
        host = str(common.declare(node, "host", "127.0.0.1", "address to listen on"))
        port = int(common.declare(node, "port", 8765, "TCP port (0: any free one)"))
        allow = common.csv(common.declare(node, "allow_hosts", "",
                                          "more Host names to answer to, comma separated"))
        timeout = float(common.declare(node, "service_timeout_s", 3.0))
        robot = _robot_summary(str(common.declare(
            node, "profile", "", "the robot profile whose readiness the page shows ('' = "
            "none: a simulator)")), log)
        token = os.environ.get(PANEL_TOKEN_ENV) or None
        if token is None and not is_loopback(host):
            token = new_secret()
        try:
            DoorPolicy.for_bind(host, allow, token)
        except ValueError as e:
            raise ConfigError("parameter host", str(e)) from None
        if not 0 <= port < 65536:
            raise ConfigError("parameter port", f"{port} is not a TCP port (0..65535)")
    except ConfigError as e:
        return common.config_error_exit(node, e)
    link = RosLink(node, list(cfg.cameras), service_timeout_s=timeout)
    try:
        handle = serve_panel(None, link.clock, host, port, link=link, access_token=token,
                             allow_hosts=allow, command_timeout_s=timeout, robot=robot)
    except (OSError, RuntimeError, ValueError) as e:
        log.error(f"the panel cannot start: {e}")
        link.close()
        return 2
    log.info(f"operator panel on {public_url(handle, host)}")
    log.info("panel running")
    try:
        while not stop.wait(0.5):
            if link.failed:
                log.error("the executor stopped; exiting")
                break
    finally:
        handle.stop()
        link.close()
    return 1 if link.failed else 0


if __name__ == "__main__":
    sys.exit(main())

