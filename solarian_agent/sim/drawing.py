"""Drawing world geometry into a camera image with OpenCV: polygons clipped in front of the
camera, thick segments and dots sized by depth, and the gripper's two jaws, which both
simulators draw the same way (the MuJoCo one over its rendered scene) so the classical monitor
reads the same jaws whichever renders the table.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from solarian_agent.arm.jaw import SO101_JAW
from solarian_agent.arm.kinematics import TIP_FRAME

from .camera import PinholeCamera
from .visual_style import BGR, shade

_NEAR = 0.01  # m: polygons are clipped at this depth in front of a camera
_SHIFT = 4  # sub-pixel bits for cv2 polygon drawing


def _wrist_view() -> np.ndarray:
    """The wrist close-up's optical frame in :func:`jaw_frame`: 9 cm behind the jaw tips,
    3.5 cm to the side, pitched 10 degrees toward the jaws, centred on their gap, so the jaws
    reach up from the image's bottom edge on either side of it.  The 2D world draws the wrist
    view from here rather than from the URDF's wrist_camera_optical (beside the fixed jaw):
    the classical monitor and ``scene.held_in_wrist`` read a close-up centred on the gap."""
    a = math.radians(10.0)
    ry = np.array([[math.cos(a), 0.0, math.sin(a)], [0.0, 1.0, 0.0],
                   [-math.sin(a), 0.0, math.cos(a)]])
    optical = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
    out = np.eye(4)
    out[:3, :3] = ry @ optical
    out[:3, 3] = (-0.09, 0.0, 0.035)
    return out


def jaw_frame(poses: dict[str, np.ndarray], jaw_angle: float) -> tuple[np.ndarray, float]:
    """The jaws' drawing frame and opening (m): origin midway between the jaws' inner faces
    at the tool point's depth, x along the approach (out of the jaws), y along the closing
    direction (gripper_link's x), z across; the fixed jaw's face is at y = -opening / 2."""
    opening = SO101_JAW.opening(jaw_angle)
    approach = poses[TIP_FRAME][:3, 2]
    closing = poses["gripper_link"][:3, 0]
    out = np.eye(4)
    out[:3, 0], out[:3, 1] = approach, closing
    out[:3, 2] = np.cross(approach, closing)
    out[:3, 3] = poses[TIP_FRAME][:3, 3] + closing * (opening / 2)
    return out, opening


WRIST_VIEW = _wrist_view()


def _clip_near(pc: np.ndarray, near: float = _NEAR) -> np.ndarray | None:
    """Clip a polygon (N x 3, optical frame) to z >= near (Sutherland-Hodgman, one plane)."""
    inside = pc[:, 2] >= near
    if inside.all():
        return pc
    if not inside.any():
        return None
    out = []
    n = len(pc)
    for i in range(n):
        a, b = pc[i], pc[(i + 1) % n]
        ia, ib = inside[i], inside[(i + 1) % n]
        if ia:
            out.append(a)
        if ia != ib:
            t = (near - a[2]) / (b[2] - a[2])
            out.append(a + t * (b - a))
    return np.array(out) if len(out) >= 3 else None


class View:
    """One camera's drawing helpers for a frame."""

    def __init__(self, cam: PinholeCamera, img: np.ndarray) -> None:
        self.cam = cam
        self.img = img

    def _pix(self, pc: np.ndarray) -> np.ndarray:
        uv = self.cam.project_camera_points(pc)
        return np.round(uv * (1 << _SHIFT)).astype(np.int32)

    def poly(self, pts: np.ndarray, colour: BGR, outline: BGR | None = None,
             img: np.ndarray | None = None) -> None:
        pc = _clip_near(self.cam.to_camera(pts))
        if pc is None:
            return
        pix = self._pix(pc)
        target = self.img if img is None else img
        cv2.fillPoly(target, [pix], colour, cv2.LINE_8, _SHIFT)
        if outline is not None:
            cv2.polylines(target, [pix], True, outline, 1, cv2.LINE_8, _SHIFT)

    def segment(self, a: np.ndarray, b: np.ndarray, width_m: float, colour: BGR) -> None:
        pc = self.cam.to_camera(np.stack([a, b]))
        if pc[0, 2] < _NEAR and pc[1, 2] < _NEAR:
            return
        for i in (0, 1):
            if pc[i, 2] < _NEAR:
                o = pc[1 - i]
                t = (_NEAR - o[2]) / (pc[i, 2] - o[2])
                pc[i] = o + t * (pc[i] - o)
        depth = float(np.mean(pc[:, 2]))
        px = self._pix(pc)
        thick = max(1, int(round(self.cam.spec.fx * width_m / depth)))
        cv2.line(self.img, tuple(px[0]), tuple(px[1]), colour, thick, cv2.LINE_8, _SHIFT)

    def dots(self, pts: np.ndarray, radius_m: float, colour: BGR) -> None:
        pc = self.cam.to_camera(pts)
        ok = pc[:, 2] > _NEAR
        if not ok.any():
            return
        pc = pc[ok]
        px = self._pix(pc)
        for p, z in zip(px, pc[:, 2], strict=True):
            r = max(1, int(round(self.cam.spec.fx * radius_m / z * (1 << _SHIFT))))
            cv2.circle(self.img, (int(p[0]), int(p[1])), r, colour, -1, cv2.LINE_8, _SHIFT)


def paint_jaws(cam: PinholeCamera, img: np.ndarray, jaws: np.ndarray, opening: float,
               colour: BGR) -> None:
    """:func:`draw_jaws` on ``img`` as ``cam`` (posed) sees it."""
    draw_jaws(View(cam, img), jaws, opening, colour)


def draw_jaws(view: View, jaws: np.ndarray, opening: float, colour: BGR) -> None:
    """Both jaws as boxes in :func:`jaw_frame` (x from the tips at 0 back to -0.075, y
    outside the gap, z +-0.01); only faces turned towards the camera are drawn.  From the
    wrist close-up they reach the bottom edge of the image.  Both simulators draw the
    close-up's jaws so (the MuJoCo one over its rendered scene): the classical monitor reads
    the same jaws whichever renders the table."""
    rot, org = jaws[:3, :3], jaws[:3, 3]
    half = opening / 2
    light, dark = colour, shade(colour, 0.72)
    cam = rot.T @ (view.cam.position - org)  # the camera in the tip frame
    x0, x1, z0, z1 = -0.075, 0.0, -0.01, 0.01
    for side in (1.0, -1.0):
        y0, y1 = side * half, side * (half + 0.01)
        faces = (
            (np.array([0, 0, 1.0]), z1, [[x0, y0, z1], [x1, y0, z1], [x1, y1, z1],
                                         [x0, y1, z1]], light),
            (np.array([0, 0, -1.0]), -z0, [[x0, y0, z0], [x1, y0, z0], [x1, y1, z0],
                                           [x0, y1, z0]], light),
            (np.array([0, -side, 0]), -side * y0, [[x0, y0, z0], [x1, y0, z0],
                                                   [x1, y0, z1], [x0, y0, z1]], dark),
            (np.array([0, side, 0]), side * y1, [[x0, y1, z0], [x1, y1, z0],
                                                 [x1, y1, z1], [x0, y1, z1]], dark),
            (np.array([1.0, 0, 0]), x1, [[x1, y0, z0], [x1, y1, z0], [x1, y1, z1],
                                         [x1, y0, z1]], dark),
        )
        for normal, offset, corners, tone in faces:
            if float(normal @ cam) <= offset:  # back face
                continue
            pts = np.array(corners) @ rot.T + org
            view.poly(pts, tone, outline=shade(tone, 0.6))


def surface(origin: np.ndarray, ax_u: np.ndarray, ax_v: np.ndarray,
            local: np.ndarray) -> np.ndarray:
    """Points ``local`` (N x 2) on the plane through ``origin`` spanned by ``ax_u``, ``ax_v``."""
    out: np.ndarray = origin + local[:, :1] * ax_u + local[:, 1:2] * ax_v
    return out

