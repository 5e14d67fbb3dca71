"""The robot's node cores with calibrated cameras, without ROS: the skills and the planner's
markers unproject through the calibration files (never the simulator's models), a camera
the skills point through without one stops the skills core naming it, and the camera core's
camera_info comes from the file, scaled to the frames' size."""

from __future__ import annotations

import numpy as np
import pytest
from _rostest_util import video_file

from solarian_agent.core import names
from solarian_agent.core.clock import FakeClock, SystemClock
from solarian_agent.core.messages import AgentState, CameraInfo, Image
from solarian_agent.hw.camera.calibration import Extrinsics
from solarian_agent.hw.camera.model import CalibratedCamera, MissingCalibrationError
from solarian_agent.ros import components as C
from solarian_agent.sim.camera import OVERHEAD
from solarian_agent.testing.calibrations import sim_calibration, write_sim_calibrations


def test_the_skills_point_through_the_calibration_files(tmp_path):
    write_sim_calibrations(tmp_path)
    cfg = C.load_config()
    core = C.build_skills_core(FakeClock(), cfg, camera_models="calibrated",
                               calibration_dir=str(tmp_path))
    cams = core.parts["executor"].ports["cameras"]
    assert isinstance(cams.models["overhead"], CalibratedCamera)
    assert "wrist" not in cams.models  # intrinsics only: not pointed through
    sim = C.skill_camera_models("sim", ["overhead"])["overhead"]
    for u, v in ((320, 240), (10, 15), (600, 470)):
        assert np.allclose(cams.unproject("overhead", u, v), sim.unproject(u, v), atol=1e-6)
    # the camera delivers half-size frames (same aspect ratio): the pixels are scaled
    pub = core.bus.publisher(names.image_topic("overhead"), names.T_IMAGE)
    pub.publish(Image(np.zeros((240, 320, 3), np.uint8), 1.0, "overhead_camera_optical"))
    assert np.allclose(cams.unproject("overhead", 159.5, 119.5), sim.unproject(319.5, 239.5),
                       atol=1e-6)
    core.shutdown()


def test_a_camera_moved_after_calibration_moves_the_table_points(tmp_path):
    cal = sim_calibration("overhead")
    pose = cal.extrinsics.base_from_camera.copy()
    pose[1, 3] += 0.05  # the file says the camera is 5 cm to the left
    moved = cal.with_extrinsics(Extrinsics.from_matrix(pose, cal.extrinsics.measurement))
    moved.save(tmp_path / "overhead.yaml")
    cams = C.skill_camera_models("calibrated", ["overhead"], str(tmp_path))
    sim = C.skill_camera_models("sim", ["overhead"])
    d = cams["overhead"].unproject(320, 240) - sim["overhead"].unproject(320, 240)
    assert d[1] == pytest.approx(0.05, abs=1e-6)  # the file, not the simulator, is used


def test_the_skills_core_refuses_to_start_without_a_calibration(tmp_path):
    cfg = C.load_config()
    with pytest.raises(MissingCalibrationError) as e:
        C.build_skills_core(FakeClock(), cfg, camera_models="calibrated",
                            calibration_dir=str(tmp_path))
    assert str(e.value).startswith(f"camera 'overhead' has no calibration: "
                                   f"{tmp_path / 'overhead.yaml'}.")
    with pytest.raises(C.ConfigError, match="camera_models: 'real' is not one of sim, calib"):
        C.build_skills_core(FakeClock(), cfg, camera_models="real")


def test_the_planner_markers_use_the_calibration(tmp_path):
    cal = sim_calibration("overhead")
    pose = cal.extrinsics.base_from_camera.copy()
    pose[0, 3] += 0.10
    cal.with_extrinsics(Extrinsics.from_matrix(pose, cal.extrinsics.measurement)).save(
        tmp_path / "overhead.yaml")
    cfg = C.load_config()
    core = C.build_planner_core(FakeClock(), cfg, camera_models="calibrated",
                                calibration_dir=str(tmp_path))
    markers = core.bus.subscribe(names.AGENT_MARKERS, names.T_MARKERS)
    core.parts["planner"].catalogue.preload({"pick_object": type("S", (), {
        "image_points": ("point",), "camera": "overhead"})()})
    state = AgentState(generation=1, status="running", task="t",
                       plan=({"step": 1, "tool": "pick_object", "args": {"point": [320, 240]},
                              "status": "pending", "description": "pick"},),
                       actions=(), conversation=(), stamp=1.0)
    core.bus.publisher(names.AGENT_STATE, names.T_AGENT_STATE, C.LATCHED).publish(state)
    got = [m for m in markers.latest() if m.get("ns") == "targets"]
    sim = C.skill_camera_models("sim", ["overhead"])["overhead"].unproject(320, 240)
    assert got and got[0]["position"][0] == pytest.approx(sim[0] + 0.10, abs=1e-6)
    core.shutdown()


def test_camera_info_comes_from_the_calibration_file(tmp_path):
    path = video_file(tmp_path / "v.avi", (320, 240), frames=3)
    cal = sim_calibration("overhead")
    cal.save(tmp_path / "overhead.yaml")
    core = C.build_camera_core(SystemClock(), "overhead", path,
                               calibration_file=str(tmp_path / "overhead.yaml"))
    info = core.bus.subscribe(names.camera_info_topic("overhead"), names.T_CAMERA_INFO)
    core.start()
    try:
        core.loops[0].fn()
        ci = info.latest()
        assert isinstance(ci, CameraInfo) and (ci.width, ci.height) == (320, 240)
        assert ci.k[0] == pytest.approx(OVERHEAD.fx / 2) and ci.k[2] == pytest.approx(159.75)
        assert ci.d == cal.d and ci.frame_id == "overhead_camera_optical"
    finally:
        core.shutdown()
    (tmp_path / "wrist.yaml").write_text((tmp_path / "overhead.yaml").read_text())
    with pytest.raises(C.ConfigError, match="the file is for camera 'overhead', not 'wrist'"):
        C.build_camera_core(SystemClock(), "wrist", path,
                            calibration_file=str(tmp_path / "wrist.yaml"))
