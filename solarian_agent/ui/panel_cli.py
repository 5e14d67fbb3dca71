"""``solarian-agent panel``: the operator panel over the embedded simulated robot, or with
``--ros`` attached to a running ROS 2 graph (``solarian-agent launch sim``, ``ros2 launch
solarian_agent robot.launch.py``) through the link the ROS front end hands it
(``solarian_agent.ros.front_ends``: this package never imports the ROS one).

It listens on 127.0.0.1 unless ``--host`` says otherwise; beyond loopback every request needs
an access token (``--token``, ``$SOLARIAN_PANEL_TOKEN``, or one generated and printed at start).
Ctrl-C stops it (exit status 130).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..cli_common import CliParser, MissingExtraError, fail, require
from ..core.errors import ConfigError, CoreError
from .link import GraphLink, GraphTarget, OpenGraphLink

PANEL_TOKEN_ENV = "SOLARIAN_PANEL_TOKEN"
PROG = "solarian-agent panel"


def parse_panel(argv: Sequence[str]) -> tuple[argparse.Namespace, str | None]:
    """The panel's arguments and its access token (generated when it listens beyond
    loopback and none is given).  A bad value is a one-line usage error (exit 2)."""
    from ..sim.backend import DEFAULT_BACKEND, SIM_BACKENDS
    from .panel_door import DoorPolicy, is_loopback, new_secret

    p = CliParser(prog=PROG, description=__doc__)
    p.add_argument("--host", default="127.0.0.1",
                   help="address or name to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="TCP port (0: any free one; "
                                                          "default 8765)")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="another Host name the panel answers to (repeatable)")
    p.add_argument("--token", default=None,
                   help=f"the access token (at least 16 characters; else ${PANEL_TOKEN_ENV})")
    p.add_argument("--config", type=Path, default=None,
                   help="controller YAML (its agent: block over the shipped defaults; with "
                        "--ros: where the camera names come from)")
    g = p.add_argument_group("the embedded robot (without --ros)")
    g.add_argument("--planner", default=None,
                   help="planner provider: rules (default), anthropic, openai")
    g.add_argument("--monitor", default=None,
                   help="monitor provider: cv (default), none, openai_responses, ...")
    g.add_argument("--seed", type=int, default=7, help="the simulated table's layout seed")
    g.add_argument("--sim", choices=SIM_BACKENDS, default=DEFAULT_BACKEND,
                   help="simulator: 2d (default) or mujoco (3D physics)")
    g.add_argument("--log-root", type=Path, default=Path("recordings") / "controller",
                   help="where episode logs go (default recordings/controller)")
    r = p.add_argument_group("a running ROS 2 graph")
    r.add_argument("--ros", action="store_true",
                   help="attach to the running graph instead of starting a robot")
    r.add_argument("--namespace", default="", help="the graph's ROS namespace")
    r.add_argument("--cameras", default=None,
                   help="camera names, comma separated (default: the config's agent.cameras)")
    a = p.parse_args(list(argv))
    if not 0 <= a.port < 65536:
        p.error(f"--port {a.port}: expected 0..65535")
    if a.ros:
        given = [f"--{n}" for n in ("planner", "monitor") if getattr(a, n) is not None]
        if given:
            p.error(f"{', '.join(given)}: only for the embedded robot; the graph's nodes have "
                    "their own (planner_provider:= of the launch)")
    elif a.namespace or a.cameras is not None:
        p.error("--namespace and --cameras need --ros")
    token = a.token if a.token is not None else os.environ.get(PANEL_TOKEN_ENV) or None
    if token is not None and (len(token) < 16 or not token.isprintable() or " " in token):
        p.error("--token: expected at least 16 printable characters without spaces")
    if token is None and not is_loopback(a.host):
        token = new_secret()
    try:
        DoorPolicy.for_bind(a.host, a.allow_host, token)
    except ValueError as e:
        p.error(str(e))
    return a, token


def public_url(handle: Any, host: str) -> str:
    """The address to print: a wildcard bind names this machine instead."""
    url = str(handle.entry_url)
    if host in ("0.0.0.0", "::"):
        import socket

        url = url.replace(f"//{'[::]' if host == '::' else host}:",
                          f"//{socket.gethostname()}:", 1)
    return url


def main_panel(argv: Sequence[str] = (), *, ros_link: OpenGraphLink | None = None) -> int:
    """``solarian-agent panel [--ros] ...``: ``--ros`` attaches with ``ros_link`` (the ROS
    front end's), else the embedded robot starts."""
    a, token = parse_panel(argv)
    try:
        require(("starlette", "uvicorn"), "the panel")
    except MissingExtraError as e:
        return fail(PROG, str(e))
    if a.ros:
        if ros_link is None:  # a caller without the ROS front end
            return fail(PROG, "panel --ros runs from the ROS front end: solarian-agent "
                              "panel --ros")
        return _panel_on_ros(a, token, ros_link)
    return _panel_embedded(a, token)


def _serve(a: argparse.Namespace, token: str | None, serve: Callable[[], Any],
           wait: Callable[[], None], close: Callable[[], None]) -> int:
    """Start the panel, print where, run ``wait`` until Ctrl-C (130), then stop in order."""
    try:
        handle = serve()
    except (OSError, RuntimeError, ValueError) as e:
        close()
        return fail(PROG, str(e), 1)
    print(f"operator panel on {public_url(handle, a.host)}  (Ctrl+C to stop)", flush=True)
    if token is not None:
        print("every request needs the access token above; the page keeps it in a cookie",
              flush=True)
    code = 0
    try:
        wait()
    except KeyboardInterrupt:
        code = 130
    finally:
        handle.stop()
        close()
    return code


def _panel_embedded(a: argparse.Namespace, token: str | None) -> int:
    from ..core.episode_log import session_name
    from ..core.model_api import ModelConfigError
    from ..system import build_sim_system, load_config, with_models
    from .panel import serve_panel

    try:
        cfg = with_models(load_config(a.config), monitor=a.monitor)
        system = build_sim_system(config=cfg, seed=a.seed, realtime=True,  # one episode a task
                                  log_root=a.log_root, session=session_name("panel"),
                                  sim_backend=a.sim, planner_name=a.planner)
    except (ConfigError, ModelConfigError) as e:
        return fail(PROG, str(e))
    except CoreError as e:
        return fail(PROG, f"the {a.sim} simulator cannot start: {e}", 1)

    def wait() -> None:
        while True:
            system.runtime.step()

    return _serve(a, token, lambda: serve_panel(
        system.bus, system.clock, a.host, a.port, access_token=token,
        allow_hosts=a.allow_host), wait, system.shutdown)


def _panel_on_ros(a: argparse.Namespace, token: str | None, ros_link: OpenGraphLink) -> int:
    from .panel import serve_panel

    cams = None if a.cameras is None else tuple(c.strip() for c in a.cameras.split(",")
                                                if c.strip())
    try:
        link = ros_link(GraphTarget("panel", a.namespace, cams, str(a.config or "")))
    except MissingExtraError as e:
        return fail(PROG, str(e))
    except ConfigError as e:
        return fail(PROG, str(e))
    except ImportError as e:  # rclpy there, the package's interfaces not built
        return fail(PROG, f"panel --ros needs rclpy and the package's ROS interfaces: {e}")
    forever = threading.Event()
    return _serve(a, token, lambda: serve_panel(
        None, link.clock, a.host, a.port, link=link, access_token=token,
        allow_hosts=a.allow_host), lambda: _wait_for(forever, link), link.close)


def _wait_for(stop: threading.Event, link: GraphLink) -> None:
    while not stop.wait(0.5):
        if link.failed:
            print(f"{PROG}: the ROS node stopped; exiting", file=sys.stderr)
            return


__all__ = ["PANEL_TOKEN_ENV", "main_panel", "parse_panel", "public_url"]
