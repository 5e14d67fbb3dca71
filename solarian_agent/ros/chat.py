"""``chat`` (``ros2 run solarian_agent chat``): the terminal chat against the running graph.

The same chat as ``solarian-agent chat --ros`` (:mod:`solarian_agent.ui.chat`: /help lists
the commands; an unknown ``/command`` is an error, never a message to the agent) on a node of
its own, named ``chat``; ROS arguments (``--ros-args -r __ns:=/robot1``) apply to it.
``--send "task" --wait 300`` sends one message and exits when the run ends (0: it succeeded).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rclpy.utilities import remove_ros_args

from .ui_link import RosLink, open_node


def main(args: Sequence[str] | None = None) -> int:
    from ..ui.chat_cli import main_chat

    argv = list(sys.argv if args is None else args)
    user_args = remove_ros_args(argv)[1:]
    node = open_node("chat", args=argv)
    link = RosLink(node, ())
    try:
        return main_chat(["--ros", *user_args], link=link)
    finally:
        link.close()


if __name__ == "__main__":
    sys.exit(main())
