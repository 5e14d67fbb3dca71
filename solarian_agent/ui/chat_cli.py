"""``solarian-agent chat``: its command line.  Without ``--ros`` the chat starts the embedded
simulated robot; with ``--ros`` it attaches to a running ROS 2 graph (its own node, ``chat``)
through the link the ROS front end hands it (``solarian_agent.ros.front_ends``: this package
never imports the ROS one).  Ctrl-D or /quit leaves (0), Ctrl-C too (130)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from ..cli_common import CliParser, MissingExtraError, fail
from ..core.errors import ConfigError, CoreError
from ..core.model_api import ModelConfigError
from .chat import EmbeddedFactory, run_chat, send_and_wait, sim_embedded
from .link import AgentLink, BusLink, GraphTarget, OpenGraphLink

PROG = "solarian-agent chat"


def _parser() -> CliParser:
    p = CliParser(prog=PROG, description="Chat with the agent from the terminal: type a task; "
                                         "/help lists the commands.")
    p.add_argument("--ros", action="store_true",
                   help="talk to a running ROS 2 graph instead of the embedded robot")
    p.add_argument("--namespace", default="", help="with --ros: the graph's ROS namespace")
    p.add_argument("--quiet", action="store_true", help="show only the conversation")
    p.add_argument("--no-color", action="store_true", help="plain text output")
    p.add_argument("--send", metavar="TEXT", default=None,
                   help="send this one message, print what happens and exit when the run "
                        "ends (0: it succeeded)")
    p.add_argument("--wait", type=float, default=600.0, metavar="S",
                   help="with --send: seconds to wait for the run to end (default 600)")
    g = p.add_argument_group("the embedded robot (without --ros)")
    g.add_argument("--config", type=Path, default=None,
                   help="controller YAML (its agent: block over the shipped defaults)")
    g.add_argument("--planner", default=None,
                   help="planner provider: rules (default), anthropic, openai")
    g.add_argument("--seed", type=int, default=7, help="the simulated table's seed")
    g.add_argument("--log-root", type=Path, default=Path("recordings") / "controller",
                   help="where episode logs go (default recordings/controller)")
    g.add_argument("--no-log", action="store_true", help="keep no episode log")
    return p


def main_chat(argv: Sequence[str] | None = None, *, link: AgentLink | None = None,
              embedded: EmbeddedFactory | None = None, ros_link: OpenGraphLink | None = None,
              input_fn: Callable[[str], str] = input, out: TextIO | None = None) -> int:
    """``solarian-agent chat [--ros] [--send TEXT] ...``: ``link`` given, the chat talks to
    it; else ``--ros`` opens one with ``ros_link`` and the embedded robot starts without."""
    p = _parser()
    a = p.parse_args(list(argv) if argv is not None else None)
    if a.wait <= 0:
        p.error(f"--wait {a.wait:g}: expected seconds > 0")
    if a.ros and (a.planner or a.config):
        p.error("--planner and --config are for the embedded robot; the graph's nodes have "
                "their own")
    if not a.ros and a.namespace:
        p.error("--namespace needs --ros")
    stop: Callable[[], None] | None = None
    own_link = link is None
    if link is None:
        if a.ros:
            if ros_link is None:  # a caller without the ROS front end
                return fail(PROG, "chat --ros runs from the ROS front end: solarian-agent "
                                  "chat --ros, or ros2 run solarian_agent chat")
            try:
                link = ros_link(GraphTarget("chat", a.namespace))
            except MissingExtraError as e:
                return fail(PROG, str(e))
            except ImportError as e:  # no rclpy, or the interfaces are not built
                return fail(PROG, f"chat --ros needs rclpy and the package's ROS interfaces: "
                                  f"{e}")
        else:
            try:
                if embedded is not None:
                    bus, stop = embedded()
                else:
                    bus, stop = sim_embedded(a.seed, None if a.no_log else a.log_root,
                                             a.config, a.planner)
            except (ConfigError, CoreError, ModelConfigError) as e:
                return fail(PROG, f"could not start the embedded robot: {e}")
            link = BusLink(bus, [])
    try:
        if a.send is not None:
            return send_and_wait(link, a.send, a.wait, out if out is not None else sys.stdout)
        return run_chat(link, input_fn=input_fn, out=out, show_events=not a.quiet,
                        color=False if a.no_color else None)
    finally:
        if own_link:
            link.close()
        if stop is not None:
            stop()


__all__ = ["main_chat"]
