"""A LeRobot follower calibration file, as LeRobot's ``calibrate`` writes it (a documented test
double): the import, unit and first-day tests read the same file instead of each keeping a
copy.  The values are those of a real SO-101's file; every joint has ``drive_mode`` 0 (LeRobot
writes 0 for every SO-101 joint), so a test that needs an inverted joint copies it and sets one.
"""

from __future__ import annotations

import copy
from typing import Any

_FOLLOWER: dict[str, dict[str, int]] = {
    "shoulder_pan": {"id": 1, "drive_mode": 0, "homing_offset": -1365, "range_min": 746,
                     "range_max": 3477},
    "shoulder_lift": {"id": 2, "drive_mode": 0, "homing_offset": -1200, "range_min": 822,
                      "range_max": 3211},
    "elbow_flex": {"id": 3, "drive_mode": 0, "homing_offset": -986, "range_min": 901,
                   "range_max": 3110},
    "wrist_flex": {"id": 4, "drive_mode": 0, "homing_offset": -1696, "range_min": 1400,
                   "range_max": 3216},
    "wrist_roll": {"id": 5, "drive_mode": 0, "homing_offset": 1003, "range_min": 0,
                   "range_max": 4095},
    "gripper": {"id": 6, "drive_mode": 0, "homing_offset": 1437, "range_min": 2024,
                "range_max": 3452},
}


def so101_follower(**drive_modes: int) -> dict[str, Any]:
    """A fresh copy of the follower file's contents, with ``drive_modes`` (joint -> mode) set."""
    doc = copy.deepcopy(_FOLLOWER)
    for joint, mode in drive_modes.items():
        doc[joint]["drive_mode"] = mode
    return doc


__all__ = ["so101_follower"]
