"""trajectory_msgs/JointTrajectory <-> :class:`~solarian_agent.arm.trajectory.Trajectory`
(``arm_controller/joint_trajectory``: the positions and ``time_from_start`` of each point;
velocities, accelerations and efforts are not used: the arm's own speed limits apply)."""

from __future__ import annotations

from typing import Any

from ..arm.trajectory import Trajectory, TrajectoryPoint
from ..core import names
from .codec import Codec, ConvertError

T_POINT = "trajectory_msgs/msg/JointTrajectoryPoint"


def _duration(d: Any) -> float:
    return float(d.sec) + float(d.nanosec) * 1e-9


def joint_trajectory_from_ros(msg: Any) -> Trajectory:
    try:
        return Trajectory(tuple(str(n) for n in msg.joint_names),
                          tuple(TrajectoryPoint(_duration(p.time_from_start),
                                                tuple(float(v) for v in p.positions))
                                for p in msg.points))
    except (TypeError, ValueError) as e:
        raise ConvertError(f"{names.T_JOINT_TRAJECTORY}: malformed message: {e}") from e


def joint_trajectory_to_ros(c: Codec, traj: Trajectory) -> Any:
    points = []
    for p in traj.points:
        sec = int(p.time_from_start)
        nsec = int(round((p.time_from_start - sec) * 1e9))
        points.append(c.new(T_POINT, positions=[float(v) for v in p.positions],
                            time_from_start=c.new("builtin_interfaces/msg/Duration",
                                                  sec=sec, nanosec=nsec)))
    return c.new(names.T_JOINT_TRAJECTORY, joint_names=list(traj.joint_names), points=points)


__all__ = ["joint_trajectory_from_ros", "joint_trajectory_to_ros"]
