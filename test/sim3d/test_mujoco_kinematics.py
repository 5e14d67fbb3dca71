"""The MJCF generated from the URDF and the URDF the skills use (Pinocchio) agree."""

from __future__ import annotations

import math
from pathlib import Path

import mujoco
import numpy as np
import pytest

from solarian_agent.arm.kinematics import ArmModel
from solarian_agent.core.errors import ConfigError
from solarian_agent.sim.camera import CAMERA_SPECS
from solarian_agent.sim.mujoco.scene import fovy_deg
from solarian_agent.sim.mujoco.urdf_mjcf import matrix_quat, read_urdf, rpy_matrix
from solarian_agent.sim.mujoco.world import MujocoWorld


def _set_q(world: MujocoWorld, q: np.ndarray) -> None:
    world.data.qpos[world._qadr] = q[:5]
    world.data.qpos[world._fq] = q[5] * world._fmul
    mujoco.mj_kinematics(world.model, world.data)
    mujoco.mj_camlight(world.model, world.data)


def test_forward_kinematics_agree_within_a_millimetre_at_random_joints(
        arm: ArmModel, world: MujocoWorld) -> None:
    rng = np.random.default_rng(19)
    links = list(read_urdf(arm.urdf_path).links)
    # the root is MuJoCo's world
    links.remove("world")
    worst_mm = worst_rad = worst_tool_mm = 0.0
    for _ in range(1000):
        q = rng.uniform(arm.lower, arm.upper)
        _set_q(world, q)
        for link in links:
            sid = mujoco.mj_name2id(world.model, mujoco.mjtObj.mjOBJ_SITE, link)
            assert sid >= 0, f"no site for link {link}"
            pose = arm.frame_pose(q, link)
            err = np.linalg.norm(world.data.site_xpos[sid] - pose[:3, 3])
            rot = world.data.site_xmat[sid].reshape(3, 3).T @ pose[:3, :3]
            ang = math.acos(max(-1.0, min(1.0, (np.trace(rot) - 1) / 2)))
            worst_mm, worst_rad = max(worst_mm, 1000 * err), max(worst_rad, ang)
        tool = np.linalg.norm(world.data.site_xpos[world._tip] - arm.fk(q)[0])
        worst_tool_mm = max(worst_tool_mm, 1000 * tool)
    assert worst_tool_mm < 1.0
    assert worst_mm < 1.0
    assert worst_rad < 1e-3
    world.reset(world.seed)


def test_the_gripper_reading_is_the_urdf_jaw_angle(arm: ArmModel,
                                                   world: MujocoWorld) -> None:
    q = np.array([0.3, 0.2, 0.4, 1.0, -0.5, 0.9])
    _set_q(world, q)
    world._read_state()
    assert world.q[5] == pytest.approx(0.9, abs=1e-9)
    for side in ("gripper_link", "moving_jaw_so101_v1_link"):
        sid = mujoco.mj_name2id(world.model, mujoco.mjtObj.mjOBJ_SITE, side)
        assert np.allclose(world.data.site_xpos[sid], arm.frame_pose(q, side)[:3, 3],
                           atol=1e-6)
    world.reset(world.seed)


def test_cameras_sit_on_the_optical_frames_with_the_published_field_of_view(
        arm: ArmModel, world: MujocoWorld) -> None:
    q = np.array([-0.4, 0.5, -0.3, 1.2, 0.7, 0.02])
    _set_q(world, q)
    for spec in CAMERA_SPECS.values():
        cid = mujoco.mj_name2id(world.model, mujoco.mjtObj.mjOBJ_CAMERA, spec.name)
        assert world.model.cam_fovy[cid] == pytest.approx(fovy_deg(spec))
        pose = arm.frame_pose(q, spec.frame)
        assert np.allclose(world.data.cam_xpos[cid], pose[:3, 3], atol=1e-6)
        # MuJoCo looks along -z with y up; the optical frame along +z with y down
        mj = world.data.cam_xmat[cid].reshape(3, 3)
        assert np.allclose(mj @ np.diag([1.0, -1.0, -1.0]), pose[:3, :3], atol=1e-6)
    world.reset(world.seed)


def test_joint_limits_and_actuators_come_from_the_urdf(arm: ArmModel,
                                                       world: MujocoWorld) -> None:
    m = world.model
    for name, lim in arm.limits.items():
        jid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name)
        assert tuple(m.jnt_range[jid]) == pytest.approx((lim.lower, lim.upper))
    act = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_ACTUATOR, i) for i in range(m.nu)]
    # one servo per joint, the jaw's included (its angle in radians, no finger mimics)
    assert act == list(arm.limits)
    jaw = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_ACTUATOR, "gripper")
    assert tuple(m.actuator_ctrlrange[jaw]) == pytest.approx((-0.174533, 1.74533))


def test_rotation_helpers_round_trip() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        r = rpy_matrix(rng.uniform(-3, 3, 3))
        w, x, y, z = matrix_quat(r)
        m = np.zeros((4,))
        m[:] = (w, x, y, z)
        back = np.empty(9)
        mujoco.mju_quat2Mat(back, m)
        assert np.allclose(back.reshape(3, 3), r, atol=1e-9)


@pytest.mark.parametrize("text, where", [
    ('<link name="a"><visual><geometry><mesh filename="x.obj"/></geometry></visual></link>',
     "link[a].visual[0].geometry"),
    ('<link name="a"/><joint name="j" type="fixed"><parent link="a"/><child link="b"/>'
     '</joint>', "joint[j]"),
    ('<link name="a"><visual><origin xyz="0 0"/><geometry><box size="1 1 1"/></geometry>'
     '</visual></link>', "link[a].visual[0].origin.xyz"),
])
def test_a_bad_urdf_names_the_element(tmp_path: Path, text: str, where: str) -> None:
    p = tmp_path / "bad.urdf"
    p.write_text(f'<robot name="r">{text}</robot>')
    with pytest.raises(ConfigError, match=where.replace("[", r"\[").replace("]", r"\]")):
        read_urdf(p)
