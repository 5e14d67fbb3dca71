"""replay.launch.py on real rclpy: a tidy-up episode recorded without ROS by the embedded run
(compressed camera images, as ``solarian-agent demo --record`` writes them) is played by the
package's bag_player into a skills node (for the monitor questions) and a monitor on sim time;
the monitor judges the replayed actions and publishes verdicts.  No rosbag2 and no
image_transport are involved."""

from __future__ import annotations

import pytest
from _rostest_util import NodeProcesses, Probe, wait_until

from solarian_agent.ros import launch_plan
from solarian_agent.ros.components import share_dir

pytestmark = [pytest.mark.usefixtures("real_ros"), pytest.mark.timeout(600)]


def _record_episode(path) -> None:
    from solarian_agent.rosmsg.bag import BagRecorder
    from solarian_agent.system import build_sim_system

    s = build_sim_system(seed=1)
    rec = BagRecorder(path, clock=lambda: int(s.clock.epoch() * 1e9))
    rec.attach(s.bus)
    try:
        s.planner.message("put the red cup on the tray")
        assert s.run_until(lambda: s.planner.status in ("succeeded", "failed"), 120.0)
    finally:
        s.shutdown()
        rec.close()


def test_the_monitor_judges_a_replayed_episode(real_ros, tmp_path):
    from solarian_agent.rosmsg.bag import bag_summary

    bag = tmp_path / "episode"
    _record_episode(bag)
    summary = bag_summary(bag)
    assert "overhead/image_raw/compressed" in summary and "skills/events" in summary
    g = NodeProcesses(tmp_path / "replay")
    plan = launch_plan.replay_plan({"bag": str(bag), "rate": "2.0", "delay": "4.0"},
                                   share_dir())
    assert {p.executable for p in plan} == {"bag_player", "skills_node", "monitor_node"}
    p = Probe(g.domain)
    try:
        verdicts = p.listen("solarian_agent/msg/MonitorVerdict", "monitor/verdicts")
        frames = p.listen("sensor_msgs/msg/Image", "overhead/image_raw", "sensor")
        clock = p.listen("rosgraph_msgs/msg/Clock", "/clock", "sensor")
        g.start_plan(plan)
        assert wait_until(lambda: verdicts, 180.0, 0.2), g.outputs()
        assert verdicts[0].action_id
        assert frames and frames[0].encoding == "bgr8"  # decoded from the bag's JPEGs
        assert clock  # the nodes on use_sim_time follow the episode's time
        player = g.procs["bag_player"]
        assert player.wait(120.0) == 0, player.output()  # played to the end: exits 0
        assert "played" in player.output()
    finally:
        p.close()
        codes = g.close()
    assert codes.get("monitor") == 0 and codes.get("skills") == 0, (codes, g.outputs())
