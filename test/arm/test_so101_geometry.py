"""The software's arm is the published SO-101: its forward kinematics, joint directions, jaw
and the reach tool, checked against figures written here from the published model (joint
origins and axes of TheRobotStudio's so101_new_calib.urdf; LeRobot's joint conventions)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from solarian_agent.arm.jaw import SO101_JAW, JawRangeError
from solarian_agent.arm.kinematics import ArmModel
from solarian_agent.arm.reach import ReachError, solve_reach
from solarian_agent.hw.feetech import cli as arm_cli

# (origin xyz in mm, origin rpy in rad) of each joint in its parent, as published
PUBLISHED = {
    "shoulder_pan": ((38.8353, 0.0, 62.4), (3.14159, 0.0, -3.14159)),
    "shoulder_lift": ((-30.3992, -18.2778, -54.2), (-1.5708, -1.5708, 0.0)),
    "elbow_flex": ((-112.57, -28.0, 0.0), (0.0, 0.0, 1.5708)),
    "wrist_flex": ((-134.9, 5.2, 0.0), (0.0, 0.0, -1.5708)),
    "wrist_roll": ((0.0, -61.1, 18.1), (1.5708, 0.0486795, 3.14159)),
}
TOOL = ((-7.9, -0.2181, -98.1274), (0.0, 3.14159, 0.0))
TABLE_BELOW_BASE_MM = 2.4


def _rpy(r: float, p: float, y: float) -> np.ndarray:
    cr, sr, cp, sp, cy, sy = (math.cos(r), math.sin(r), math.cos(p), math.sin(p),
                              math.cos(y), math.sin(y))
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return rz @ ry @ rx


def _tf(xyz_mm: tuple[float, ...], rpy: tuple[float, ...], angle: float = 0.0) -> np.ndarray:
    t = np.eye(4)
    t[:3, :3] = _rpy(*rpy) @ _rpy(0.0, 0.0, angle)  # every published axis is the local z
    t[:3, 3] = np.array(xyz_mm) / 1000.0
    return t


def published_tool(q5: np.ndarray) -> np.ndarray:
    """The tool point in the table frame by the published chain, written out."""
    t = np.eye(4)
    t[2, 3] = TABLE_BELOW_BASE_MM / 1000.0
    for (xyz, rpy), angle in zip(PUBLISHED.values(), q5, strict=True):
        t = t @ _tf(xyz, rpy, float(angle))
    t = t @ _tf(*TOOL)
    return t


@pytest.fixture(scope="module")
def arm() -> ArmModel:
    return ArmModel.default()


def test_tool_point_matches_the_published_chain_over_random_configurations(arm) -> None:
    rng = np.random.default_rng(29)
    worst = 0.0
    for _ in range(1000):
        q = rng.uniform(arm.lower[:5], arm.upper[:5])
        worst = max(worst, float(np.linalg.norm(arm.fk(q)[0] - published_tool(q)[:3, 3])))
    assert worst < 0.001


def test_at_zero_the_arm_stretches_forward_as_published(arm) -> None:
    tip, pitch, _ = arm.fk(np.zeros(5))
    assert tip == pytest.approx([0.3914, 0.0, 0.2265 + 0.0024], abs=0.0005)
    assert pitch == pytest.approx(0.0, abs=1e-3)
    lift = arm.frame_pose(np.zeros(5), "upper_arm_link")[:3, 3]
    assert lift == pytest.approx([0.0692, -0.0183, 0.1190], abs=0.0005)


def test_joint_directions_are_lerobots(arm) -> None:
    zero = np.zeros(6)
    base_tip = arm.fk(zero)[0]

    def tip(joint: int, value: float) -> np.ndarray:
        q = zero.copy()
        q[joint] = value
        return arm.fk(q)[0]

    assert tip(0, 0.3)[1] < base_tip[1] - 0.05  # shoulder_pan +: the arm turns to its right
    assert tip(1, 0.3)[2] < base_tip[2] - 0.05  # shoulder_lift +: forward and down
    assert tip(2, 0.3)[2] < base_tip[2] - 0.03  # elbow_flex +: the forearm down
    assert tip(3, 0.3)[2] < base_tip[2] - 0.02  # wrist_flex +: the jaws down
    # wrist_roll +: seen from behind the wrist, the moving jaw (above at 0) turns to the left
    edge = np.array([-0.0123, -0.0747274, 0.0189, 1.0])  # the jaw's tip, in its own link
    jaw0 = arm.frame_pose(zero, "moving_jaw_so101_v1_link") @ edge
    q = zero.copy()
    q[4] = 0.5
    jaw = arm.frame_pose(q, "moving_jaw_so101_v1_link") @ edge
    assert jaw0[2] > base_tip[2] + 0.01  # above the tool point at roll 0
    assert jaw[1] > jaw0[1] + 0.003  # the edge is ~8 mm from the roll axis
    # pitch is the sum of the three flex joints
    q = np.array([0.2, 0.3, 0.4, 0.5, 0.1])
    assert arm.fk(q)[1] == pytest.approx(1.2, abs=1e-3)


def test_limits_are_lerobots_ranges(arm) -> None:
    degrees = {n: (round(math.degrees(lim.lower), 2), round(math.degrees(lim.upper), 2))
               for n, lim in arm.limits.items()}
    assert degrees == {"shoulder_pan": (-110.0, 110.0), "shoulder_lift": (-100.0, 100.0),
                       "elbow_flex": (-96.83, 96.83), "wrist_flex": (-95.0, 95.0),
                       "wrist_roll": (-157.21, 162.79), "gripper": (-10.0, 100.0)}


def _jaw_gap_by_frames(arm: ArmModel, angle: float) -> float:
    """The opening measured on the URDF: the moving jaw's inner edge at the tool point's depth
    (a point fixed in the jaw's own link) against the fixed jaw's face through the tool
    point, along gripper_link's x."""
    q = np.zeros(6)
    q[5] = angle
    poses = arm.frame_poses(q, ("gripper_link", "moving_jaw_so101_v1_link",
                                "gripper_frame_link"))
    edge_in_jaw = np.array([-0.0123, -0.0747274, 0.0189, 1.0])
    edge = poses["moving_jaw_so101_v1_link"] @ edge_in_jaw
    closing = poses["gripper_link"][:3, 0]
    return float((edge[:3] - poses["gripper_frame_link"][:3, 3]) @ closing)


@pytest.mark.parametrize("deg", [-5.0, 0.0, 25.0, 60.0, 100.0])
def test_jaw_opening_follows_the_jaw_geometry(arm, deg) -> None:
    angle = math.radians(deg)
    assert SO101_JAW.opening(angle) == pytest.approx(_jaw_gap_by_frames(arm, angle), abs=2e-4)


def test_jaw_opening_is_not_linear_and_inverts() -> None:
    widths = [SO101_JAW.opening(math.radians(d)) for d in (0, 25, 50, 75, 100)]
    steps = np.diff(widths)
    assert all(s > 0 for s in steps) and steps[0] > 3 * steps[-1]
    assert SO101_JAW.opening(0.0) == pytest.approx(0.0158, abs=1e-4)
    for w in (0.0, 0.02, 0.045, 0.09):
        assert SO101_JAW.opening(SO101_JAW.angle_for(w)) == pytest.approx(w, abs=1e-5) or (
            w < SO101_JAW.opening(SO101_JAW.lower))
    with pytest.raises(JawRangeError, match="wider than the jaws open"):
        SO101_JAW.angle_for(0.2)


@pytest.mark.parametrize("deg", [0.0, 30.0, 66.0, 100.0])
def test_opened_jaws_are_narrowest_at_the_fingers_upper_end(arm, deg) -> None:
    """The moving jaw's finger (its collision box's inner face, up to 32 mm below the pivot)
    against the fixed jaw's face: the gap at its upper end is the URDF's, and the narrowest."""
    angle = math.radians(deg)
    q = np.zeros(6)
    q[5] = angle
    poses = arm.frame_poses(q, ("gripper_link", "moving_jaw_so101_v1_link",
                                "gripper_frame_link"))
    top = poses["moving_jaw_so101_v1_link"] @ np.array([-0.0123, -0.032, 0.0189, 1.0])
    closing = poses["gripper_link"][:3, 0]
    by_frames = float((top[:3] - poses["gripper_frame_link"][:3, 3]) @ closing)
    assert SO101_JAW.gap(angle, SO101_JAW.finger_top_z) == pytest.approx(by_frames, abs=2e-4)
    assert SO101_JAW.clearance(angle) <= SO101_JAW.opening(angle) + 1e-12
    if deg > 0:
        assert SO101_JAW.clearance(angle) < SO101_JAW.opening(angle) - 0.005


def test_the_clear_angle_opens_the_whole_finger_past_a_width() -> None:
    for w in (0.03, 0.04, 0.05):
        a = SO101_JAW.clear_angle(w)
        assert SO101_JAW.clearance(a) == pytest.approx(w, abs=1e-6)
        assert SO101_JAW.opening(a) > w + 0.015  # the tips much wider than the finger's top
    # a 40 mm cup: 41 degrees, where the tips alone stand 40 mm apart at 18
    assert math.degrees(SO101_JAW.clear_angle(0.04)) == pytest.approx(41.3, abs=0.2)
    assert math.degrees(SO101_JAW.angle_for(0.04)) == pytest.approx(18.4, abs=0.2)
    assert SO101_JAW.clear_angle(0.2) == pytest.approx(math.radians(99.3), abs=0.01)


def test_reach_lands_on_a_table_grid_within_a_millimetre_and_never_below(arm) -> None:
    reached = 0
    for x in np.linspace(0.12, 0.32, 6):
        for y in np.linspace(-0.18, 0.18, 7):
            for z in (0.0, 0.02, 0.06):
                try:
                    r = solve_reach(arm, (x, y, z))
                except ReachError:
                    continue
                reached += 1
                q = np.radians([r.joints_deg[n] for n in arm.arm_joints])
                tip = published_tool(q)[:3, 3]
                assert np.linalg.norm(tip - [x, y, z]) < 0.001
                links = arm.frame_poses(q, ("wrist_link", "gripper_link", "lower_arm_link"))
                assert min(p[2, 3] for p in links.values()) > 0.0
                assert tip[2] > -0.0005
    assert reached >= 100  # of 126: the near and far corners may be out of reach


def test_reach_honours_pitch_and_roll(arm) -> None:
    r = solve_reach(arm, (0.2, 0.05, 0.02), pitch=math.radians(70), roll=math.radians(30))
    assert r.pitch_deg == 70.0
    assert r.joints_deg["wrist_roll"] == pytest.approx(30.0)
    q = np.radians([r.joints_deg[n] for n in arm.arm_joints])
    assert math.degrees(arm.fk(q)[1]) == pytest.approx(70.0, abs=0.6)


def test_reach_refuses_below_the_table_and_out_of_reach(arm) -> None:
    with pytest.raises(ReachError, match="below the table"):
        solve_reach(arm, (0.2, 0.0, -0.01))
    with pytest.raises(ReachError, match="out of reach"):
        solve_reach(arm, (0.7, 0.0, 0.0))


def test_arm_reach_cli_prints_json_and_exits_3_when_unreachable(capsys) -> None:
    assert arm_cli.main(["reach", "0.2", "0", "0.01", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["joints_deg"]) == {"shoulder_pan", "shoulder_lift", "elbow_flex",
                                      "wrist_flex", "wrist_roll"}
    assert out["tcp"] == pytest.approx([0.2, 0.0, 0.01], abs=0.001)
    assert arm_cli.main(["reach", "0.8", "0", "0"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("unreachable: ") and err.count("\n") == 1
    with pytest.raises(SystemExit) as e:
        arm_cli.main(["reach", "0.2", "nan", "0"])
    assert e.value.code == 2


def test_arm_reach_moves_simulated_servos_there(capsys) -> None:
    assert arm_cli.main(["reach", "0.22", "-0.04", "0.03", "--sim", "--timeout", "30"]) == 0
    assert "reached" in capsys.readouterr().out
