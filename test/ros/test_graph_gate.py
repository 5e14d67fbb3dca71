"""The command gate on real rclpy: the arm node against servos on a pseudo-terminal (the test
owns the simulated Feetech bus), driven by a separate ROS node (the probe) as another stack
would drive it:

* a ``trajectory_msgs/JointTrajectory`` on ``arm_controller/joint_trajectory`` with one point
  out of limits moves nothing, and the reason is reported (``arm/gate``, ``/diagnostics``);
* a good one plays on ``time_from_start`` with ``source = external``; the operator's command
  takes the arm back (``arm_taken`` on ``operator/events``);
* a flood of bad trajectories: the record holds the exact count, ``joint_states`` keeps its
  rate (the control loop's 50 Hz, asserted at >= 40 Hz on a loaded machine);
* an e-stop requested on ``estop/request`` with a reason: the reason is seen by the probe."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest
from _rostest_util import NodeProcesses, Probe, ros_type, wait_until

from solarian_agent.hw.feetech.simbus import SimulatedBus
from solarian_agent.ros.components import share_dir

pytestmark = [pytest.mark.usefixtures("real_ros"), pytest.mark.timeout(300)]

NS = "gate"
IDS = (1, 2, 3, 4, 5, 6)
JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
TICKS_PER_RAD = 4096 / (2 * math.pi)


@pytest.fixture(scope="module")
def arm(real_ros, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gate")
    shipped = (share_dir() / "config" / "arm_so101.yaml").read_text()
    arm_file = tmp / "arm_so101.yaml"
    # 200 ms per answer: the servos answer from a thread of this loaded test process
    arm_file.write_text(shipped.replace("timeout_s: 0.025", "timeout_s: 0.2"))
    bus = SimulatedBus(IDS).start()
    g = NodeProcesses(tmp, namespace=NS)
    g.start("arm_node", "arm", {"port": bus.port_name, "arm_config": str(arm_file),
                                "command_timeout_s": 5.0})
    p = Probe(g.domain)
    try:
        assert not p.wait_for_nodes([f"/{NS}/arm"], 60.0), g.outputs()
        assert wait_until(lambda: all(bus.torque(i) for i in IDS), 30.0), g.outputs()
        yield bus, g, p
    finally:
        p.close()
        g.close()
        bus.stop()


def _trajectory(points):
    traj_t = ros_type("trajectory_msgs/msg/JointTrajectory")
    point_t = ros_type("trajectory_msgs/msg/JointTrajectoryPoint")
    dur_t = ros_type("builtin_interfaces/msg/Duration")
    names = list(points[0][1])
    return traj_t(joint_names=names, points=[
        point_t(positions=[float(q[n]) for n in names],
                time_from_start=dur_t(sec=int(t), nanosec=int(round((t - int(t)) * 1e9))))
        for t, q in points])


def _gate(p):
    got = p.listen("std_msgs/msg/String", f"{NS}/arm/gate", "latched")
    assert wait_until(lambda: len(got) > 0, 10.0)
    return json.loads(got[-1].data)


def _publisher(p, typename, topic):
    pub = p.publisher(typename, f"{NS}/{topic}")
    assert wait_until(lambda: pub.get_subscription_count() > 0, 10.0)
    return pub


def _rad(bus, sid):
    return (bus.position(sid) - 2048) / TICKS_PER_RAD


def test_one_point_out_of_limits_moves_nothing_and_the_reason_is_reported(arm):
    bus, g, p = arm
    pub = _publisher(p, "trajectory_msgs/msg/JointTrajectory", "arm_controller/joint_trajectory")
    diags = p.listen("diagnostic_msgs/msg/DiagnosticArray", f"{NS}/diagnostics")
    before = len(bus.goal_writes())
    held = bus.position(1)
    # elbow_flex's limit is 1.69 rad: point 1 asks 2.5
    pub.publish(_trajectory([(0.5, {"shoulder_pan": 0.4, "elbow_flex": 0.0}),
                             (1.0, {"shoulder_pan": 0.6, "elbow_flex": 2.5}),
                             (1.5, {"shoulder_pan": 0.0, "elbow_flex": 0.0})]))
    assert wait_until(lambda: _gate(p)["refused_total"] >= 1, 10.0), g.outputs()
    time.sleep(1.0)
    moved = [raw for sid, raw in bus.goal_writes()[before:] if sid == 1 and abs(raw - held) > 3]
    assert moved == [], "part of a refused trajectory reached the servos"
    assert abs(bus.position(1) - held) <= 3
    last = _gate(p)["last_refusals"][-1]
    assert last["source"] == "external" and last["joint"] == "elbow_flex"
    assert last["value"] == 2.5 and last["code"] == "limit"
    assert "point 1" in last["reason"] and last["limit"] == "[-1.6900, 1.6900]"

    def reported():
        for d in list(diags):
            for s in d.status:
                if s.name == "arm/gate":
                    values = {v.key: v.value for v in s.values}
                    if values.get("count.refused external limit") == "1":
                        return True
        return False

    assert wait_until(reported, 10.0)


def test_another_node_drives_the_arm_and_the_operator_takes_it_back(arm):
    bus, g, p = arm
    pub = _publisher(p, "trajectory_msgs/msg/JointTrajectory", "arm_controller/joint_trajectory")
    events = p.listen("solarian_agent/msg/OperatorEvent", f"{NS}/operator/events")
    pub.publish(_trajectory([(1.0, {"shoulder_pan": 0.3, "elbow_flex": 0.2}),
                             (2.0, {"shoulder_pan": 0.3, "elbow_flex": 0.4})]))
    assert wait_until(lambda: _gate(p)["holder"] == "external", 10.0), g.outputs()
    assert wait_until(lambda: abs(_rad(bus, 1) - 0.3) < 0.03 and abs(_rad(bus, 3) - 0.4) < 0.03,
                      15.0), (_rad(bus, 1), _rad(bus, 3))
    # a long trajectory, taken over half way by the operator's command
    pub.publish(_trajectory([(6.0, {"shoulder_pan": -0.6, "elbow_flex": 0.4})]))
    assert wait_until(lambda: _rad(bus, 1) < 0.2, 10.0)
    cmd = _publisher(p, "solarian_agent/msg/JointCommand", "joint_commands")
    cmd.publish(ros_type("solarian_agent/msg/JointCommand")(
        name=["gripper"], position=[0.5], max_velocity=0.0, source="operator"))
    assert wait_until(lambda: any(e.kind == "arm_taken" for e in events), 10.0), g.outputs()
    taken = json.loads(next(e for e in events if e.kind == "arm_taken").detail_json)
    assert (taken["by"], taken["from"]) == ("operator", "external")
    assert _gate(p)["holder"] == "operator"
    time.sleep(0.3)
    stopped = _rad(bus, 1)
    time.sleep(1.0)
    assert abs(_rad(bus, 1) - stopped) < 0.02, "the external trajectory went on"
    assert _rad(bus, 1) > -0.5


def test_the_readmes_script_drives_the_arm_and_is_refused_while_the_operator_holds_it(arm):
    """scripts/drive_arm_external.py, the README's example of another stack, as a process."""
    import subprocess
    import sys

    bus, g, p = arm
    script = [sys.executable, str(Path(__file__).resolve().parents[2] / "scripts"
                                  / "drive_arm_external.py"), "--ns", NS]
    cmd = _publisher(p, "solarian_agent/msg/JointCommand", "joint_commands")
    cmd.publish(ros_type("solarian_agent/msg/JointCommand")(
        name=["gripper"], position=[0.4], max_velocity=0.0, source="operator"))
    assert wait_until(lambda: _gate(p)["holder"] == "operator", 10.0)
    r = subprocess.run([*script, "--pan", "-0.2"], env=g.env(), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1 and "held by operator" in r.stdout, r.stdout + r.stderr
    # the operator's lease (3 s) lapses without commands: the other stack may drive
    assert wait_until(lambda: _gate(p)["holder"] == "", 10.0)
    r = subprocess.run([*script, "--pan", "-0.2", "--seconds", "1.5"], env=g.env(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert wait_until(lambda: abs(_rad(bus, 1) + 0.2) < 0.03, 15.0), _rad(bus, 1)


def test_a_flood_of_bad_trajectories_is_counted_exactly_and_the_loop_keeps_its_rate(arm):
    bus, g, p = arm
    pub = _publisher(p, "trajectory_msgs/msg/JointTrajectory", "arm_controller/joint_trajectory")
    bad = _trajectory([(0.5, {"shoulder_pan": 0.0, "wrist_flex": 9.0})])
    start_total = _gate(p)["refused_total"]
    states = p.listen("sensor_msgs/msg/JointState", f"{NS}/joint_states")
    n, burst = 10_000, 50
    t0 = time.monotonic()
    js0 = len(states)
    for sent in range(burst, n + 1, burst):
        for _ in range(burst):
            pub.publish(bad)
        # flow control: the next burst when the gate has counted this one (a burst deeper
        # than the node's queue of 100 would be dropped by DDS before the node saw it)
        assert wait_until(lambda s=sent: _gate(p)["refused_total"] - start_total >= s, 20.0), \
            (sent, _gate(p)["refused_total"] - start_total)
    elapsed = time.monotonic() - t0
    rate = (len(states) - js0) / elapsed
    print(f"\n{n} bad trajectories in {elapsed:.1f} s; joint_states at {rate:.1f} Hz")
    assert _gate(p)["refused_total"] - start_total == n
    assert rate >= 40.0, f"joint_states at {rate:.1f} Hz during the flood"
    # the node's log: one summary a second, with exact counts that add up to the flood
    time.sleep(1.5)
    out = g.procs[f"{NS}/arm"].output()
    counts = [int(c) for c in __import__("re").findall(r"refused external limit: (\d+)", out)]
    assert sum(counts) == n + 1  # and the one from the first test
    assert len(counts) <= elapsed + 4
    print(f"{len(counts)} summary lines for {n} refusals")


def test_an_estop_request_carries_its_reason_to_another_node(arm):
    bus, g, p = arm
    events = p.listen("solarian_agent/msg/OperatorEvent", f"{NS}/operator/events")
    pub = _publisher(p, "std_msgs/msg/String", "estop/request")
    pub.publish(ros_type("std_msgs/msg/String")(data="light curtain broken at cell 2"))
    assert wait_until(lambda: any(e.kind == "estop" for e in events), 10.0), g.outputs()
    reason = json.loads(next(e for e in events if e.kind == "estop").detail_json)["reason"]
    assert "light curtain broken at cell 2" in reason
    r = p.call("std_srvs/srv/Trigger", f"{NS}/estop_reset")
    assert r.success, r.message
