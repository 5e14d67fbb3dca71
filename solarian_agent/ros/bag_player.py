"""``bag_player``: plays a recorded bag into the graph (replay.launch.py), without rosbag2.

Reads with ``rosbags``, publishes the bag's camera images (compressed ones decoded onto
``<camera>/image_raw``), ``joint_states`` and ``skills/events`` at their recorded times, and
``/clock`` for the nodes on ``use_sim_time``; exits 0 when the bag has been played.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence

from rclpy.node import Node

from ..core.errors import ConfigError
from . import common
from .bag_play import build_bag_player_core
from .bridge import Bridge


def main(args: Sequence[str] | None = None) -> int:
    stop = common.init(args)
    node = Node("bag_player")
    try:
        bag = str(common.declare(node, "bag", "", "the bag directory"))
        core = build_bag_player_core(
            common.RosClock(node), bag, namespace=node.get_namespace(),
            topics=common.csv(common.declare(node, "topics", "", "topics to play ('' = all "
                                                                 "the replay plays)")),
            rate=float(common.declare(node, "rate", 1.0, "playback rate")),
            delay_s=float(common.declare(node, "delay", 0.0, "seconds before playback")),
            publish_clock=bool(common.declare(node, "clock", True, "publish /clock")))
    except ConfigError as e:
        return common.config_error_exit(node, e)
    player = core.parts["player"]
    bridge = Bridge(node, core.bus)
    bridge.add(core.spec.endpoints)

    def stop_when_played() -> None:
        while not player.done.wait(0.5):
            if stop.is_set():
                return
        for err in player.errors:
            node.get_logger().warning(f"playback: {err}")
        node.get_logger().info(f"played {bag}: {dict(sorted(player.played.items()))}")
        stop.set()

    threading.Thread(target=stop_when_played, name="played", daemon=True).start()
    return common.run(node, core, bridge, stop=stop)


if __name__ == "__main__":
    sys.exit(main())
