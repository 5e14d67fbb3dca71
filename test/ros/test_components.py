"""The node cores without ROS: what each node shell runs on its private bus."""

from __future__ import annotations

import time

import numpy as np
import pytest

from solarian_agent.core import names
from solarian_agent.core.clock import FakeClock, SystemClock
from solarian_agent.core.errors import ConfigError
from solarian_agent.core.messages import AgentState, CameraInfo, Image, JointCommand
from solarian_agent.ros import components as C


def test_arm_core_lifecycle_on_the_simulated_servo_bus():
    core = C.build_arm_core(SystemClock(), simulated_bus=True)
    arm = core.parts["arm"]
    js = core.bus.subscribe(names.JOINT_STATES, names.T_JOINT_STATE)
    diag = core.bus.subscribe(names.DIAGNOSTICS, names.T_DIAGNOSTICS)
    cmd = core.bus.publisher(names.JOINT_COMMANDS, names.T_JOINT_COMMAND)

    def send(v: float, joint: str = "elbow_flex") -> None:
        cmd.publish(JointCommand(0.0, (joint,), (v,)))

    send(0.5)
    assert arm.refused == 1 and "not active" in arm.last_refusal  # unconfigured
    assert core.bus.call(names.ESTOP, {})["success"] is False
    try:
        arm.configure()
        # simulated servos answer from a thread of this process: not a real bus's 25 ms
        assert arm.arm.config.timeout_s == C.SIMULATED_BUS_TIMEOUT_S
        arm.step()
        assert js.latest() is not None and len(js.latest().name) == 6
        assert diag.latest()["status"][0]["name"] == "arm"
        send(0.5)
        assert arm.refused == 2  # configured but inactive: holds, refuses
        arm.activate()
        for _ in range(60):
            send(0.5)
            arm.step()
            time.sleep(0.01)
        assert js.latest().as_dict()["elbow_flex"] == pytest.approx(0.5, abs=0.02)
        ops = core.bus.subscribe(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT)
        assert core.bus.call(names.ESTOP, {}) == {"success": True, "message": "e-stop latched"}
        send(0.0)
        assert "e-stop" in arm.last_refusal
        arm.step()
        assert ops.take().kind == "estop"  # announced, so the skill servers stop their skills
        assert core.bus.call(names.ESTOP_RESET, {})["success"] is True
        arm.step()
        assert ops.take().kind == "estop_reset"
        send(0.0, joint="nope")
        assert "unknown joint" in arm.last_refusal
        assert core.bus.call("set_torque", {"data": False})["success"] is True
        arm.error("test fault")  # the safe state: e-stop latched
        assert arm.controller.latest.diagnostics.estop
        arm.deactivate()
    finally:
        arm.cleanup()
    assert arm.controller is None


def test_arm_core_a_servo_that_cuts_out_is_an_estop_naming_it():
    """The simulated servo overheats and drops its torque by itself: the arm node latches the
    e-stop and announces it with the servo and the cause; /diagnostics says which servo."""
    core = C.build_arm_core(SystemClock(), simulated_bus=True)
    arm = core.parts["arm"]
    ops = core.bus.subscribe(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT)
    try:
        arm.configure()
        assert arm.controller.health is not None  # the node watches servo health
        arm.activate()
        arm.step()
        arm._sim.servos[3].temperature_c = 85.0  # past its own 70 °C cut-out
        for _ in range(3):
            arm.step()
        ev = ops.take()
        assert ev.kind == "estop"
        assert ev.detail["reason"].startswith("servo 3 (elbow_flex) reports overheat")
        assert not arm._sim.torque(3)
        d = C.arm_diagnostics(arm.controller.latest, 0.0)
        elbow = next(s for s in d["status"] if s["name"] == "arm/elbow_flex")
        assert elbow["level"] == 2 and "tripped: overheat" in elbow["message"]
        assert elbow["values"]["temperature_limit_c"] == 70.0
    finally:
        arm.cleanup()


def test_camera_core_plays_a_video_file(tmp_path):
    import cv2

    path = str(tmp_path / "v.avi")
    w = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"MJPG"), 30.0, (64, 48))
    for i in range(5):
        w.write(np.full((48, 64, 3), 40 * i, np.uint8))
    w.release()
    core = C.build_camera_core(SystemClock(), "cam", path, frame_id="cam_optical")
    imgs = core.bus.subscribe(names.image_topic("cam"), names.T_IMAGE, qos=C.graph.SENSOR_DATA)
    info = core.bus.subscribe(names.camera_info_topic("cam"), names.T_CAMERA_INFO)
    core.start()
    try:
        for _ in range(8):  # past the end: the file starts again
            core.loops[0].fn()
        got = imgs.latest()
        assert isinstance(got, Image) and got.data.shape == (48, 64, 3)
        assert got.frame_id == "cam_optical" and imgs.received >= 6
        ci = info.latest()
        assert isinstance(ci, CameraInfo) and (ci.width, ci.height) == (64, 48)
        assert ci.k[2] == 32.0  # the guessed intrinsics put the centre mid-image
    finally:
        core.shutdown()


def test_sim_core_steps_and_serves():
    cfg = C.load_config()
    core = C.build_sim_core(FakeClock(), cfg, seed=3, grasp_fail_p=0.5)
    truth = core.bus.subscribe(names.SIM_TRUTH, C.graph.T_SIM_TRUTH)
    img = core.bus.subscribe(names.image_topic("overhead"), names.T_IMAGE)
    core.start()
    for _ in range(10):
        core.loops[0].fn()
    assert isinstance(truth.latest(), dict) and img.latest() is not None
    assert core.bus.call(names.SIM_RESET, {"seed": 9})["seed"] == 9
    bad = core.bus.call(names.SIM_INJECT_FAULT, {"kind": "nope"})
    assert bad["ok"] is False and "nope" in bad["message"]
    assert core.parts["world"].faults.config.grasp_fail_p == 0.5


def test_load_config_applies_and_validates_overrides(tmp_path):
    cfg = C.load_config(overrides={"cameras": ["overhead"], "control_period_s": 0.05})
    assert cfg.cameras == ["overhead"] and cfg.control_period_s == 0.05
    assert C.load_config(overrides={"cameras": None}).cameras == ["overhead", "wrist"]
    with pytest.raises(ConfigError, match="agent.control_period_s"):
        C.load_config(overrides={"control_period_s": 5.0})
    bad = tmp_path / "c.yaml"
    bad.write_text("agent:\n  monitor: {period_s: -1}\n")
    with pytest.raises(ConfigError, match="agent.monitor.period_s"):
        C.load_config(str(bad))
    with pytest.raises(ConfigError, match="file not found"):
        C.load_config(str(tmp_path / "missing.yaml"))


def test_planner_core_publishes_state_at_start_and_refuses_observe_without_vision():
    cfg = C.load_config()
    core = C.build_planner_core(FakeClock(), cfg, planner_name="rules")
    state = core.bus.subscribe(names.AGENT_STATE, names.T_AGENT_STATE)
    core.start()
    assert isinstance(state.latest(), AgentState) and state.latest().status == "idle"
    r = core.bus.call(names.OBSERVE_SCENE, {"focus": "the cup"})
    if "error" in r and r.get("ok") is False:
        assert r["error"]
    core.shutdown()


def test_plan_markers_map_points_onto_the_table():
    st = AgentState(2, "running", "tidy", (
        {"step": 1, "description": "pick", "status": "done", "tool": "pick_object",
         "args": {"point": [320, 240]}},
        {"step": 2, "description": "check", "status": "pending"},
        {"step": 3, "description": "bad", "status": "pending", "tool": "pick_object",
         "args": {"point": "x"}}), (), (), 5.0)
    calls = []

    def unproject(cam, u, v):
        calls.append((cam, u, v))
        return (0.3, 0.0, 0.0)

    ms = C.plan_markers(st, unproject, {"pick_object": ("point",)},
                        {"pick_object": "overhead"})
    assert ms[0]["delete_all"] and calls == [("overhead", 320.0, 240.0)]
    spheres = [m for m in ms if m.get("type") == "sphere"]
    assert len(spheres) == 1 and spheres[0]["position"][0] == 0.3
    text = [m for m in ms if m.get("ns") == "plan" and m.get("type") == "text"][0]["text"]
    assert "1. [done] pick" in text and "2. [pending] check" in text
    assert C.plan_markers(st, None, {}, {})[-1]["type"] == "text"


def test_markers_follow_the_planner_state():
    cfg = C.load_config()
    core = C.build_planner_core(FakeClock(), cfg, planner_name="rules")
    markers = core.bus.subscribe(names.AGENT_MARKERS, names.T_MARKERS)
    core.start()
    assert markers.latest() and markers.latest()[-1]["text"].startswith("[idle]")
    core.shutdown()


def test_tool_sets():
    assert "pick_object" in C.tool_names("tidy") and "wait" in C.tool_names("toy")
    with pytest.raises(ConfigError, match="tool_set"):
        C.tool_set("nope")


def test_skills_core_trackers_see_the_cameras_from_the_start():
    """The first pick after start-up was refused ("tracker overhead.target failed to start: no
    frame from camera 'overhead' yet"): the trackers subscribed to a camera only when first
    seeded, so the frames that came before were never theirs."""
    cfg = C.load_config(overrides={"cameras": ["overhead"]})
    core = C.build_skills_core(SystemClock(), cfg, tools="tidy")
    frame = np.zeros((48, 64, 3), np.uint8)
    frame[20:30, 30:40] = (0, 0, 255)
    pub = core.bus.publisher(names.image_topic("overhead"), names.T_IMAGE)
    pub.publish(Image(frame, 1.0, "overhead_camera_optical", 1))
    r = core.bus.call(names.TRACKER_SEED, {"field": "overhead.target", "camera": "overhead",
                                           "point": (35.0, 25.0)})
    assert r["ok"], r["reason"]
    assert r["box"] == (30, 20, 40, 30)


def test_the_pick_launch_argument_binds_pick_object_to_the_learned_policy():
    """``pick:=policy``: the launch files pass it to the skills node, whose core binds
    ``pick_object`` to the shipped pick policy (a bad value is named before anything starts)."""
    from solarian_agent.ros import launch_plan
    from solarian_agent.skills.arm_skills import PickSkill
    from solarian_agent.skills.policy import PolicySkill

    for kind in ("sim", "robot"):
        assert "pick" in {a.name for a in launch_plan.LAUNCH_ARGS[kind]}
    planned = launch_plan.sim_plan({"pick": "policy"}, C.share_dir())
    (skills,) = [p for p in planned if p.executable == "skills_node"]
    assert skills.parameters["pick"] == "policy"
    planned = launch_plan.sim_plan({}, C.share_dir())
    (skills,) = [p for p in planned if p.executable == "skills_node"]
    assert skills.parameters["pick"] == "scripted"
    with pytest.raises(ValueError, match="pick:='learned'"):
        launch_plan.sim_plan({"pick": "learned"}, C.share_dir())
    cfg = C.load_config("")
    core = C.build_skills_core(FakeClock(), cfg, pick="policy")
    ex = core.parts["executor"]
    assert ex.tools["pick_object"].skill is PolicySkill
    assert ex.all_specs["pick_object"].ends_by_itself is False
    core = C.build_skills_core(FakeClock(), cfg)
    assert core.parts["executor"].tools["pick_object"].skill is PickSkill


def test_a_servo_trip_reaches_the_planner_and_its_episode_log_naming_the_servo(tmp_path):
    """End to end without ROS: the arm node's core on the simulated servo bus trips on an
    overheating servo; its operator event, carried to the planner's bus as the ROS graph
    carries it, pauses the run and lands in the episode log with the servo and the cause."""
    from solarian_agent.core.episode_log import read_events
    from solarian_agent.core.messages import OperatorEvent
    from solarian_agent.models.scripted import reply
    from solarian_agent.testing.harness import make_harness

    h = make_harness([reply("", ("wait", {"seconds": 30}))], log_root=tmp_path)
    core = C.build_arm_core(SystemClock(), simulated_bus=True)
    arm = core.parts["arm"]
    to_planner = h.bus.publisher(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT)
    core.bus.subscribe(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT,
                       callback=lambda ev: to_planner.publish(
                           OperatorEvent(ev.kind, dict(ev.detail))))
    try:
        arm.configure()
        arm.activate()
        h.say("wait a while")
        h.runtime.run_for(1.0)
        assert h.planner.status == "running"
        arm._sim.servos[3].temperature_c = 85.0  # past its own 70 °C cut-out
        for _ in range(3):
            arm.step()
        h.runtime.run_for(0.5)
        assert h.planner.status == "paused"
    finally:
        arm.cleanup()
    events = read_events(next(tmp_path.rglob("events.jsonl")))
    trip = next(e for e in events if e["kind"] == "operator_takeover")
    assert trip["action"] == "estop"
    assert trip["detail"]["reason"].startswith("servo 3 (elbow_flex) reports overheat")
    assert any(e["kind"] == "run_paused" and "elbow_flex" in e["reason"] for e in events)


def _arm_at_home(core, bus):
    """The arm core configured, active, and brought home by a streamed command (as teleop)."""
    from solarian_agent.arm.kinematics import HOME, JOINT_NAMES

    arm = core.parts["arm"]
    arm.configure()
    arm.activate()
    cmd = bus.publisher(names.JOINT_COMMANDS, names.T_JOINT_COMMAND)
    for _ in range(150):
        cmd.publish(JointCommand(0.0, tuple(JOINT_NAMES), tuple(float(v) for v in HOME)))
        arm.step()
        time.sleep(0.01)
    return arm


@pytest.mark.parametrize("keep_alive", [True, False])
def test_a_skill_motion_longer_than_the_watchdog_reaches_its_target_on_the_real_arm_path(
        keep_alive: bool):
    """A waypoint is commanded once; the arm's controller drops a target whose commands
    stopped for 0.08 s and ramps to rest.  The skills' arm port sends the running motion's
    target again, so a 1 rad turn (about 1 s at the pan's speed limit) gets there; without it
    the arm stops
    short, held by the watchdog, as a real SO-101 would."""
    from solarian_agent.arm.kinematics import ArmModel
    from solarian_agent.skills.ports import ArmPort

    clock = SystemClock()
    core = C.build_arm_core(clock, simulated_bus=True)
    port = ArmPort(core.bus, clock, ArmModel.default())
    try:
        arm = _arm_at_home(core, core.bus)
        start = port.q()[0]
        port.command({"shoulder_pan": float(start + 1.0)})
        t0 = time.monotonic()
        while time.monotonic() - t0 < 3.0:
            if keep_alive:
                port.keep_alive()
            arm.step()
            time.sleep(0.01)
        reached = port.q()[0] - start
    finally:
        core.parts["arm"].cleanup()
    if keep_alive:
        assert reached == pytest.approx(1.0, abs=0.02)
    else:
        # moved for the watchdog's 0.08 s and its ramp to rest, then held: far short of 1 rad
        assert 0.03 < reached < 0.4


def test_keep_alive_sends_the_newest_command_again_once_it_is_old():
    from solarian_agent.arm.kinematics import ArmModel
    from solarian_agent.core.transport import Bus
    from solarian_agent.skills.ports import COMMAND_REFRESH_S, ArmPort

    clock, bus = FakeClock(), Bus()
    sent = bus.subscribe(names.JOINT_COMMANDS, names.T_JOINT_COMMAND, qos=C.graph.RELIABLE)
    port = ArmPort(bus, clock, ArmModel.default())
    port.keep_alive()  # nothing commanded yet: nothing to send
    assert sent.take() is None
    port.command({"gripper": -0.1}, max_velocity=0.8)
    first = sent.take()
    clock.advance(COMMAND_REFRESH_S / 2)
    port.keep_alive()
    assert sent.take() is None  # fresh enough
    clock.advance(COMMAND_REFRESH_S)
    port.keep_alive()
    again = sent.take()
    assert (again.name, again.position, again.max_velocity) == \
        (first.name, first.position, first.max_velocity)
    assert again.stamp == pytest.approx(first.stamp + 1.5 * COMMAND_REFRESH_S)
    port.keep_alive()
    assert sent.take() is None  # the resent one is the newest now
