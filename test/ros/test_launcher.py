"""``solarian-agent launch``: the launch files' nodes without ros2 launch.  Bad arguments are a
one-line usage error (exit 2) before anything starts; on real rclpy, ``launch sim`` starts the
graph's nodes and SIGINT stops them all with exit status 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from solarian_agent.ros.launcher import main_launch, parse


def test_arguments_are_parsed_with_their_defaults():
    kind, values = parse(["sim", "seed:=3", "planner_provider:=rules"])
    assert kind == "sim" and values["seed"] == "3" and values["tool_set"] == "tidy"


@pytest.mark.parametrize("argv,why", [
    ([], "must be one of sim, robot, replay"),
    (["simulate"], "must be one of sim, robot, replay"),
    (["sim", "seed=3"], "is not name:=value"),
    (["sim", "speed:=3"], "sim has no argument 'speed'"),
    (["sim", "robot_state_publisher:=maybe"], "not one of auto, true, false"),
    (["replay"], "needs bag:="),
])
def test_a_bad_argument_is_a_usage_error(capsys, argv, why):
    with pytest.raises(SystemExit) as e:
        main_launch(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert why in err and err.startswith("solarian-agent launch: error: ")
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_launch_sim_starts_the_graph_and_sigint_stops_it(real_ros, tmp_path):
    from _rostest_util import Probe, free_domain

    domain = free_domain()
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain))
    proc = subprocess.Popen([sys.executable, "-m", "solarian_agent.cli", "launch", "sim",
                             "planner_provider:=rules", "namespace:=l1"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    p = Probe(domain)
    try:
        missing = p.wait_for_nodes(["/l1/sim_world", "/l1/skills", "/l1/monitor",
                                    "/l1/planner"], 90.0)
        assert not missing, missing
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        text = out.decode(errors="replace")
        # Ctrl-C: 130, as every command (1 had a node not exited 0)
        assert proc.returncode == 130, text
        assert "exit status" not in text, text
        assert "Traceback" not in text
    finally:
        p.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
