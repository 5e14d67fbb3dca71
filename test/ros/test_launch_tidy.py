"""launch_testing (ROS 2 Jazzy): the tidy-up task completes under sim.launch.py with the offline
providers (the rules planner and the classical-CV monitor), driven through agent/message."""

from __future__ import annotations

import os
import sys
import time
import unittest

import launch_testing
import launch_testing.actions
import pytest
from ament_index_python.packages import get_package_share_directory
from launch.launch_description_sources import PythonLaunchDescriptionSource

import launch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rostest_util import LATCHED, Probe, srv_type  # noqa: E402

TASK = "put the red cup on the tray and the yellow paper in the bin"


@pytest.mark.launch_test
def generate_test_description():
    share = get_package_share_directory("solarian_agent")
    sim = launch.actions.IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.path.join(share, "launch", "sim.launch.py")),
        launch_arguments={"planner_provider": "rules", "seed": "1"}.items())
    return launch.LaunchDescription([sim, launch_testing.actions.ReadyToTest()])


class TestTidyUp(unittest.TestCase):
    def test_tidy_up_completes(self):
        p = Probe("tidy_probe")
        try:
            cls = srv_type("solarian_agent/srv/AgentCommand")
            (st,) = p.messages("solarian_agent/msg/AgentState", "agent/state", LATCHED,
                               timeout_s=120.0)
            r = p.call("solarian_agent/srv/AgentCommand", "agent/message",
                       cls.Request(text=TASK, by="test"), timeout_s=60.0)
            self.assertTrue(r.ok, r.reason)
            latest = {}

            def on_state(m):
                latest["s"] = m

            p.node.create_subscription(type(st), "agent/state", on_state, LATCHED)
            end = time.monotonic() + 600.0
            while time.monotonic() < end:
                s = latest.get("s")
                if s is not None and s.status in ("succeeded", "failed", "cancelled",
                                                  "budget_exhausted"):
                    break
                time.sleep(0.5)
            s = latest.get("s")
            self.assertIsNotNone(s)
            self.assertEqual(s.status, "succeeded", [(x.description, x.status) for x in s.plan])
            truth = p.messages("solarian_agent/msg/SimTruth", "sim/ground_truth", LATCHED)
            self.assertTrue(truth)
        finally:
            p.close()
