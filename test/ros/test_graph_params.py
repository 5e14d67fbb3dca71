"""Every node, started with a wrongly typed parameter (as a launch file or ``-p`` would pass
it), stops at once with the documented one-line message naming the parameter and exit status
2 (docs/ros.md), never a traceback."""

from __future__ import annotations

import signal

import pytest
from _rostest_util import NodeProcesses

pytestmark = pytest.mark.usefixtures("real_ros")

WRONG = [  # executable, node name, parameter, a value of the wrong type
    ("sim_node", "sim_world", "slip_p", 0),              # an INTEGER for a DOUBLE
    ("skills_node", "skills", "tool_set", 3),
    ("monitor_node", "monitor", "startup_timeout_s", "soon"),
    ("planner_node", "planner", "cameras", ["overhead", "wrist"]),  # a list for 'a,b'
    ("camera_node", "camera_cam", "width", "wide"),
    ("arm_node", "arm", "simulated_bus", "yes"),          # a string for a bool
]


def test_a_wrongly_typed_parameter_stops_every_node_with_exit_2(real_ros, tmp_path):
    g = NodeProcesses(tmp_path)
    try:
        for exe, name, param, value in WRONG:  # all at once: they start in parallel
            g.start(exe, name, {param: value})
        codes = {name: g.procs[name].wait(60.0) for _, name, _, _ in WRONG}
        for _, name, param, _ in WRONG:
            out = g.procs[name].output()
            assert codes[name] == 2, (name, codes[name], out)
            assert f"invalid configuration: parameter {param}" in out, out
            assert "Traceback" not in out, out
    finally:
        g.close()


def test_sigint_while_waiting_for_the_graph_is_a_clean_stop(real_ros, tmp_path):
    """The monitor and the planner wait for skills/catalogue at start-up; a SIGINT then is a
    normal stop (exit 0, no error), and the planner never says it is running."""
    g = NodeProcesses(tmp_path)
    try:
        g.start("monitor_node", "monitor", {"startup_timeout_s": 60.0})
        g.start("planner_node", "planner", {"planner_provider": "rules",
                                            "catalogue_timeout_s": 60.0})
        for name in ("monitor", "planner"):
            assert g.procs[name].wait_for_output("waiting for", 60.0), g.outputs()
        codes = {name: g.stop(name, signal.SIGINT) for name in ("monitor", "planner")}
        assert codes == {"monitor": 0, "planner": 0}, g.outputs()
        for name in ("monitor", "planner"):
            out = g.procs[name].output()
            assert "[ERROR]" not in out and "Traceback" not in out, out
        assert "planner running" not in g.procs["planner"].output()
    finally:
        g.close()
