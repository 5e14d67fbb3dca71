"""``robot.launch.py``'s graph on real rclpy with simulated hardware: one camera node per
camera on a video file and the arm node on its simulated servo bus (a pseudo-terminal), with
the skills, monitor and planner, started from :func:`launch_plan.robot_plan` as the launch
file starts them.  Every node comes up under the name the launch file gives it, the cameras
publish their videos under the agent's camera names with the calibration files' intrinsics,
the arm is active, a skill goal runs, and a pick's image point becomes a table position
through the overhead camera's calibration file.  A skills node whose camera has no
calibration stops at start-up, naming the camera, the file and the command."""

from __future__ import annotations

import json
import threading

import cv2
import numpy as np
import pytest
from _rostest_util import NodeProcesses, Probe, video_file, wait_until

from solarian_agent.hw.camera.calibration import CameraCalibration, Extrinsics, rotation_angle_deg
from solarian_agent.hw.camera.model import CalibratedCamera
from solarian_agent.ros import launch_plan
from solarian_agent.ros.components import share_dir
from solarian_agent.testing.calibrations import write_sim_calibrations

pytestmark = pytest.mark.usefixtures("real_ros")


def _table_with_cup(path, size, cup):
    """A video of a plain table with a red disc at ``cup`` (u, v)."""
    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, size)
    for i in range(60):
        frame = np.full((size[1], size[0], 3), (60 + 5 * i) % 255, np.uint8)
        cv2.circle(frame, cup, 12, (30, 30, 210), -1)
        w.write(frame)
    w.release()
    return str(path)


CUP = (200, 100)


@pytest.fixture(scope="module")
def robot(real_ros, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("robot")
    cams = (f"overhead={_table_with_cup(tmp / 'o.avi', (320, 240), CUP)},"
            f"wrist={video_file(tmp / 'w.avi', (240, 180), step=3)}")
    # calibrated at 640x480 (the cameras deliver half that: K is scaled); the wrist camera has
    # intrinsics only (it moves with the arm; nothing points through it)
    write_sim_calibrations(tmp / "cameras")
    # this "robot's" overhead camera hangs 4 cm further forward than the simulator's: what
    # the skills compute shows which model they used
    over = CameraCalibration.load(tmp / "cameras" / "overhead.yaml")
    pose = over.extrinsics.base_from_camera
    pose[0, 3] += 0.04
    over.with_extrinsics(Extrinsics.from_matrix(pose, over.extrinsics.measurement,
                                                over.extrinsics.child_frame)).save(
        tmp / "cameras" / "overhead.yaml")
    plan = launch_plan.robot_plan({"cameras": cams, "simulated_bus": "true",
                                   "planner_provider": "rules",
                                   "robot_state_publisher": "false",
                                   "calibration_dir": str(tmp / "cameras")}, share_dir())
    g = NodeProcesses(tmp)
    g.start_plan(plan)
    p = Probe(g.domain)
    try:
        want = ["/camera_overhead", "/camera_wrist", "/arm", "/skills", "/monitor", "/planner"]
        missing = p.wait_for_nodes(want, 90.0)
        assert not missing, f"{missing}\n{g.outputs()}"
        assert g.procs["planner"].wait_for_output("planner running", 90.0), g.outputs()
        yield g, p
    finally:
        p.close()
        g.close()


def test_the_cameras_publish_their_videos_under_the_agents_camera_names(robot):
    g, p = robot
    for cam, size in (("overhead", (320, 240)), ("wrist", (240, 180))):
        (img,) = p.messages("sensor_msgs/msg/Image", f"{cam}/image_raw", "sensor")
        assert (img.width, img.height) == size
        (info,) = p.messages("sensor_msgs/msg/CameraInfo", f"{cam}/camera_info", "latched")
        assert info.header.frame_id == f"{cam}_camera_optical"
        # the calibration file's K (made at twice the size), scaled to the frames
        cal = CameraCalibration.load(g.workdir / "cameras" / f"{cam}.yaml")
        assert (info.width, info.height) == size
        assert info.k[0] == pytest.approx(cal.k[0] / 2) and info.k[4] == pytest.approx(
            cal.k[4] / 2)
        assert list(info.d) == pytest.approx(list(cal.d))


def test_the_arm_is_active_on_its_servo_bus(robot):
    g, p = robot
    state = p.call("lifecycle_msgs/srv/GetState", "arm/get_state")
    assert state.current_state.label == "active"
    (js,) = p.messages("sensor_msgs/msg/JointState", "joint_states")
    assert list(js.name)[-1] == "gripper"


def test_the_planner_sees_every_node_of_the_robot_up_the_arm_included(robot):
    """Every node beats on nodes/heartbeat (the arm node whatever its lifecycle state): the
    planner's agent/state lists each as up (a lost one would say lost)."""
    g, p = robot
    want = {"arm", "camera_overhead", "camera_wrist", "skills", "monitor"}

    def seen():
        got = p.messages("solarian_agent/msg/AgentState", "agent/state", "latched",
                         timeout_s=5.0)
        return {n.node: n.state for n in got[-1].nodes} if got else {}

    assert wait_until(lambda: want <= set(seen()), 30.0, 0.5), seen()
    assert all(seen()[n] == "up" for n in want), seen()


def test_a_skill_goal_runs_against_the_hardware_drivers(robot):
    g, p = robot
    client = p.action_client("skills/verify_state")
    res = p.result(p.send_goal(client, p.goal("verify_state", "{}", p.generation(), "r1")))
    assert res.result.outcome == "succeeded", res.result.reason
    assert "report" in json.loads(res.result.data_json)


def test_a_pick_points_through_the_overhead_calibration(robot):
    g, p = robot
    client = p.action_client("skills/pick_object")
    feedback: list = []
    gh = p.send_goal(client, p.goal("pick_object", json.dumps({"point": list(CUP)}),
                                    p.generation(), "r2"), feedback)
    got = threading.Event()
    for _ in range(100):  # the skill has planned its approach (it moves the arm): stop it
        if feedback or got.wait(0.1):
            break
    gh.cancel_goal_async()
    res = p.result(gh)
    data = json.loads(res.result.data_json)
    assert "target_mm" in data, (res.result.outcome, res.result.reason, data, feedback[:3])
    cal = CameraCalibration.load(g.workdir / "cameras" / "overhead.yaml")
    want = CalibratedCamera(cal).for_size(320, 240).unproject(*CUP)
    # the tracker's mask centre of the disc (within a pixel of it: ~2.4 mm at this scale)
    assert data["target_mm"] == pytest.approx([want[0] * 1000, want[1] * 1000], abs=3.0), \
        (res.result.outcome, res.result.reason)
    from solarian_agent.ros.components import skill_camera_models

    sim = skill_camera_models("sim", ["overhead"])["overhead"].unproject(2 * CUP[0] + 0.5,
                                                                         2 * CUP[1] + 0.5)
    assert data["target_mm"][0] - sim[0] * 1000 > 30  # not the simulator's camera


def test_a_skills_node_without_its_cameras_calibration_stops_naming_it(robot, tmp_path):
    g, p = robot
    empty = tmp_path / "no-calibrations"
    proc = g.start("skills_node", "skills_uncalibrated",
                   {"camera_models": "calibrated", "calibration_dir": str(empty),
                    "cameras": "overhead,wrist"})
    code = proc.wait(60.0)
    out = proc.output()
    assert code == 2, out
    assert f"camera 'overhead' has no calibration: {empty / 'overhead.yaml'}." in out
    assert "solarian-agent calibrate-camera intrinsics --camera overhead" in out
    del g.procs[proc.name]


def test_touch_calibration_over_ros(robot, tmp_path):
    """``calibrate_camera`` against the running graph: the test jogs the arm (joint commands
    to the arm node, which keeps its limits) onto six marks, three of them raised, presses
    Enter at each, then types each mark's pixel as the overhead camera (the simulator's pose,
    at the videos' 320x240) sees it.  The solved pose is that camera's, not the file's."""
    import subprocess
    import sys
    import time

    from solarian_agent.arm.kinematics import ArmModel
    from solarian_agent.testing.calibrations import sim_calibration

    g, p = robot
    sim_calibration("overhead", 320, 240).save(tmp_path / "overhead.yaml")  # no extrinsics
    true = sim_calibration("overhead")
    truth = CalibratedCamera(true).for_size(320, 240)
    model = ArmModel.default()
    tool = subprocess.Popen(
        [sys.executable, "-m", "solarian_agent.ros.calibrate_camera", "--camera", "overhead",
         "--dir", str(tmp_path)], env=g.env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        import queue

        from solarian_agent.ros.probe import ros_type

        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(ln) for ln in tool.stdout],
                         daemon=True).start()
        seen: list[str] = []

        def wait_for(text: str) -> None:
            end = time.monotonic() + 30.0
            while time.monotonic() < end:
                try:
                    seen.append(lines.get(timeout=1.0))
                except queue.Empty:
                    continue
                if text in seen[-1]:
                    return
            raise AssertionError(f"the tool never said {text!r}: {seen}")

        pub = p.publisher("solarian_agent/msg/JointCommand", "joint_commands")
        cmd_cls = ros_type("solarian_agent/msg/JointCommand")
        js_log = p.listen("sensor_msgs/msg/JointState", "joint_states")
        # table marks: the jogged tool point hovers 12 mm up, the jaw tips below it 6 mm up
        # (the workspace guard keeps the tips above its 5 mm floor); in an order whose
        # joint-space moves keep the SO-101's jaws above the floor (from the middle low mark
        # straight to the far raised one they dip under it, and the arm holds there)
        marks = [(0.16, -0.12, 0.012), (0.16, 0.12, 0.08), (0.24, 0.0, 0.012),
                 (0.21, -0.03, 0.08), (0.28, -0.10, 0.08), (0.28, 0.10, 0.012)]
        q = np.zeros(5)
        tips = []
        for xyz in marks:
            q, _ = model.ik_search(xyz, q0=q)
            target = dict(zip(model.joint_names, [*q, 0.0], strict=True))
            end = time.monotonic() + 30.0
            settled = 0
            while time.monotonic() < end and settled < 5:
                msg = cmd_cls(name=list(target), position=[float(v) for v in target.values()],
                              source="operator")
                pub.publish(msg)
                time.sleep(0.05)  # streaming commands at 20 Hz, as teleop does
                if js_log:
                    pos = dict(zip(js_log[-1].name, js_log[-1].position, strict=True))
                    near = max(abs(pos[n] - target[n]) for n in model.joint_names[:5])
                    settled = settled + 1 if near < 0.004 else 0
            assert settled >= 5, f"the arm did not reach {xyz}: {g.outputs()}"
            pos = dict(zip(js_log[-1].name, js_log[-1].position, strict=True))
            tips.append(model.fk([pos[n] for n in model.joint_names])[0])
            tool.stdin.write("\n")  # the tip is on the mark: Enter
            tool.stdin.flush()
            wait_for(f"mark {len(tips)}: x")  # recorded (the arm holds there until then)
        tool.stdin.write("d\n\n")  # done; "the arm is out of view"
        from solarian_agent.hw.camera.touch import on_table

        for u, v in truth.project_many(on_table(np.array(tips)))[0]:  # the marks themselves
            tool.stdin.write(f"{u:.2f} {v:.2f}\n")
        tool.stdin.close()
        assert tool.wait(60) is not None
        wait_for(f"saved {tmp_path / 'overhead.yaml'}")
        out = "".join(seen)
    finally:
        if tool.poll() is None:
            tool.kill()
    assert tool.returncode == 0, out
    assert "off (px)" in out and f"saved {tmp_path / 'overhead.yaml'}" in out
    got = CameraCalibration.load(tmp_path / "overhead.yaml")
    pos_mm = np.linalg.norm(np.array(got.extrinsics.translation_m)
                            - true.extrinsics.base_from_camera[:3, 3]) * 1000
    ang = rotation_angle_deg(got.extrinsics.base_from_camera, true.extrinsics.base_from_camera)
    print(f"touch calibration over ROS: pose error {pos_mm:.2f} mm, {ang:.3f} deg")
    assert pos_mm < 2.0 and ang < 0.5, (pos_mm, ang, out)  # clicks exact: the plumbing
    assert "(3 raised)" in got.extrinsics.measurement.method


def test_every_node_exits_0(robot):
    g, p = robot
    codes = g.close(timeout_s=30.0)  # a loaded 2-core CI machine stops 6 nodes slowly
    assert all(c == 0 for c in codes.values()), g.exit_problems(codes)
