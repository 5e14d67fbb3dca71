"""Top-down grasps: the wrist roll turns the jaws to straddle the object and the fixed jaw's
face stands at its near side."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sim_helpers import APPROACH_PITCHES

from solarian_agent.arm.grasp import GRASP_CLEARANCE, grasp_joints
from solarian_agent.arm.kinematics import ArmModel


@pytest.mark.parametrize("xy", [(0.22, 0.0), (0.18, 0.12), (0.16, -0.15)])
def test_a_top_down_pick_rolls_the_jaws_across_the_object(arm: ArmModel,
                                                          xy: tuple[float, float]) -> None:
    width = 0.045
    centre = np.array([xy[0], xy[1], 0.015])
    q, pitch = grasp_joints(arm, centre, width, APPROACH_PITCHES, np.zeros(5))
    assert pitch == pytest.approx(math.pi / 2)
    closing = arm.frame_pose(q, "gripper_link")[:3, 0]
    # horizontal, along the bearing from the pan axis (either sense)
    assert abs(closing[2]) < 1e-3
    bearing = np.array([xy[0] - arm.pan_axis_x, xy[1]])
    bearing /= np.linalg.norm(bearing)
    assert abs(float(closing[:2] @ bearing)) == pytest.approx(1.0, abs=0.02)
    # the tool point (the fixed jaw's face) is half the width plus the clearance short of the
    # centre along the closing direction
    tip = arm.fk(q)[0]
    expect = centre - (width / 2 + GRASP_CLEARANCE) * np.array([*closing[:2], 0.0])
    assert tip == pytest.approx(expect, abs=1e-3)
    # the roll differs from the one that leaves the jaws closing across the bearing
    q_plain = arm.ik(centre, math.pi / 2, np.zeros(5))
    across = arm.frame_pose(q_plain, "gripper_link")[:3, 0]
    if abs(float(across[:2] @ bearing)) < 0.9:
        assert abs(q[4] - q_plain[4]) > 0.1
