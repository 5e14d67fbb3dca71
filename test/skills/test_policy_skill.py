"""PolicySkill: known weights through the observation and action mappings, chunk
timing on the injected clock (both late-chunk behaviours), how it ends (monitor finish with
``then``, fail rule, ``max_duration_s``, operator takeover), the safety path, start-up
failures, and the shipped policy's binding."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from policy_helpers import (
    FakeArm,
    FakeCameras,
    ManualWorker,
    constant_model,
    linear_model,
    policy_yaml,
)

from solarian_agent.arm.kinematics import JOINT_NAMES
from solarian_agent.core import names
from solarian_agent.core.clock import FakeClock
from solarian_agent.core.errors import ConfigError
from solarian_agent.core.executor import SkillExecutor
from solarian_agent.core.messages import MonitorVerdict, OperatorEvent, SkillGoal
from solarian_agent.core.skill import Skill, Tool
from solarian_agent.core.transport import Bus, GoalStatus, QoS
from solarian_agent.models.scripted import reply
from solarian_agent.skills.policy import PolicySkill, load_policy
from solarian_agent.skills.policy.backends import PolicyLoadError
from solarian_agent.skills.policy.config import ChunkSpec
from solarian_agent.skills.policy.runner import ChunkRunner, ThreadWorker
from solarian_agent.testing.harness import make_harness

PERIOD = 0.02  # the control period the executor is ticked at


def executor_for(policy, clock, arm, cams=None, inference="inline"):
    bus = Bus()
    ex = SkillExecutor(bus, clock, {"pol": Tool(PolicySkill, {"policy": policy,
                                                             "inference": inference})},
                       {"arm": arm, "cameras": cams or FakeCameras()})
    return bus, ex


def send(bus, ex, params=None, aid="a1"):
    return bus.send_goal(names.skill_action("pol"), SkillGoal("pol", params or {},
                                                              ex.generation, aid))


def run(ex, clock, seconds):
    for _ in range(int(round(seconds / PERIOD))):
        clock.advance(PERIOD)
        ex.tick()


# -------------------------------------------------------------------------------------------
# mappings: known weights give exactly the expected actions
# -------------------------------------------------------------------------------------------
def test_known_weights_give_the_expected_targets_through_both_mappings(tmp_path):
    mean = [0.1, 0.0, 0.2, 0.0, 0.1, 0.01, 0.2, 0.1]
    std = [0.5, 0.5, 0.5, 0.5, 0.5, 0.02, 0.1, 0.1]
    umean = [0.0, 0.1, 0.0, 0.1, 0.0, 0.03]
    ustd = [2.0, 1.0, 1.0, 0.5, 1.0, 0.01]
    w, b = linear_model(tmp_path / "m.onnx", 8, chunk=2)
    y = policy_yaml(tmp_path, goal="point", chunk=2, horizon=2,
                    observation__state={"input": "state", "joints": list(JOINT_NAMES),
                                        "goal": "point", "normalise": {"mean": mean,
                                                                       "std": std}},
                    action__mode="delta", action__unnormalise={"mean": umean, "std": ustd})
    pol = load_policy(y, cache=False)
    clock = FakeClock()
    arm = FakeArm(clock)
    bus, ex = executor_for(pol, clock, arm)
    send(bus, ex, {"point": [250, -40]})
    ex.tick()
    run(ex, clock, 0.2)
    # by hand: the joints, then the point unprojected (pixels / 1000 m in the fake camera)
    x = (np.array([*arm.q, 0.25, -0.04]) - mean) / std
    out = (x.astype(np.float32) @ w + b).reshape(2, 6)
    want = out * ustd + umean + np.array(arm.q)  # unnormalised, then delta from the joints
    sent = [c for _, c in arm.commands]
    assert len(sent) >= 2
    for k in range(2):
        got = np.array([sent[k][j] for j in JOINT_NAMES])
        np.testing.assert_allclose(got, want[k], rtol=1e-5, atol=1e-6)
    assert sent[0] != sent[1]
    # between its actions the newest target is sent again (the arm's watchdog would hold it)
    assert arm.keep_alives


def test_an_image_input_is_resized_and_normalised_as_configured(tmp_path):
    from onnx import TensorProto, helper, numpy_helper

    from solarian_agent.core.messages import Image

    # action = [mean of the image's channel c for c in R, G, B] + state[:3], one chunk of one
    nodes = [helper.make_node("ReduceMean", ["img"], ["m"], axes=[2, 3], keepdims=0),
             helper.make_node("Slice", ["state", "s0", "s3", "ax"], ["st3"]),
             helper.make_node("Concat", ["m", "st3"], ["flat"], axis=1),
             helper.make_node("Reshape", ["flat", "shape"], ["action"])]
    inits = [numpy_helper.from_array(np.array([0], np.int64), "s0"),
             numpy_helper.from_array(np.array([3], np.int64), "s3"),
             numpy_helper.from_array(np.array([1], np.int64), "ax"),
             numpy_helper.from_array(np.array([-1, 1, 6], np.int64), "shape")]
    g = helper.make_graph(nodes, "img", [
        helper.make_tensor_value_info("state", TensorProto.FLOAT, ["b", 6]),
        helper.make_tensor_value_info("img", TensorProto.FLOAT, ["b", 3, 4, 8])],
        [helper.make_tensor_value_info("action", TensorProto.FLOAT, ["b", 1, 6])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    (tmp_path / "m.onnx").write_bytes(m.SerializeToString())
    y = policy_yaml(tmp_path, chunk=1, horizon=1,
                    observation__images=[{"input": "img", "camera": "wrist", "size": [8, 4],
                                          "normalise": "imagenet"}])
    pol = load_policy(y, cache=False)
    clock = FakeClock()
    arm = FakeArm(clock)
    cams = FakeCameras()
    bgr = np.zeros((40, 80, 3), np.uint8)
    bgr[:, :, 0], bgr[:, :, 1], bgr[:, :, 2] = 51, 102, 204  # B, G, R
    cams.frames["wrist"] = Image(bgr, clock.now(), "wrist", 1)
    bus, ex = executor_for(pol, clock, arm, cams)
    send(bus, ex)
    ex.tick()
    run(ex, clock, 0.04)
    rgb = np.array([204, 102, 51]) / 255.0
    want_img = (rgb - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225]
    got = np.array([arm.commands[0][1][j] for j in JOINT_NAMES])
    np.testing.assert_allclose(got[:3], want_img, rtol=1e-5)
    np.testing.assert_allclose(got[3:], arm.q[:3], rtol=1e-6)


# -------------------------------------------------------------------------------------------
# chunk timing on the injected clock
# -------------------------------------------------------------------------------------------
class Counter:
    """A backend whose chunk k's actions are 10 * k + index (shoulder_pan only)."""

    name = "counter"

    def __init__(self, chunk: int) -> None:
        self.calls = 0
        self.chunk = chunk

    def run(self, feeds):
        self.calls += 1
        rows = np.zeros((1, self.chunk, 6))
        rows[0, :, 0] = [10 * self.calls + i for i in range(self.chunk)]
        return {"action": rows}

    def close(self) -> None:
        pass


def chunk_runner(late: str, chunk: int = 4, horizon: int = 2):
    backend = Counter(chunk)
    worker = ManualWorker(backend)
    spec = ChunkSpec(period_s=0.1, chunk_length=chunk, execution_horizon=horizon,
                     late_chunk=late)

    def decode(res):
        return [{"shoulder_pan": float(v)} for v in res.outputs["action"][0, :, 0]]

    runner = ChunkRunner(spec, worker, lambda: ({}, {}), decode)
    return runner, worker


def drive(runner, t0, t1, log):
    t = t0
    while t <= t1 + 1e-9:
        d = runner.tick(round(t, 6))
        if d.kind:
            log.append((round(t, 2), d.kind, d.targets.get("shoulder_pan")))
        t += PERIOD


def test_actions_fall_due_one_period_apart_and_the_next_chunk_takes_over_at_the_horizon():
    runner, worker = chunk_runner("hold")
    runner.start(0.0)
    assert worker.submits == [0.0]
    log: list = []
    drive(runner, 0.0, 0.04, log)
    assert log == []  # nothing is commanded before the first chunk arrives
    worker.release()
    drive(runner, 0.06, 0.30, log)
    # chunk 1 active from 0.06: action 0 at 0.06, action 1 at 0.16; the next chunk is asked
    # for when the horizon's last action falls due (0.16) ...
    assert worker.submits == [0.0, 0.16]
    assert log[:2] == [(0.06, "send", 10.0), (0.16, "send", 11.0)]
    worker.release()
    drive(runner, 0.32, 0.60, log)
    # ... and takes over at the horizon (0.26 is when chunk 1 would have run its action 2)
    assert (0.26, "send", 20.0) not in log  # released after 0.26: late at 0.26
    assert log[2:] == [(0.26, "hold", None), (0.32, "send", 20.0), (0.42, "send", 21.0),
                       (0.52, "hold", None)]
    assert runner.late == 2 and runner.chunks == 2


def test_a_chunk_ready_in_time_takes_over_exactly_at_the_horizon():
    runner, worker = chunk_runner("hold")
    runner.start(0.0)
    worker.release()
    log: list = []
    drive(runner, 0.0, 0.16, log)
    worker.release()  # answered before the horizon ends
    drive(runner, 0.18, 0.40, log)
    assert [e for e in log if e[1] == "send"][:4] == [(0.0, "send", 10.0), (0.1, "send", 11.0),
                                                      (0.2, "send", 20.0), (0.3, "send", 21.0)]
    assert runner.late == 1  # only the third chunk (never released) was late, at 0.4


def test_late_chunk_hold_holds_once_until_the_chunk_arrives():
    runner, worker = chunk_runner("hold")
    runner.start(0.0)
    worker.release()
    log: list = []
    drive(runner, 0.0, 0.50, log)  # the second chunk never comes in this stretch
    assert log == [(0.0, "send", 10.0), (0.1, "send", 11.0), (0.2, "hold", None)]
    worker.release()
    drive(runner, 0.52, 0.52, log)
    assert log[-1] == (0.52, "send", 20.0)


def test_late_chunk_finish_chunk_runs_the_current_chunk_to_its_end_then_holds():
    runner, worker = chunk_runner("finish_chunk")
    runner.start(0.0)
    worker.release()
    log: list = []
    drive(runner, 0.0, 0.60, log)
    assert log == [(0.0, "send", 10.0), (0.1, "send", 11.0), (0.2, "send", 12.0),
                   (0.3, "send", 13.0), (0.4, "hold", None)]
    assert len(worker.submits) == 2  # one request out, never a second while it is busy
    worker.release()
    drive(runner, 0.62, 0.62, log)
    assert log[-1] == (0.62, "send", 20.0)


def test_the_thread_worker_never_blocks_the_tick_and_is_joined_on_close():
    gate, entered = threading.Event(), threading.Event()

    class Slow(Counter):
        def run(self, feeds):
            entered.set()
            gate.wait(10)
            return super().run(feeds)

    worker = ThreadWorker(Slow(2))
    spec = ChunkSpec(0.1, 2, 1, "hold")
    runner = ChunkRunner(spec, worker, lambda: ({}, {}), lambda r: [
        {"shoulder_pan": float(v)} for v in r.outputs["action"][0, :, 0]])
    runner.start(0.0)
    assert entered.wait(10)
    # the backend is stuck: ticks go on returning at once, commanding nothing
    assert [runner.tick(0.02 * i).kind for i in range(1, 50)] == [""] * 49
    gate.set()
    assert worker.wait_idle(10)  # the call finishes on its own thread
    assert runner.tick(1.0).kind == "send"
    worker.close()
    assert not worker.alive


# -------------------------------------------------------------------------------------------
# how it ends
# -------------------------------------------------------------------------------------------
class Home(Skill):
    description = "Carry it home (test)."

    def start(self) -> None:
        self.end = self.ctx.clock.now() + 0.3

    def tick(self) -> None:
        if self.ctx.clock.now() >= self.end:
            self.finish(reason="home")


def policy_harness(tmp_path, script):
    constant_model(tmp_path / "m.onnx", 6, np.full((2, 6), 0.1))
    agent = {"description": "Pick with the test policy.", "max_duration_s": 20.0}
    pol = load_policy(policy_yaml(tmp_path, agent=agent), cache=False)
    h = make_harness(script, tools={"pick": Tool(PolicySkill, {"policy": pol,
                                                               "inference": "inline"}),
                                    "home_holding": Tool(Home)},
                     ports={"arm": None})
    arm = FakeArm(h.clock)
    h.executor.ports = {**h.executor.ports, "arm": arm}
    h.events = []
    h.bus.subscribe(names.SKILL_EVENTS, names.T_AGENT_EVENT, callback=h.events.append,
                    qos=QoS(depth=500))
    h.verdicts = h.bus.publisher(names.MONITOR_VERDICTS, names.T_MONITOR_VERDICT)
    return h, arm


def verdict(h, aid, decision, then=""):
    h.verdicts.publish(MonitorVerdict(aid, "pick", "progress", "holding", 0.95, decision,
                                      f"rule {decision}", h.clock.now(), then, "monitor",
                                      h.planner.generation))


def started(h, tool):
    return [e.data for e in h.events if e.kind == "skill_started" and e.data["skill"] == tool]


def woken(h, why):
    return [c for c in h.provider.calls
            if [m for m in c.request.messages if m.role == "user"][-1].text().startswith(
                f"[woken: {why}]")]


def ended(h, tool):
    return [e.data for e in h.events if e.kind == "skill_ended" and e.data["skill"] == tool]


def test_the_spec_comes_from_the_agent_block_and_never_ends_by_itself(tmp_path):
    constant_model(tmp_path / "m.onnx", 6, np.zeros((2, 6)))
    spec = Tool(PolicySkill, {"policy": load_policy(policy_yaml(tmp_path), cache=False)}
                ).spec("pick")
    assert spec.ends_by_itself is False
    assert spec.description == "Run the test policy." and spec.max_duration_s == 5.0
    assert spec.image_points == ("point",) and spec.camera == "overhead"


def test_a_monitor_finish_ends_the_policy_and_then_runs_without_waking_the_planner(tmp_path):
    h, arm = policy_harness(tmp_path, [
        reply("plan", ("update_plan", {"steps": [
            {"description": "pick it", "tool": "pick", "args": {}},
            {"description": "carry it home", "tool": "home_holding", "args": {}},
            {"description": "check"}]}), ("pick", {})),
        reply("", ("finish_task", {"summary": "ok", "success": True}))])
    h.say("pick it")
    assert h.run_until(lambda: h.planner.actions, 5)
    aid = next(iter(h.planner.actions))
    h.runtime.run_for(1.0)
    assert arm.commands  # the policy is acting
    calls = len(h.provider.calls)
    verdict(h, aid, "finish", then="home_holding")
    assert h.run_until(lambda: started(h, "home_holding"), 5)
    assert ended(h, "pick")[0]["outcome"] == "succeeded"
    assert len(h.provider.calls) == calls  # the follow-up started without a planner turn
    assert started(h, "home_holding")[0]["by"] == "agent"
    assert h.run_until(lambda: ended(h, "home_holding"), 5)
    n = len(arm.commands)
    h.runtime.run_for(0.5)
    assert len(arm.commands) == n  # the policy stopped commanding
    assert arm.holds  # and left the arm holding


def test_a_monitor_fail_rule_wakes_the_planner_once(tmp_path):
    h, arm = policy_harness(tmp_path, [
        reply("", ("pick", {})), reply("seen"), reply("still"), reply("more")])
    h.say("pick it")
    assert h.run_until(lambda: h.planner.actions, 5)
    aid = next(iter(h.planner.actions))
    h.runtime.run_for(0.5)
    verdict(h, aid, "fail")
    verdict(h, aid, "fail")  # a second fail verdict for the same action changes nothing
    assert h.run_until(lambda: ended(h, "pick"), 5)
    h.runtime.run_for(2.0)
    assert ended(h, "pick")[0]["outcome"] == "failed"
    assert len(woken(h, "monitor_flag")) == 1  # one wake for the fail, never one per verdict


def test_max_duration_stops_it_at_the_deadline(tmp_path):
    constant_model(tmp_path / "m.onnx", 6, np.full((2, 6), 0.1))
    agent = {"description": "d", "max_duration_s": 1.0}
    pol = load_policy(policy_yaml(tmp_path, agent=agent), cache=False)
    clock = FakeClock()
    arm = FakeArm(clock)
    bus, ex = executor_for(pol, clock, arm)
    handle = send(bus, ex)
    ex.tick()
    t0 = clock.now()
    for _ in range(49):
        clock.advance(PERIOD)
        ex.tick()
    clock.set(t0 + 1.0 - 1e-6)
    ex.tick()
    assert handle.status == GoalStatus.EXECUTING
    clock.set(t0 + 1.0)
    ex.tick()
    assert handle.status != GoalStatus.EXECUTING
    assert handle.result.outcome == "timed_out"
    assert arm.holds and arm.holds[-1] == pytest.approx(t0 + 1.0)


def test_an_operator_takeover_stops_it_at_the_next_tick_and_joins_inference(tmp_path):
    constant_model(tmp_path / "m.onnx", 6, np.full((2, 6), 0.1))
    pol = load_policy(policy_yaml(tmp_path), cache=False)
    clock = FakeClock()
    arm = FakeArm(clock)
    bus, ex = executor_for(pol, clock, arm, inference="thread")
    handle = send(bus, ex)
    ex.tick()
    skill = ex.running["a1"].skill
    run(ex, clock, 0.1)
    bus.publisher(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT).publish(
        OperatorEvent("takeover", {}, clock.now()))
    n = len(arm.commands)
    clock.advance(PERIOD)
    ex.tick()
    assert handle.result.outcome == "stopped"
    assert len(arm.commands) == n and arm.holds[-1] == clock.now()
    assert not skill.worker.alive  # the inference thread was joined


# -------------------------------------------------------------------------------------------
# the safety path: every action goes through the driver's limits
# -------------------------------------------------------------------------------------------
def sim_rig():
    from solarian_agent.arm.kinematics import ArmModel
    from solarian_agent.sim.component import SimWorldComponent
    from solarian_agent.sim.render import Renderer, VisualStyle
    from solarian_agent.sim.world import World
    from solarian_agent.skills.ports import ArmPort

    clock, bus = FakeClock(), Bus()
    model = ArmModel.default()
    world = World(model)
    sim = SimWorldComponent(bus, clock, world, Renderer(model, VisualStyle()))
    sim.publish_now()
    return clock, bus, world, sim, ArmPort(bus, clock, model)


def test_actions_beyond_the_limits_are_clamped_by_the_drivers_safety_layer(tmp_path):
    rows = np.array([[3.5, -0.6, 0.7, 1.1, 0.0, 0.2]] * 2)  # pan far past its limit
    constant_model(tmp_path / "m.onnx", 6, rows)
    pol = load_policy(policy_yaml(tmp_path), cache=False)
    clock, bus, world, sim, arm = sim_rig()
    ex = SkillExecutor(bus, clock, {"pol": Tool(PolicySkill, {"policy": pol,
                                                             "inference": "inline"})},
                       {"arm": arm})
    handle = send(bus, ex)
    pans = []
    for _ in range(150):
        clock.advance(PERIOD)
        sim.step(PERIOD)
        ex.tick()
        pans.append(world.q[0])
    lim = sim.limits.joint("shoulder_pan")
    grip = sim.limits.joint("gripper")
    assert handle.status == GoalStatus.EXECUTING
    assert max(pans) == pytest.approx(lim.upper)  # reached the limit, never beyond
    steps = np.abs(np.diff([0.0, *pans]))
    assert steps.max() <= min(lim.max_velocity * PERIOD, sim.limits.max_step) + 1e-9
    assert world.q[5] <= grip.upper + 1e-12


def test_a_non_finite_action_is_refused_and_fails_the_skill(tmp_path):
    rows = np.array([[np.nan, 0, 0, 0, 0, 0]] * 2)
    constant_model(tmp_path / "m.onnx", 6, rows)
    pol = load_policy(policy_yaml(tmp_path), cache=False)
    clock, bus, world, sim, arm = sim_rig()
    received = sim.commands_received
    ex = SkillExecutor(bus, clock, {"pol": Tool(PolicySkill, {"policy": pol,
                                                             "inference": "inline"})},
                       {"arm": arm})
    handle = send(bus, ex)
    for _ in range(5):
        clock.advance(PERIOD)
        sim.step(PERIOD)
        ex.tick()
    assert handle.result.outcome == "failed"
    assert "non-finite" in handle.result.reason
    assert sim.commands_received == received + 1  # only the hold; the NaN never left


# -------------------------------------------------------------------------------------------
# start-up failures name the reason
# -------------------------------------------------------------------------------------------
def test_a_missing_policy_file_fails_at_load_naming_it(tmp_path):
    with pytest.raises(ConfigError, match=r"policy\.file.*'gone\.onnx' not found"):
        load_policy(policy_yaml(tmp_path, model="gone.onnx"), cache=False)


def test_a_missing_onnxruntime_fails_at_load_naming_the_package(tmp_path, monkeypatch):
    import sys

    constant_model(tmp_path / "m.onnx", 6, np.zeros((2, 6)))
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(PolicyLoadError, match="pip install onnxruntime"):
        load_policy(policy_yaml(tmp_path), cache=False)


@pytest.mark.parametrize("change, match", [
    ({"observation__state": {"input": "obs", "joints": list(JOINT_NAMES)}},
     "no input 'obs'; its inputs: state"),
    ({"observation__state": {"input": "state", "joints": list(JOINT_NAMES), "goal": "point"}},
     r"input 'state' has shape \['batch', 6\]; the config builds \[batch, 8\]"),
    ({"action__output": "act"}, "no output 'act'"),
    ({"chunking": {"chunk_length": 3, "execution_horizon": 1}},
     r"has shape \['batch', 2, 6\]; the config reads \[batch, 3, 6\]"),
])
def test_a_model_that_does_not_match_the_config_fails_at_load(tmp_path, change, match):
    constant_model(tmp_path / "m.onnx", 6, np.zeros((2, 6)))
    y = policy_yaml(tmp_path)
    import yaml

    doc = yaml.safe_load(y.read_text())
    for k, v in change.items():
        if "__" in k:
            s, key = k.split("__")
            doc[s][key] = v
        else:
            doc[k] = v
    y.write_text(yaml.safe_dump(doc))
    with pytest.raises(PolicyLoadError, match=match):
        load_policy(y, cache=False)


@pytest.mark.parametrize("change, where", [
    ({"policy": {"backend": "tflite", "file": "m.onnx"}}, "policy.backend"),
    ({"chunking": {"chunk_length": 2, "execution_horizon": 3}}, "chunking.execution_horizon"),
    ({"chunking": {"late_chunk": "wait"}}, "chunking.late_chunk"),
    ({"action": {"output": "a", "joints": ["elbow"]}}, r"action.joints\[0\]"),
    ({"agent": {"description": "d"}}, "agent.max_duration_s"),
])
def test_a_bad_config_names_its_yaml_path(tmp_path, change, where):
    import yaml

    constant_model(tmp_path / "m.onnx", 6, np.zeros((2, 6)))
    y = policy_yaml(tmp_path)
    doc = yaml.safe_load(y.read_text())
    doc.update(change)
    y.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match=f"policy.yaml:{where}"):
        load_policy(y, cache=False)


def lerobot_dir(tmp_path, features):
    import json

    d = tmp_path / "pretrained_model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({
        "type": "act", "chunk_size": 4, "input_features": features,
        "output_features": {"action": {"type": "ACTION", "shape": [6]}}}))
    (d / "model.safetensors").write_bytes(b"\0" * 16)
    return d


def test_lerobot_without_the_package_fails_naming_the_extra(tmp_path, monkeypatch):
    import sys

    lerobot_dir(tmp_path, {"observation.state": {"type": "STATE", "shape": [6]}})
    monkeypatch.setitem(sys.modules, "lerobot", None)
    y = policy_yaml(tmp_path, policy__backend="lerobot", policy__file="pretrained_model")
    with pytest.raises(PolicyLoadError, match=r"pip install 'solarian_agent\[lerobot\]'"):
        load_policy(y, cache=False)


def test_lerobot_input_features_that_the_config_does_not_build_fail_at_load(tmp_path):
    lerobot_dir(tmp_path, {"observation.state": {"type": "STATE", "shape": [6]},
                           "observation.images.front": {"type": "VISUAL",
                                                        "shape": [3, 96, 96]}})
    y = policy_yaml(tmp_path, policy__backend="lerobot", policy__file="pretrained_model")
    with pytest.raises(PolicyLoadError,
                       match="reads input feature 'observation.images.front', which the "
                             "config does not build"):
        load_policy(y, cache=False)


# -------------------------------------------------------------------------------------------
# the shipped policy
# -------------------------------------------------------------------------------------------
def test_the_shipped_pick_policy_loads_and_binds_pick_object():
    from solarian_agent.system import tidy_tools

    tools = tidy_tools(pick="policy", inference="inline")
    spec = tools["pick_object"].spec("pick_object")
    assert tools["pick_object"].skill is PolicySkill
    assert spec.ends_by_itself is False and spec.image_points == ("point",)
    rules = [r for q in spec.monitor for r in q.get("when", [])]
    assert any(r["do"] == "finish" and r.get("then") == "home_holding" for r in rules)
    with pytest.raises(ConfigError, match="pick: 'learned' is not allowed"):
        tidy_tools(pick="learned")


def test_the_bench_tells_how_each_pick_ended():
    from solarian_agent.benchmarks.episodes import pick_endings
    from solarian_agent.benchmarks.tidy import pick_rows
    from solarian_agent.core.messages import AgentEvent

    def ev(outcome, reason, s, skill="pick_object"):
        return AgentEvent("", "skill_ended", {"skill": skill, "outcome": outcome,
                                              "reason": reason, "duration_s": s})

    events = [ev("succeeded", "monitor: progress=holding", 4.0),
              ev("timed_out", "ran its limit of 20 s", 20.0),
              ev("failed", "monitor: progress=failed", 7.0),
              ev("succeeded", "holding the object", 3.0),
              ev("succeeded", "arrived", 1.0, skill="home_holding")]
    ends = pick_endings(events)
    assert ends == [("monitor finish", 4.0), ("timeout", 20.0), ("monitor fail", 7.0),
                    ("succeeded", 3.0)]
    runs = {"scripted": [{"success": True, "picks": [("succeeded", 3.0)]}],
            "policy": [{"success": False, "picks": ends}]}
    rows = {r["name"]: r for r in pick_rows(runs)}
    assert rows["policy pick: tidy success"]["value"] == 0.0
    assert rows["policy pick: tidy success"]["baseline"] == "scripted pick 100.0 %"
    assert rows["policy pick: seconds per pick_object"]["value"] == 8.5
    assert "monitor finish 1" in rows["policy pick: seconds per pick_object"]["note"]


def test_the_goal_is_the_trackers_centroid_taken_when_the_action_starts(tmp_path):
    from solarian_agent.core.executor import TrackerResult
    from solarian_agent.skills.policy.observations import ObservationBuilder

    class Trackers:
        def __init__(self) -> None:
            self.mask = np.zeros((100, 100), bool)
            self.mask[40:50, 60:70] = True  # centroid (64.5, 44.5)

        def result(self, field):
            assert field == "overhead.target"
            return TrackerResult(0.01, None, self.mask)

    constant_model(tmp_path / "m.onnx", 8, np.zeros((2, 6)))
    cfg = load_policy(policy_yaml(tmp_path, goal="tracker_centroid"), cache=False).config
    clock = FakeClock()
    trackers = Trackers()
    b = ObservationBuilder(cfg, {"arm": FakeArm(clock), "cameras": FakeCameras(),
                                 "trackers": trackers}, {"point": [10, 20]})
    first = b.build()[0]["state"][0]
    np.testing.assert_allclose(first[6:], [0.0645, 0.0445], rtol=1e-6)
    trackers.mask = np.roll(trackers.mask, 30, axis=1)  # the mask slides onto the fingers
    np.testing.assert_allclose(b.build()[0]["state"][0], first)
    no_mask = ObservationBuilder(cfg, {"arm": FakeArm(clock), "cameras": FakeCameras()},
                                 {"point": [10, 20]})
    np.testing.assert_allclose(no_mask.build()[0]["state"][0][6:], [0.01, 0.02], rtol=1e-6)
