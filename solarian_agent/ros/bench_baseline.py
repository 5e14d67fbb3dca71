"""The ROS benchmark's baseline: a bare rclpy talker and listener carrying what the sim world
publishes (both camera images at their size and rate, and joint states), written the way
ros2/examples writes a minimal publisher and subscriber (one node, ``rclpy.spin``, callbacks
that do nothing), so an agent node's CPU can be read beside what merely receiving the same
traffic costs.

    python -m solarian_agent.ros.bench_baseline talker [--rate-scale 1.0]
    python -m solarian_agent.ros.bench_baseline listener [--executor single|multi]
    python -m solarian_agent.ros.bench_baseline action_server

The action server serves ``skills/stop`` (succeeds at once) and ``skills/spin`` (runs until
cancelled, polling for the cancel every 20 ms, as the skills node's control tick does) with the
package's Skill action, on a MultiThreadedExecutor as ros2/examples' action server does.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Image, JointState

from ..sim.component import SimRates

# what the sim world publishes (sim/render.py: overhead 640x480, wrist 480x360, bgr8)
CAMERAS = {"overhead": (640, 480), "wrist": (480, 360)}
JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]


def _image(width: int, height: int, frame_id: str) -> Image:
    return Image(width=width, height=height, encoding="bgr8", step=width * 3,
                 data=bytes(width * height * 3), header=_header(frame_id))


def _header(frame_id: str) -> Any:
    from std_msgs.msg import Header

    return Header(frame_id=frame_id)


class Talker(Node):  # type: ignore[misc]
    def __init__(self, scale: float = 1.0) -> None:
        super().__init__("baseline_talker")
        rates = SimRates()
        self.images = {c: _image(w, h, f"{c}_camera_optical") for c, (w, h) in CAMERAS.items()}
        self.pubs = {c: self.create_publisher(Image, f"{c}/image_raw", qos_profile_sensor_data)
                     for c in CAMERAS}
        self.js_pub = self.create_publisher(JointState, "joint_states", 10)
        for c in CAMERAS:
            self.create_timer(1.0 / (rates.camera_hz(c) * scale),
                              lambda c=c: self._image(c))
        self.create_timer(1.0 / (rates.joint_states_hz * scale), self._joints)

    def _image(self, camera: str) -> None:
        msg = self.images[camera]
        msg.header.stamp = self.get_clock().now().to_msg()
        self.pubs[camera].publish(msg)

    def _joints(self) -> None:
        self.js_pub.publish(JointState(header=_header("base"), name=JOINTS,
                                       position=[0.0] * len(JOINTS)))


class Listener(Node):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__("baseline_listener")
        self.count = 0
        for c in CAMERAS:
            self.create_subscription(Image, f"{c}/image_raw", self._got, qos_profile_sensor_data)
        self.create_subscription(JointState, "joint_states", self._got, 10)

    def _got(self, _msg: Any) -> None:
        self.count += 1


class BareActionServer(Node):  # type: ignore[misc]
    def __init__(self) -> None:
        from rclpy.action import ActionServer, CancelResponse
        from rclpy.callback_groups import ReentrantCallbackGroup

        from .ros_types import interface_class

        super().__init__("baseline_action_server")
        self.skill = interface_class("solarian_agent/action/Skill")
        group = ReentrantCallbackGroup()
        for name, fn in (("stop", self._stop), ("spin", self._spin)):
            ActionServer(self, self.skill, f"skills/{name}", execute_callback=fn,
                         cancel_callback=lambda _g: CancelResponse.ACCEPT, callback_group=group)

    def _stop(self, goal: Any) -> Any:
        goal.succeed()
        return self.skill.Result(action_id=goal.request.action_id, outcome="succeeded")

    def _spin(self, goal: Any) -> Any:
        import time

        while not goal.is_cancel_requested:
            goal.publish_feedback(self.skill.Feedback(action_id=goal.request.action_id,
                                                      phase="spinning", progress=-1.0))
            time.sleep(0.02)
        goal.canceled()
        return self.skill.Result(action_id=goal.request.action_id, outcome="stopped")


def main(args: Sequence[str] | None = None) -> int:
    argv = list(sys.argv if args is None else args)
    p = argparse.ArgumentParser(prog="python -m solarian_agent.ros.bench_baseline")
    p.add_argument("role", choices=("talker", "listener", "action_server"))
    p.add_argument("--rate-scale", type=float, default=1.0)
    p.add_argument("--executor", choices=("single", "multi"), default="single")
    opts = p.parse_args(rclpy.utilities.remove_ros_args(argv)[1:])
    rclpy.init(args=argv)
    node = (Talker(opts.rate_scale) if opts.role == "talker" else
            BareActionServer() if opts.role == "action_server" else Listener())
    try:
        if opts.executor == "multi" or opts.role == "action_server":
            ex = MultiThreadedExecutor(num_threads=8)
            ex.add_node(node)
            ex.spin()
        else:
            rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
