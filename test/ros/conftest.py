"""test/ros: the bag tests run everywhere; the launch_testing tests (test_launch_*.py) need
rclpy and launch_testing (ROS 2 Jazzy) and are collected only where those import.  Where they
are not, the report header says so and test_ros_env.py shows a visible skip with the reason —
never a silent pass."""

from __future__ import annotations

import importlib


def _ros_importable() -> tuple[bool, str]:
    for mod in ("rclpy", "launch_testing", "launch_ros"):
        try:
            importlib.import_module(mod)
        except Exception as e:  # not installed, or ROS not sourced
            return False, f"{mod} not importable ({type(e).__name__})"
    return True, ""


ROS_AVAILABLE, WHY_NOT = _ros_importable()
SKIP_REASON = (f"test/ros skipped: rclpy not importable — {WHY_NOT}; the launch tests run "
               "under `colcon test` on a ROS 2 Jazzy machine")

collect_ignore_glob = [] if ROS_AVAILABLE else ["test_launch_*.py"]


def pytest_report_header(config):
    if ROS_AVAILABLE:
        return "test/ros: rclpy found: launch_testing tests collected"
    return SKIP_REASON
