"""Another ROS node driving the arm through the command gate, as a MoveIt plan or a teleop
node would: a trajectory_msgs/JointTrajectory on ``arm_controller/joint_trajectory`` (joint
names as in urdf/so101.urdf, ``time_from_start`` honoured), then the gate's answer from the
latched ``arm/gate`` topic.  Plain rclpy, nothing of solarian_agent is imported.

    python scripts/drive_arm_external.py [--ns NAMESPACE] [--pan 0.3] [--seconds 2]

Exit status 0 when the gate let the trajectory through (holder ``external``), 1 when it refused
it (the reason is printed), 2 when no arm answered.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import rclpy
from builtin_interfaces.msg import Duration
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ns", default="", help="the arm's namespace ('' = none)")
    ap.add_argument("--pan", type=float, default=0.3, help="shoulder_pan target (rad)")
    ap.add_argument("--seconds", type=float, default=2.0, help="time_from_start of the point")
    ap.add_argument("--timeout", type=float, default=20.0)
    args = ap.parse_args(argv)
    prefix = f"/{args.ns.strip('/')}/" if args.ns.strip("/") else "/"
    rclpy.init()
    node = rclpy.create_node("external_driver")
    try:
        pub = node.create_publisher(JointTrajectory, prefix + "arm_controller/joint_trajectory",
                                    10)
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        gate: list[dict] = []
        node.create_subscription(String, prefix + "arm/gate",
                                 lambda m: gate.append(json.loads(m.data)), latched)
        end = time.monotonic() + args.timeout
        while pub.get_subscription_count() == 0 or not gate:
            if time.monotonic() > end:
                print("no arm answers on", prefix + "arm_controller/joint_trajectory")
                return 2
            rclpy.spin_once(node, timeout_sec=0.1)
        refused_before = gate[-1]["refused_total"]
        sec = int(args.seconds)
        pub.publish(JointTrajectory(
            joint_names=["shoulder_pan"],
            points=[JointTrajectoryPoint(positions=[args.pan], time_from_start=Duration(
                sec=sec, nanosec=int((args.seconds - sec) * 1e9)))]))
        while time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.1)
            g = gate[-1]
            if g["holder"] == "external":
                print(f"the arm is held by external: moving shoulder_pan to {args.pan} rad")
                return 0
            if g["refused_total"] > refused_before:
                print("refused:", g["last_refusals"][-1]["reason"])
                return 1
        print("no answer from the gate")
        return 2
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    sys.exit(main())
