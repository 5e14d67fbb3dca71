"""The node shells' shared runtime (solarian_agent/ros/common.py) on real rclpy: parameters
typed by their defaults, a wrong type a ConfigError naming the parameter, and an executor whose
callback raised is not a silent zombie (the node stops and exits non-zero)."""

from __future__ import annotations

import threading

import pytest
from _rostest_util import free_domain, prepare_environment, wait_until

from solarian_agent.core.errors import ConfigError

pytestmark = pytest.mark.usefixtures("real_ros")


@pytest.fixture
def ctx(real_ros):
    import rclpy

    prepare_environment()
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=free_domain())
    yield context
    context.try_shutdown()


def _node(ctx, name, **params):
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    return Node(name, context=ctx,
                parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])


def test_parameters_are_typed_by_their_default(ctx):
    from solarian_agent.ros import common

    node = _node(ctx, "sim_world", seed=3, slip_p=0.25)
    try:
        assert common.declare(node, "seed", 0) == 3
        assert common.declare(node, "slip_p", 0.0) == 0.25
        assert common.declare(node, "grasp_fail_p", 0.0) == 0.0  # the default
        assert common.declare(node, "seed", 99) == 3  # declared once
    finally:
        node.destroy_node()


@pytest.mark.parametrize("name,given,default", [
    ("slip_p", 0, 0.0),            # -p slip_p:=0 is an INTEGER, the parameter a DOUBLE
    ("seed", 1.5, 0),
    ("cameras", ["a", "b"], ""),   # a list where a comma-separated string is expected
    ("simulated_bus", "true", False),
])
def test_a_parameter_of_the_wrong_type_is_a_config_error(ctx, name, given, default):
    from solarian_agent.ros import common

    node = _node(ctx, "n", **{name: given})
    try:
        with pytest.raises(ConfigError, match=f"parameter {name}"):
            common.declare(node, name, default)
    finally:
        node.destroy_node()


def test_an_executor_whose_callback_raised_stops_the_node(ctx):
    """rclpy re-raises a callback's exception out of spin(): the node must not run on deaf."""
    from std_msgs.msg import String

    from solarian_agent.ros import common

    node = _node(ctx, "victim")

    def boom(_msg):
        raise RuntimeError("callback raised")

    node.create_subscription(String, "boom", boom, 10)
    pub = node.create_publisher(String, "boom", 10)
    stop = threading.Event()
    spinner = common.Spinner(node, stop, num_threads=2).start()
    assert wait_until(lambda: pub.get_subscription_count() > 0, 10.0)
    pub.publish(String(data="x"))
    assert wait_until(stop.is_set, 10.0)
    assert spinner.failed.is_set()
    spinner.close()
    assert not spinner.thread.is_alive()

