"""Another ROS node driving the arm through the command gate, as a MoveIt plan or a teleop
node would: a trajectory_msgs/JointTrajectory on ``arm_controller/joint_trajectory`` (joint
names as in urdf/so101.urdf, ``time_from_start`` honoured), then the gate's answer from the
latched ``arm/gate`` topic.  Plain rclpy, nothing of solarian_agent is imported.

    python scripts/drive_arm_external.py [--ns NAMESPACE] [--pan 0.3] [--seconds 2]
    python scripts/drive_arm_external.py --operator-gripper 0.5   # the operator takes it back
    python scripts/drive_arm_external.py --estop "light curtain broken"   # e-stop, with reason

Exit status 0 when the gate let the command through (holder ``external``, or ``operator``
with ``--operator-gripper``), 1 when it refused it (the reason is printed), 2 when no arm
answered.  ``--operator-gripper`` sends what an operator's tool sends (the package's
JointCommand with ``source: operator``), so it needs the package's interfaces; the trajectory
needs only trajectory_msgs.
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
    ap.add_argument("--operator-gripper", type=float, default=None, metavar="RAD",
                    help="instead: an operator command (the gripper to RAD): it takes the arm")
    ap.add_argument("--estop", default=None, metavar="REASON",
                    help="instead: latch the arm's e-stop with REASON (estop/request)")
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
        if args.estop is not None:
            stop = node.create_publisher(String, prefix + "estop/request", 10)
            while stop.get_subscription_count() == 0 and time.monotonic() < end:
                rclpy.spin_once(node, timeout_sec=0.1)
            stop.publish(String(data=args.estop))
            rclpy.spin_once(node, timeout_sec=0.5)  # let it go out before the node ends
            print(f"e-stop requested: {args.estop}")
            return 0
        want = "external"
        if args.operator_gripper is not None:
            want = "operator"
            from solarian_agent.ros.ros_types import interface_class

            cmd_t = interface_class("solarian_agent/msg/JointCommand")
            op = node.create_publisher(cmd_t, prefix + "joint_commands", 10)
            while op.get_subscription_count() == 0 and time.monotonic() < end:
                rclpy.spin_once(node, timeout_sec=0.1)
            op.publish(cmd_t(name=["gripper"], position=[args.operator_gripper],
                             source="operator"))
        else:
            sec = int(args.seconds)
            pub.publish(JointTrajectory(
                joint_names=["shoulder_pan"],
                points=[JointTrajectoryPoint(positions=[args.pan], time_from_start=Duration(
                    sec=sec, nanosec=int((args.seconds - sec) * 1e9)))]))
        while time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.1)
            g = gate[-1]
            if g["holder"] == want:
                print(f"the arm is held by {want}" + (
                    f": moving shoulder_pan to {args.pan} rad" if want == "external" else ""))
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
