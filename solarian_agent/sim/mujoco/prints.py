"""Printed sheets in the MuJoCo scene: calibration boards and table marks, as a person would
print them and lay them on the table (or hold them up to a camera).

A :class:`TablePrint` is an image with its scale: the point of the print's own frame at (X, Y)
metres is drawn at pixel ``origin_px + (X, Y) * px_per_m`` (the convention of
:class:`~solarian_agent.hw.camera.boards.BoardImage`: a board frame's x to the right of the
printed image, y down it, z into the paper).  In the scene each print is a flat quad textured
with its image on a mocap body named ``print_<name>`` whose frame is the print's frame, so
:meth:`~solarian_agent.sim.mujoco.world.MujocoWorld.set_print_pose` moves it where the frame
should be and a camera that finds the board sees exactly that pose: the truth a bring-up on
the simulator is measured against.  Prints are drawn only (no collisions, no mass).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

import cv2
import numpy as np

from .urdf_mjcf import fmt, matrix_quat

PRINT_GROUP = 0  # drawn with the scene
LIFT_M = 0.0004  # a print lying on the table sits this far above it (no z-fighting)


@dataclass(frozen=True, eq=False)
class TablePrint:
    name: str
    image: np.ndarray  # grey or RGB, uint8
    px_per_m: float
    origin_px: tuple[float, float]  # where the print frame's origin is drawn (pixels)
    pose: np.ndarray = field(default_factory=lambda: np.eye(4))  # the frame in the world

    def __post_init__(self) -> None:
        if not self.name.replace("_", "").isalnum():
            raise ValueError(f"print name {self.name!r}: letters, digits and _ only")
        if self.image.dtype != np.uint8 or self.image.ndim not in (2, 3):
            raise ValueError(f"print {self.name}: the image must be grey or RGB uint8")
        if not (math.isfinite(self.px_per_m) and self.px_per_m > 0):
            raise ValueError(f"print {self.name}: px_per_m must be > 0")

    @property
    def body(self) -> str:
        return f"print_{self.name}"

    def corners(self) -> np.ndarray:
        """The image's four outer corners in the print frame (4 x 3, metres): top-left,
        top-right, bottom-right, bottom-left of the image."""
        h, w = self.image.shape[:2]
        ox, oy = self.origin_px
        xs = ((-0.5 - ox) / self.px_per_m, (w - 0.5 - ox) / self.px_per_m)
        ys = ((-0.5 - oy) / self.px_per_m, (h - 0.5 - oy) / self.px_per_m)
        return np.array([[xs[0], ys[0], 0.0], [xs[1], ys[0], 0.0], [xs[1], ys[1], 0.0],
                         [xs[0], ys[1], 0.0]])


def face_up_pose(x: float, y: float, yaw: float = 0.0, z: float = LIFT_M) -> np.ndarray:
    """A print lying face up on the table: its frame's z into the table, its x along ``yaw``
    (radians from the base's +x)."""
    c, s = math.cos(yaw), math.sin(yaw)
    pose = np.eye(4)
    # x = (c, s, 0); z = (0, 0, -1); y = z cross x
    pose[:3, :3] = np.array([[c, s, 0.0], [s, -c, 0.0], [0.0, 0.0, -1.0]])
    pose[:3, 3] = (x, y, z)
    return pose


def _png(image: np.ndarray) -> bytes:
    bgr = cv2.cvtColor(image, cv2.COLOR_GRAY2BGR) if image.ndim == 2 else image[:, :, ::-1]
    ok, buf = cv2.imencode(".png", bgr)
    if not ok:  # pragma: no cover - OpenCV always encodes a uint8 image
        raise RuntimeError("could not encode a print's image")
    return bytes(buf.tobytes())


def add_prints(asset: ET.Element, worldbody: ET.Element, prints: tuple[TablePrint, ...]
               ) -> dict[str, bytes]:
    """Each print's texture, material, quad mesh and mocap body; returns the PNG assets."""
    assets: dict[str, bytes] = {}
    for p in prints:
        file = f"{p.body}.png"
        assets[file] = _png(p.image)
        ET.SubElement(asset, "texture", name=p.body, type="2d", file=file)
        # lit like paper: diffuse, no shine (a specular highlight would wash a corner out)
        ET.SubElement(asset, "material", name=p.body, texture=p.body, specular="0",
                      shininess="0", rgba="1 1 1 1")
        # the quad faces the print's -z (out of the paper); texture v runs down the image
        ET.SubElement(asset, "mesh", name=p.body, vertex=fmt(p.corners().ravel().tolist()),
                      texcoord="0 0 1 0 1 1 0 1", face="0 2 1 0 3 2", inertia="shell")
        body = ET.SubElement(worldbody, "body", name=p.body, mocap="true",
                             pos=fmt(p.pose[:3, 3].tolist()),
                             quat=fmt(matrix_quat(p.pose[:3, :3])))
        ET.SubElement(body, "geom", name=p.body, type="mesh", mesh=p.body, material=p.body,
                      contype="0", conaffinity="0", mass="0", group=str(PRINT_GROUP))
    return assets


__all__ = ["LIFT_M", "TablePrint", "add_prints", "face_up_pose"]
