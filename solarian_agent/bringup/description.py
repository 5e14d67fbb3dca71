"""The robot description with the cameras where bring-up measured them.

The URDF draws each camera where the drawing puts it: the overhead 0.8 m over the table, the
wrist camera on its mount.  After bring-up the measured poses are the truth, so the description
that robot_state_publisher serves (and rviz shows, and tf2 users look up) has each camera's
mounting joint moved so that its optical frame lands exactly on the calibration: the frames
stay static, under the same parents (``world`` for a fixed camera, ``gripper_link`` for the
wrist camera), with the same names.

A fixed camera's calibration is in the table frame (``base_link`` in the calibration files:
the arm's base on the table, z = 0 on the table top), which is the URDF's ``world``.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping

import numpy as np

from solarian_agent.hw.camera.calibration import BASE_FRAME, CameraCalibration

_TABLE_FRAMES = {BASE_FRAME: "world"}  # a calibration's parent -> the URDF link it means


class DescriptionError(ValueError):
    """The URDF has no place for a calibrated camera (the message names the frame)."""


def rpy_matrix(rpy: tuple[float, float, float]) -> np.ndarray:
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = (math.cos(r), math.sin(r), math.cos(p), math.sin(p),
                              math.cos(y), math.sin(y))
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def matrix_rpy(m: np.ndarray) -> tuple[float, float, float]:
    """URDF roll, pitch, yaw (fixed axes x, y, z) of a rotation matrix."""
    sp = -float(m[2, 0])
    pitch = math.asin(max(-1.0, min(1.0, sp)))
    if abs(math.cos(pitch)) < 1e-9:  # looking straight down or up: roll and yaw are one turn
        return 0.0, pitch, math.atan2(-float(m[0, 1]), float(m[1, 1]))
    return (math.atan2(float(m[2, 1]), float(m[2, 2])), pitch,
            math.atan2(float(m[1, 0]), float(m[0, 0])))


def _origin(joint: ET.Element) -> np.ndarray:
    o = joint.find("origin")
    xyz = [float(v) for v in (o.get("xyz", "0 0 0") if o is not None else "0 0 0").split()]
    rpy = [float(v) for v in (o.get("rpy", "0 0 0") if o is not None else "0 0 0").split()]
    t = np.eye(4)
    t[:3, :3] = rpy_matrix((rpy[0], rpy[1], rpy[2]))
    t[:3, 3] = xyz
    return t


def with_calibrated_cameras(urdf_text: str, calibrations: Mapping[str, CameraCalibration]
                            ) -> str:
    """``urdf_text`` with each calibrated camera's mounting joint moved onto its calibration
    (cameras without extrinsics are left where the drawing puts them)."""
    root = ET.fromstring(urdf_text)
    by_child: dict[str, ET.Element] = {}
    for j in root.iter("joint"):
        child = j.find("child")
        if child is not None:
            by_child[child.get("link", "")] = j
    for name, cal in calibrations.items():
        ext = cal.extrinsics
        if ext is None:
            continue
        optical = by_child.get(cal.frame_id)
        if optical is None:
            raise DescriptionError(f"camera {name}: the URDF has no frame {cal.frame_id!r}")
        body_link = optical.find("parent").get("link", "")  # type: ignore[union-attr]
        mount = by_child.get(body_link)
        if mount is None:
            raise DescriptionError(f"camera {name}: nothing holds {body_link!r} in the URDF")
        parent = mount.find("parent").get("link", "")  # type: ignore[union-attr]
        wanted = _TABLE_FRAMES.get(ext.parent_frame, ext.parent_frame)
        if parent != wanted:
            raise DescriptionError(f"camera {name}: measured in {ext.parent_frame}, but the "
                                   f"URDF mounts {body_link} on {parent}")
        parent_from_body = ext.base_from_camera @ np.linalg.inv(_origin(optical))
        roll, pitch, yaw = matrix_rpy(parent_from_body[:3, :3])
        o = mount.find("origin")
        if o is None:
            o = ET.SubElement(mount, "origin")
        o.set("xyz", " ".join(f"{float(v):.6f}" for v in parent_from_body[:3, 3]))
        o.set("rpy", f"{roll:.9f} {pitch:.9f} {yaw:.9f}")
    return ET.tostring(root, encoding="unicode")


__all__ = ["DescriptionError", "matrix_rpy", "rpy_matrix", "with_calibrated_cameras"]
