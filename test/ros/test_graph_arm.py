"""The arm node's lifecycle on real rclpy, against servos on a pseudo-terminal: the test owns
the simulated Feetech bus (``SimulatedBus``, byte for byte STS3215) and the node opens its
serial port as it would ``/dev/ttyACM0``.  configure -> inactive (reads, refuses commands),
activate -> active (torque on, commands reach the wire within the limits), deactivate ->
inactive (holds, refuses), and a bus that stops answering while active -> ErrorProcessing ->
unconfigured with the e-stop latched, which stays latched across the next configure until
``estop_reset``."""

from __future__ import annotations

import json
import time

import pytest
from _rostest_util import NodeProcesses, Probe, ros_type, wait_until

from solarian_agent.hw.feetech.simbus import SimulatedBus
from solarian_agent.ros.components import share_dir

pytestmark = pytest.mark.usefixtures("real_ros")

NS = "hw"
IDS = (1, 2, 3, 4, 5, 6)
# lifecycle_msgs/msg/Transition ids
CONFIGURE, CLEANUP, ACTIVATE, DEACTIVATE = 1, 2, 3, 4


@pytest.fixture(scope="module")
def arm(real_ros, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("arm")
    # the shipped arm file, but 200 ms per answer: these servos answer from a thread of the
    # test process, so their latency follows this machine's load (25 ms is a real bus's)
    shipped = (share_dir() / "config" / "arm_so101.yaml").read_text()
    assert "timeout_s: 0.025" in shipped
    arm_file = tmp / "arm_so101.yaml"
    arm_file.write_text(shipped.replace("timeout_s: 0.025", "timeout_s: 0.2"))
    bus = SimulatedBus(IDS).start()
    g = NodeProcesses(tmp, namespace=NS)
    g.start("arm_node", "arm", {"port": bus.port_name, "autostart": False,
                                "arm_config": str(arm_file), "command_timeout_s": 5.0})
    p = Probe(g.domain)
    try:
        assert not p.wait_for_nodes([f"/{NS}/arm"], 60.0), g.outputs()
        yield bus, g, p
    finally:
        p.close()
        g.close()
        bus.stop()


def _state(p):
    return p.call("lifecycle_msgs/srv/GetState", f"{NS}/arm/get_state").current_state.label


def _change(p, transition):
    t = ros_type("lifecycle_msgs/msg/Transition")(id=transition)
    return p.call("lifecycle_msgs/srv/ChangeState", f"{NS}/arm/change_state",
                  transition=t).success


def _command(p, pub, **joints):
    msg = ros_type("solarian_agent/msg/JointCommand")(
        name=list(joints), position=[float(v) for v in joints.values()], max_velocity=0.0,
        source="agent")
    pub.publish(msg)


def test_unconfigured_at_start_then_configure_reads_and_refuses_commands(arm):
    bus, g, p = arm
    assert _state(p) == "unconfigured"
    assert _change(p, CONFIGURE)
    assert _state(p) == "inactive"
    (js,) = p.messages("sensor_msgs/msg/JointState", f"{NS}/joint_states")
    assert len(js.name) == 6
    assert not any(bus.torque(i) for i in IDS)
    pub = p.publisher("solarian_agent/msg/JointCommand", f"{NS}/joint_commands")
    assert wait_until(lambda: pub.get_subscription_count() > 0, 10.0)
    before = len(bus.goal_writes())
    _command(p, pub, shoulder_pan=0.5)
    time.sleep(0.5)
    assert [w for w in bus.goal_writes()[before:] if w[0] == 1 and w[1] > 2100] == []


def test_activate_enables_torque_and_commands_reach_the_wire_within_the_limits(arm):
    bus, g, p = arm
    assert _change(p, ACTIVATE)
    assert _state(p) == "active"
    assert wait_until(lambda: all(bus.torque(i) for i in IDS), 5.0)
    pub = p.publisher("solarian_agent/msg/JointCommand", f"{NS}/joint_commands")
    assert wait_until(lambda: pub.get_subscription_count() > 0, 10.0)
    _command(p, pub, shoulder_pan=5.0)  # far past the joint's upper limit (1.92 rad)
    assert wait_until(lambda: bus.position(1) > 3000, 10.0)
    pan = [raw for sid, raw in bus.goal_writes() if sid == 1]
    assert max(pan) <= 3302  # the calibrated range_max: nothing beyond reached the servo
    time.sleep(0.3)
    assert bus.position(1) <= 3302


def test_deactivate_holds_and_refuses_commands(arm):
    bus, g, p = arm
    assert _change(p, DEACTIVATE)
    assert _state(p) == "inactive"
    pub = p.publisher("solarian_agent/msg/JointCommand", f"{NS}/joint_commands")
    assert wait_until(lambda: pub.get_subscription_count() > 0, 10.0)
    held = bus.position(1)
    _command(p, pub, shoulder_pan=0.0)
    time.sleep(0.5)
    assert abs(bus.position(1) - held) < 5


def test_a_bus_that_stops_answering_goes_through_error_to_a_latched_estop(arm):
    bus, g, p = arm
    events = p.listen("solarian_agent/msg/OperatorEvent", f"{NS}/operator/events")
    assert _change(p, ACTIVATE) and _state(p) == "active"
    for i in IDS:
        bus.inject(i, "no_answer", None)
    assert wait_until(lambda: _state(p) == "unconfigured", 15.0), g.outputs()
    assert "going to the error state" in g.procs[f"{NS}/arm"].output()
    assert wait_until(lambda: any(e.kind == "estop" for e in events), 10.0)
    reason = json.loads(next(e for e in events if e.kind == "estop").detail_json)["reason"]
    assert "servo bus" in reason
    # the bus answers again; a configure does not release the e-stop, and torque stays off
    bus.clear_faults()
    assert _change(p, CONFIGURE) and _state(p) == "inactive"
    assert not _change(p, ACTIVATE), "activated with the e-stop latched"
    assert _state(p) == "inactive"
    assert "activate failed: e-stop is latched" in g.procs[f"{NS}/arm"].output()

    def latched_in_diagnostics():
        (diag,) = p.messages("diagnostic_msgs/msg/DiagnosticArray", f"{NS}/diagnostics")
        return {v.key: v.value for v in diag.status[0].values}.get("estop") == "True"

    assert wait_until(latched_in_diagnostics, 10.0)
    r = p.call("std_srvs/srv/Trigger", f"{NS}/estop_reset")
    assert r.success, r.message
    assert _change(p, ACTIVATE) and _state(p) == "active"
    pub = p.publisher("solarian_agent/msg/JointCommand", f"{NS}/joint_commands")
    assert wait_until(lambda: pub.get_subscription_count() > 0, 10.0)
    _command(p, pub, shoulder_pan=0.0)
    assert wait_until(lambda: abs(bus.position(1) - 2048) < 30, 10.0)


def test_the_arm_node_exits_0_on_sigint(arm):
    bus, g, p = arm
    assert g.stop(f"{NS}/arm") == 0, g.outputs()
    assert "Traceback" not in g.procs[f"{NS}/arm"].output()
