"""Every node, started with a wrongly typed parameter (as a launch file or ``-p`` would pass
it), stops at once with the documented one-line message naming the parameter and exit status
2 (docs/ros.md), never a traceback."""

from __future__ import annotations

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
