"""Makes the absence of ROS visible in every test report (see conftest.py): where rclpy does
not import, this test is skipped with the reason and the launch tests are not collected."""

import importlib

import pytest


def test_launch_tests_are_collected_where_rclpy_imports():
    for mod in ("rclpy", "launch_testing", "launch_ros"):
        try:
            importlib.import_module(mod)
        except Exception as e:
            pytest.skip(f"test/ros skipped: rclpy not importable — {mod}: {type(e).__name__}; "
                        "the launch tests (test/ros/test_launch_*.py) run under colcon test "
                        "on a ROS 2 Jazzy machine")
