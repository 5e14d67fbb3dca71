"""The tidy-up task through the ROS graph on real rclpy, in a namespace: ``sim.launch.py``'s
nodes (from :func:`launch_plan.sim_plan`, ``namespace:=robot1``) with the offline planner and
monitor, driven through ``agent/message``; the simulator's truth confirms the table is tidy
and the plan ends with every step done.  Every name the graph creates stays inside the
namespace.  Then a second task, and the planner is killed (SIGKILL) while its goal runs: the
skills node aborts the goal and the arm holds."""

from __future__ import annotations

import json
import signal
import time

import pytest
from _rostest_util import sim_graph, wait_until

pytestmark = [pytest.mark.usefixtures("real_ros"), pytest.mark.timeout(900)]

NS = "robot1"
TASK = "put the red cup on the tray and the yellow paper in the bin"
ENDED = ("succeeded", "failed", "cancelled", "budget_exhausted")


@pytest.fixture(scope="module")
def tidy_graph(real_ros, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tidy")
    args = {"planner_provider": "rules", "seed": "1", "log_root": str(tmp / "episodes")}
    with sim_graph(tmp, NS, args) as graph:
        yield graph


def _state_listener(p):
    return p.listen("solarian_agent/msg/AgentState", f"{NS}/agent/state", "latched")


def test_every_name_stays_in_the_namespace(tidy_graph):
    g, p = tidy_graph
    allowed = ("/rosout", "/parameter_events")
    topics = [n for n, _ in p.node.get_topic_names_and_types()]
    services = [n for n, _ in p.node.get_service_names_and_types()]
    ours = [n for n in topics + services if not n.startswith(allowed)
            and not n.startswith("/test_probe")]
    assert ours, "the graph shows no topics or services"
    outside = [n for n in ours if not n.startswith(f"/{NS}/")]
    assert not outside, outside
    assert f"/{NS}/skills/pick_object/_action/status" in topics


def test_the_sim_graph_tidies_the_table(tidy_graph):
    g, p = tidy_graph
    states = _state_listener(p)
    r = p.call("solarian_agent/srv/AgentCommand", f"{NS}/agent/message", text=TASK, by="test",
               timeout_s=60.0)
    assert r.ok, r.reason
    assert wait_until(lambda: states and states[-1].status in ENDED and states[-1].plan,
                      300.0, 0.2), (states[-1].status if states else None, g.outputs())
    s = states[-1]
    if s.status != "succeeded":  # pytest.fail: an assertion's message would be cut short
        said = "\n".join(f"{m.role}: {m.text}" for m in s.conversation[-4:])
        pytest.fail(f"the run {s.status}; plan {[(x.description, x.status) for x in s.plan]}"
                    f"\n{said}\n{g.outputs(4000, only=[f'{NS}/planner', f'{NS}/skills'])}")
    assert all(x.status == "done" for x in s.plan), [(x.description, x.status) for x in s.plan]
    (truth,) = p.messages("solarian_agent/msg/SimTruth", f"{NS}/sim/ground_truth", "latched")
    t = json.loads(truth.truth_json)
    assert t["in_tray"] == ["red_cup"] and t["in_bin"] == ["yellow_paper"], t["objects"]


def _arm_joints(p):
    """The arm's joints (the gripper keeps its commanded aperture when a skill stops, so a
    held object is not dropped: ArmPort.hold)."""
    (js,) = p.messages("sensor_msgs/msg/JointState", f"{NS}/joint_states")
    return [q for n, q in zip(js.name, js.position, strict=True) if n != "gripper"]


def test_killing_the_planner_mid_goal_aborts_the_goal_and_the_arm_holds(tidy_graph):
    g, p = tidy_graph
    r = p.call("solarian_agent/srv/SimReset", f"{NS}/sim/reset", seed=2, use_seed=True)
    assert r.ok and r.seed == 2, r.message
    after = time.time()

    def untidy_and_seen():  # the new layout in the truth, and an image taken after it
        (t,) = p.messages("solarian_agent/msg/SimTruth", f"{NS}/sim/ground_truth", "latched")
        imgs = p.messages("sensor_msgs/msg/Image", f"{NS}/overhead/image_raw", "sensor")
        fresh = imgs and imgs[0].header.stamp.sec + imgs[0].header.stamp.nanosec * 1e-9 > after
        return not json.loads(t.truth_json)["in_tray"] and fresh

    assert wait_until(untidy_and_seen, 30.0, 0.1)
    events = p.listen("solarian_agent/msg/AgentEvent", f"{NS}/skills/events")
    r = p.call("solarian_agent/srv/AgentCommand", f"{NS}/agent/message", text=TASK, by="test",
               timeout_s=60.0)
    assert r.ok, r.reason

    def kinds(kind):
        return [json.loads(e.data_json) | {"t": e.t} for e in events if e.kind == kind]

    assert wait_until(lambda: kinds("skill_started"), 60.0, 0.05), g.outputs()
    started = kinds("skill_started")[0]
    g.procs[f"{NS}/planner"].signal(signal.SIGKILL)
    assert g.procs[f"{NS}/planner"].wait(10.0) == -signal.SIGKILL

    def ended():
        return [e for e in kinds("skill_ended") if e.get("action_id") ==
                started.get("action_id")]

    assert wait_until(ended, 20.0, 0.1), (events, g.outputs())
    end = ended()[0]
    assert end["outcome"] == "stopped", end
    assert "planner" in end["reason"], end
    # holding: the arm stays where the skill left it
    a = _arm_joints(p)
    time.sleep(1.0)
    b = _arm_joints(p)
    assert max(abs(x - y) for x, y in zip(a, b, strict=True)) < 1e-3, (a, b)
