"""test/ros: the ROS layer on real rclpy (ROS 2 Jazzy from PyPI wheels, set up by `make ros`).

Where rclpy or the package's generated interfaces do not import, the real-rclpy tests skip with
the reason, except under CI (``CI=true``) or ``make test`` (``SOLARIAN_REQUIRE_ROS=1``), where
they fail: a broken ROS set-up is never a silent pass.  The bag tests and the stand-in tests
(test_*_fake.py) run everywhere.
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rostest_util import ros_problem, ros_required  # noqa: E402

PROBLEM = ros_problem()


def pytest_report_header(config):
    if PROBLEM is None:
        return "test/ros: real rclpy and the package's interfaces import"
    return f"test/ros: {PROBLEM}" + (" -- REQUIRED here: the ROS tests fail"
                                     if ros_required() else " -- the ROS tests skip")


@pytest.fixture(scope="session")
def real_ros() -> None:
    """Every real-rclpy test asks for this first."""
    if PROBLEM is not None:
        if ros_required():
            pytest.fail(f"ROS is required here (CI / make test): {PROBLEM}")
        pytest.skip(PROBLEM)
