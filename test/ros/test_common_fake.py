"""The node shells' shared runtime (solarian_agent/ros/common.py) over the rclpy stand-in
(test/ros/_fake_rclpy.py): typed parameters, and an executor that dies is not a silent zombie.
The real rclpy runs these paths in the launch tests under colcon test."""

from __future__ import annotations

import importlib
import os
import sys
import threading

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fake_rclpy as fake  # noqa: E402

from solarian_agent.core.errors import ConfigError  # noqa: E402


@pytest.fixture
def common(monkeypatch):
    fake.reset()
    for name, mod in fake.modules().items():
        monkeypatch.setitem(sys.modules, name, mod)
    for m in ("solarian_agent.ros.common", "solarian_agent.ros.bridge"):
        monkeypatch.delitem(sys.modules, m, raising=False)
    mod = importlib.import_module("solarian_agent.ros.common")
    yield mod
    for m in ("solarian_agent.ros.common", "solarian_agent.ros.bridge"):
        sys.modules.pop(m, None)
    fake.MultiThreadedExecutor.spin_fn = None


def test_parameters_are_typed_by_their_default(common):
    node = fake.Node("sim_world", {"seed": 3, "slip_p": 0.25})
    assert common.declare(node, "seed", 0) == 3
    assert common.declare(node, "slip_p", 0.0) == 0.25
    assert common.declare(node, "grasp_fail_p", 0.0) == 0.0  # the default
    assert common.declare(node, "seed", 99) == 3  # declared once


@pytest.mark.parametrize("name,given,default", [
    ("slip_p", 0, 0.0),            # -p slip_p:=0 is an INTEGER, the parameter a DOUBLE
    ("seed", 1.5, 0),
    ("cameras", ["a", "b"], ""),   # a list where a comma-separated string is expected
    ("simulated_bus", "true", False),
])
def test_a_parameter_of_the_wrong_type_is_a_config_error(common, name, given, default):
    node = fake.Node("n", {name: given})
    with pytest.raises(ConfigError, match=f"parameter {name}"):
        common.declare(node, name, default)


def test_config_error_exit_releases_the_node(common):
    node = fake.Node("skills")
    assert common.config_error_exit(node, ConfigError("agent.x", "bad")) == 2
    assert node.destroyed
    assert any("invalid configuration" in line for line in node.log.lines)


def test_an_executor_that_dies_stops_the_node(common):
    """rclpy re-raises a callback's exception out of spin(): the node must not run on deaf."""

    def boom():
        raise RuntimeError("callback raised")

    fake.MultiThreadedExecutor.spin_fn = boom
    log = fake._Logger()
    stop, failed = threading.Event(), threading.Event()
    t = common.start_spinning(fake.MultiThreadedExecutor(), log, stop, failed)
    t.join(2.0)
    assert stop.is_set() and failed.is_set()
    assert any("executor stopped" in line and "callback raised" in line for line in log.lines)
