"""The arm model against the URDF: FK by hand, IK round trips, Jacobian, limits, errors."""

from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from solarian_agent.arm.kinematics import (
    ARM_JOINTS,
    JOINT_NAMES,
    ArmModel,
    UnreachableError,
    default_urdf_path,
)


def _rot(axis: np.ndarray, angle: float) -> np.ndarray:
    a = axis / np.linalg.norm(axis)
    k = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + math.sin(angle) * k + (1 - math.cos(angle)) * k @ k


def _rpy(r: float, p: float, y: float) -> np.ndarray:
    return _rot(np.array([0, 0, 1.0]), y) @ _rot(np.array([0, 1.0, 0]), p) @ _rot(
        np.array([1.0, 0, 0]), r)


def _urdf_fk(path: Path, q: dict[str, float], frame: str) -> np.ndarray:
    """FK written from the URDF text alone: compose joint origins and joint motions."""
    root = ET.parse(path).getroot()
    by_child = {j.find("child").get("link"): j for j in root.findall("joint")}
    chain = []
    link = frame
    while link in by_child:
        j = by_child[link]
        chain.append(j)
        link = j.find("parent").get("link")
    t = np.eye(4)
    for j in reversed(chain):
        o = j.find("origin")
        xyz = [float(v) for v in o.get("xyz").split()]
        rpy = [float(v) for v in o.get("rpy").split()]
        m = np.eye(4)
        m[:3, :3] = _rpy(*rpy)
        m[:3, 3] = xyz
        t = t @ m
        kind, name = j.get("type"), j.get("name")
        if kind in ("revolute", "prismatic"):
            axis = np.array([float(v) for v in j.find("axis").get("xyz").split()])
            value = q.get(name, 0.0)
            mo = np.eye(4)
            if kind == "revolute":
                mo[:3, :3] = _rot(axis, value)
            else:
                mo[:3, 3] = axis * value
            t = t @ mo
    return t


def test_joint_names_and_limits_come_from_the_urdf(arm: ArmModel) -> None:
    assert arm.joint_names == JOINT_NAMES == (
        "shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
    lim = arm.limits
    assert (lim["shoulder_pan"].lower, lim["shoulder_pan"].upper) == (-1.92, 1.92)
    assert (lim["shoulder_lift"].lower, lim["shoulder_lift"].upper) == (-1.75, 1.75)
    assert (lim["elbow_flex"].lower, lim["elbow_flex"].upper) == (-1.69, 1.69)
    assert (lim["wrist_flex"].lower, lim["wrist_flex"].upper) == (-1.66, 1.66)
    assert (lim["wrist_roll"].lower, lim["wrist_roll"].upper) == (-2.74, 2.84)
    assert (lim["gripper"].lower, lim["gripper"].upper) == (0.0, 0.06)
    assert all(lim[n].velocity > 0 for n in JOINT_NAMES)


def test_zero_pose_fk_is_the_chain_of_urdf_origins(arm: ArmModel) -> None:
    xyz, pitch, yaw = arm.fk(np.zeros(6))
    # by hand: base 0.05 + shoulder 0.05 + upper arm 0.116 up; forearm 0.135 + wrist 0.03 +
    # tip 0.07 forward
    assert xyz == pytest.approx([0.135 + 0.03 + 0.07, 0.0, 0.05 + 0.05 + 0.116], abs=1e-9)
    assert pitch == pytest.approx(0.0, abs=1e-9) and yaw == pytest.approx(0.0, abs=1e-9)
    hand = _urdf_fk(default_urdf_path(), {}, "gripper_tip")
    assert np.allclose(arm.frame_pose(np.zeros(6), "gripper_tip"), hand, atol=1e-9)


@pytest.mark.parametrize("frame", ["gripper_tip", "wrist_camera_optical", "gripper_left_finger",
                                   "overhead_camera_optical", "forearm_link"])
def test_fk_matches_a_hand_written_urdf_fk_at_random_poses(arm: ArmModel, frame: str) -> None:
    rng = np.random.default_rng(3)
    for _ in range(5):
        q = rng.uniform(arm.lower, arm.upper)
        qd = dict(zip(JOINT_NAMES, q, strict=True))
        qd["gripper_left_finger_joint"] = 0.5 * q[5]
        hand = _urdf_fk(default_urdf_path(), qd, frame)
        assert np.allclose(arm.frame_pose(q, frame), hand, atol=1e-9)


def test_pitch_is_the_sum_of_the_flex_joints_and_down_is_plus_half_pi(arm: ArmModel) -> None:
    q = np.array([0.4, 0.5, 0.6, 0.47, 0.3])
    _, pitch, _ = arm.fk(q)
    assert pitch == pytest.approx(0.5 + 0.6 + 0.47)
    pose = arm.frame_pose([0.0, 0.5, 0.5, math.pi / 2 - 1.0, 0.0], "gripper_tip")
    assert pose[:3, 0] == pytest.approx([0, 0, -1], abs=1e-9)  # fingers straight down
    assert arm.fk([0.7, 0.2, 0.3, 0.4, 0.0])[2] == pytest.approx(0.7)


def test_camera_frames(arm: ArmModel) -> None:
    over = arm.frame_pose(np.zeros(6), "overhead_camera_optical")
    assert over[:3, 3] == pytest.approx([0.2, 0.0, 0.8])
    assert over[:3, 2] == pytest.approx([0, 0, -1], abs=1e-9)  # looking straight down
    assert over[:3, 0] == pytest.approx([0, -1, 0], abs=1e-9)  # image right = world -y
    # the wrist camera looks along the fingers and moves with the gripper
    q = np.array([0.3, 0.4, 0.2, 0.5, 0.1, 0.0])
    cam = arm.frame_pose(q, "wrist_camera_optical")
    tip = arm.frame_pose(q, "gripper_tip")
    assert float(cam[:3, 2] @ tip[:3, 0]) > 0.95


def test_jacobian_matches_finite_differences(arm: ArmModel) -> None:
    rng = np.random.default_rng(5)
    h = 1e-6
    for _ in range(5):
        q = rng.uniform(arm.lower[:5] * 0.8, arm.upper[:5] * 0.8)
        j = arm.jacobian(q)
        assert j.shape == (6, 5)
        t0 = arm.frame_pose(q, "gripper_tip")
        for i in range(5):
            dq = np.zeros(5)
            dq[i] = h
            t1 = arm.frame_pose(q + dq, "gripper_tip")
            v = (t1[:3, 3] - t0[:3, 3]) / h
            dr = t1[:3, :3] @ t0[:3, :3].T  # world-frame rotation increment
            w = np.array([dr[2, 1] - dr[1, 2], dr[0, 2] - dr[2, 0], dr[1, 0] - dr[0, 1]]) / (2 * h)
            assert np.allclose(j[:3, i], v, atol=1e-5)
            assert np.allclose(j[3:, i], w, atol=1e-5)


def test_ik_round_trip_on_random_reachable_targets(arm: ArmModel) -> None:
    rng = np.random.default_rng(11)
    home = np.array([0.0, -0.6, 0.7, 1.1, 0.0])
    done = 0
    while done < 40:
        q = rng.uniform([-1.3, -0.4, -1.0, -0.5, -1.0], [1.3, 1.3, 1.5, 1.6, 1.0])
        xyz, pitch, _ = arm.fk(q)
        if xyz[0] < 0.03 or xyz[2] < 0.0 or not 0.0 <= pitch <= math.pi / 2:
            continue
        sol = arm.ik(xyz, pitch, home)
        assert sol.shape == (5,)
        assert arm.within_limits(sol)
        got, got_pitch, _ = arm.fk(sol)
        assert np.linalg.norm(got - xyz) < 1e-3
        assert abs(got_pitch - pitch) < 1e-2
        assert sol[4] == pytest.approx(home[4])  # wrist_roll is kept from q0
        done += 1


def test_ik_passes_the_gripper_through_and_stays_in_limits(arm: ArmModel) -> None:
    q0 = np.array([0.0, -0.6, 0.7, 1.1, 0.2, 0.033])
    sol = arm.ik([0.2, 0.1, 0.015], math.pi / 2, q0)
    assert sol.shape == (6,) and sol[5] == 0.033 and sol[4] == pytest.approx(0.2)
    assert arm.within_limits(sol)


def test_unreachable_target_raises_with_the_residual(arm: ArmModel) -> None:
    with pytest.raises(UnreachableError) as e:
        arm.ik([0.6, 0.0, 0.1], math.pi / 2)
    err = e.value
    assert err.position_error > 0.005
    assert arm.within_limits(err.q)
    assert "unreachable" in str(err) and "mm" in str(err)
    # reachable in position but not with the fingers pointing straight down this far out
    with pytest.raises(UnreachableError):
        arm.ik([0.33, 0.0, 0.02], math.pi / 2)
    q, pitch = arm.ik_search([0.33, 0.0, 0.02])
    assert pitch < math.pi / 2
    assert np.linalg.norm(arm.fk(q)[0] - [0.33, 0.0, 0.02]) < 0.005


def test_default_urdf_path_does_not_depend_on_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    p = default_urdf_path()
    assert p.is_absolute() and p.name == "so101.urdf" and p.is_file()
    assert Path(os.getcwd()) not in p.parents


def test_bad_inputs_are_named(arm: ArmModel) -> None:
    with pytest.raises(ValueError, match="5 or 6"):
        arm.fk([0.0, 0.0])
    with pytest.raises(Exception, match="unknown frame"):
        arm.frame_pose(np.zeros(6), "no_such_frame")
    assert len(ARM_JOINTS) == 5
