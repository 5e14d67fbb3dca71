"""launch_testing (ROS 2 Jazzy): a recorded bag replays into the monitor.  The bag is written
without ROS by solarian_agent.ros.bag from an embedded tidy-up run (the same topic names and
types the graph records), then replay.launch.py plays it into a monitor on sim time."""

from __future__ import annotations

import os
import sys
import tempfile
import unittest

import launch_testing
import launch_testing.actions
import pytest
from ament_index_python.packages import get_package_share_directory
from launch.launch_description_sources import PythonLaunchDescriptionSource

import launch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rostest_util import RELIABLE, Probe  # noqa: E402

BAG = os.path.join(tempfile.mkdtemp(prefix="solarian_replay_"), "episode")


def _record_episode(path: str) -> None:
    from solarian_agent.ros.bag import BagRecorder
    from solarian_agent.system import build_sim_system

    sysm = build_sim_system(seed=1)
    rec = BagRecorder(path, clock=lambda: int(sysm.clock.now() * 1e9))
    rec.attach(sysm.bus)
    sysm.planner.message("put the red cup on the tray")
    sysm.run_until(lambda: sysm.planner.status in ("succeeded", "failed"), 120.0)
    sysm.shutdown()
    rec.close()


@pytest.mark.launch_test
def generate_test_description():
    _record_episode(BAG)
    share = get_package_share_directory("solarian_agent")
    replay = launch.actions.IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.path.join(share, "launch", "replay.launch.py")),
        launch_arguments={"bag": BAG, "rate": "2.0", "delay": "5.0"}.items())
    return launch.LaunchDescription([replay, launch_testing.actions.ReadyToTest()])


class TestReplay(unittest.TestCase):
    def test_monitor_judges_the_replayed_actions(self):
        from solarian_agent.ros.bag import bag_summary

        self.assertIn("skills/events", bag_summary(BAG))
        p = Probe("replay_probe")
        try:
            verdicts = p.messages("solarian_agent/msg/MonitorVerdict", "monitor/verdicts",
                                  RELIABLE, count=1, timeout_s=240.0)
            self.assertTrue(verdicts, "the monitor published no verdict on the replayed bag")
            self.assertTrue(verdicts[0].action_id)
        finally:
            p.close()
