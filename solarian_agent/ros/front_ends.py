"""``solarian-agent chat`` and ``solarian-agent panel``: the front ends of :mod:`solarian_agent.ui`
with what their ``--ros`` variant needs, a link to the running graph.

The ROS-free front ends never import this package (imports run one way: ros -> ui); the
command line starts them from here, handing them :func:`open_graph_link`.  This module imports
without rclpy (the embedded chat and panel run on machines without ROS): rclpy is imported
only when a link is opened, after the ROS extra is checked, so a missing one is the usual
one-line error naming what installs it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..cli_common import require
from ..ui.chat_cli import main_chat as ui_main_chat
from ..ui.link import GraphLink, GraphTarget
from ..ui.panel_cli import main_panel as ui_main_panel


def open_graph_link(target: GraphTarget) -> GraphLink:
    """A :class:`~.ui_link.RosLink` on a node of its own, as ``target`` says."""
    require(("rclpy",), f"{target.node} --ros")
    from .ui_link import make_ros_link

    cameras = None if target.cameras is None else list(target.cameras)
    return make_ros_link(cameras, name=target.node, namespace=target.namespace,
                         config_file=target.config_file)


def main_chat(argv: Sequence[str] | None = None) -> int:
    return ui_main_chat(argv, ros_link=open_graph_link)


def main_panel(argv: Sequence[str] = ()) -> int:
    return ui_main_panel(argv, ros_link=open_graph_link)


__all__ = ["main_chat", "main_panel", "open_graph_link"]
