"""``solarian-agent launch``: the launch files' nodes without ros2 launch.  Bad arguments are a
one-line usage error (exit 2) before anything starts; on real rclpy, ``launch sim`` starts the
graph's nodes, respawns a node killed with SIGKILL (respawn:=true) and SIGINT stops them all
with exit status 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

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


def _child(parent: int, node: str) -> int | None:
    """The pid of ``parent``'s child process running the package node ``node``."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = (d / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and f"__node:={node}".encode() in cmd:
            return int(d.name)
    return None


def test_launch_sim_starts_the_graph_respawns_a_killed_node_and_sigint_stops_it(real_ros,
                                                                                tmp_path):
    """respawn:=true: the monitor killed with SIGKILL is restarted after respawn_delay, the
    planner sees it back; then SIGINT stops every node (exit 130, each node 0)."""
    from _rostest_util import Probe, free_domain, wait_until

    domain = free_domain()
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain))
    proc = subprocess.Popen([sys.executable, "-m", "solarian_agent.cli", "launch", "sim",
                             "planner_provider:=rules", "namespace:=l1", "respawn:=true",
                             "respawn_delay:=1.0"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(
        b.decode(errors="replace") for b in iter(proc.stdout.readline, b"")), daemon=True)
    reader.start()
    p = Probe(domain)
    try:
        missing = p.wait_for_nodes(["/l1/sim_world", "/l1/skills", "/l1/monitor",
                                    "/l1/planner"], 90.0)
        assert not missing, missing
        states = p.listen("solarian_agent/msg/AgentState", "l1/agent/state", "latched")

        def monitor_is(state):
            return bool(states) and any(n.node == "monitor" and n.state == state
                                        for n in states[-1].nodes)

        assert wait_until(lambda: monitor_is("up"), 60.0, 0.1), "the planner never saw it"
        pid = _child(proc.pid, "monitor")
        assert pid is not None, "".join(lines)
        os.kill(pid, signal.SIGKILL)
        assert wait_until(lambda: "l1/monitor exited with status -9; respawning it"
                          in "".join(lines), 30.0, 0.1), "".join(lines)
        assert wait_until(lambda: monitor_is("back"), 60.0, 0.1), "".join(lines)
        new = _child(proc.pid, "monitor")
        assert new is not None and new != pid
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
        reader.join(10)
        text = "".join(lines)
        # Ctrl-C: 130, as every command (1 had a node not exited 0: the respawned one too)
        assert proc.returncode == 130, text
        assert "exit status" not in text, text
        assert "Traceback" not in text
    finally:
        p.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
