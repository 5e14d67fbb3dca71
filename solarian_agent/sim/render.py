"""Camera images of the tabletop world, drawn with OpenCV (BGR uint8).

* ``overhead`` (640 x 480): fixed above the table looking straight down; shows the table, the
  tray, the bin, the objects and the arm from above.  Pinhole intrinsics are published as
  ``CameraInfo``; :meth:`Renderer.project` / :meth:`Renderer.unproject` map between its pixels
  and table positions (see :mod:`solarian_agent.sim.camera`).
* ``wrist`` (480 x 360): on the gripper looking along the jaws; the two grey jaws are
  always in the bottom half of the image, their gap shows the jaws' opening, and a held object
  sits between them.

Default colours (BGR) are chosen so a classical HSV detector separates them: red cup
(40, 40, 200), yellow paper (40, 200, 220), grey-blue tray, dark bin, on a light low-saturation
table.  :class:`~solarian_agent.sim.visual_style.VisualStyle` holds the knobs of the
domain-shift test (experiment 6-14): table colour / texture, object colours / textures,
lighting gain and gradient, pixel noise.  The drawing primitives and the jaws are in
:mod:`.drawing`.

Cheap by construction: the static layer (floor, table, tray, bin) of the overhead view is drawn
once per layout; a frame is a copy plus a handful of polygons.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import cv2
import numpy as np

from solarian_agent.arm.kinematics import TIP_FRAME, ArmModel

from .camera import (
    OVERHEAD,
    WRIST,
    CameraRig,
    CameraSpec,
    PinholeCamera,
    RenderError,
    project,
    unproject,
)
from .drawing import WRIST_VIEW, View, draw_jaws, jaw_frame, surface
from .tabletop import Receptacle, WorldObject
from .visual_style import OBJECT_TEXTURES, TABLE_TEXTURES, VisualStyle, shade
from .world import World

__all__ = [
    "OBJECT_TEXTURES",
    "OVERHEAD",
    "TABLE_TEXTURES",
    "WRIST",
    "CameraSpec",
    "PinholeCamera",
    "RenderError",
    "Renderer",
    "VisualStyle",
    "project",
    "unproject",
]

_ARM_FRAMES = ("upper_arm_link", "lower_arm_link", "wrist_link", "gripper_link",
               TIP_FRAME, "moving_jaw_so101_v1_link")


class Renderer(CameraRig):
    """Draws the world from the overhead and wrist cameras."""

    def __init__(
        self,
        arm: ArmModel,
        style: VisualStyle = VisualStyle(),
        cameras: Sequence[CameraSpec] = (OVERHEAD, WRIST),
    ) -> None:
        super().__init__(arm, cameras)
        self.style = style
        self._noise_rng = np.random.default_rng([style.seed, 0x401])
        self._static: dict[tuple[Any, ...], Any] = {}
        self._static_key: tuple[int, int] | None = None
        self._light: dict[str, np.ndarray] = {}
        self._noise: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        self._marks = self._object_marks()

    # rendering -------------------------------------------------------------------------------
    def render(self, name: str, world: World) -> np.ndarray:
        if name in self._fixed:
            img = self._render_fixed(name, world)
        elif name in self.specs:
            img = self._render_wrist(name, world)
        else:
            raise RenderError(f"unknown camera {name!r}; cameras are {self.cameras}")
        return self._post(name, img)

    def render_all(self, world: World) -> dict[str, np.ndarray]:
        return {name: self.render(name, world) for name in self.specs}

    # static layers ---------------------------------------------------------------------------
    def _table_outline(self, world: World, z: float = 0.0) -> np.ndarray:
        (x0, x1), (y0, y1) = world.config.table_x, world.config.table_y
        return np.array([[x0, y0, z], [x1, y0, z], [x1, y1, z], [x0, y1, z]])

    def _table_map(self, world: World) -> tuple[np.ndarray, np.ndarray]:
        """The textured table top in plane coordinates and the affine map (col, row) -> (x, y)."""
        key = ("table_map", world.config.table_x, world.config.table_y)
        if key in self._static:
            cached: tuple[np.ndarray, np.ndarray] = self._static[key]
            return cached
        st = self.style
        res = 0.002
        (x0, x1), (y0, y1) = world.config.table_x, world.config.table_y
        rows, cols = int(round((x1 - x0) / res)), int(round((y1 - y0) / res))
        rng = np.random.default_rng([st.seed, 0x7E7])
        base = np.array(st.table_bgr, dtype=np.float32)
        xs = (np.arange(rows, dtype=np.float32) + 0.5) * res
        ys = (np.arange(cols, dtype=np.float32) + 0.5) * res
        if st.table_texture == "wood":
            phase = rng.uniform(0, 2 * np.pi, 3)
            grain = (np.sin(ys[None, :] * 90.0 + 3.0 * np.sin(xs[:, None] * 11.0 + phase[0]))
                     + 0.5 * np.sin(ys[None, :] * 260.0 + phase[1]))
            mod = 1.0 + st.texture_strength * grain / 1.5
        elif st.table_texture == "checker":
            sq = 0.05
            mod = 1.0 + st.texture_strength * np.where(
                ((xs[:, None] // sq + ys[None, :] // sq) % 2) == 0, 1.0, -1.0)
        elif st.table_texture == "blotches":
            small = rng.normal(0.0, 1.0, (max(2, rows // 25), max(2, cols // 25)))
            big = cv2.resize(small.astype(np.float32), (cols, rows),
                             interpolation=cv2.INTER_CUBIC)
            mod = 1.0 + st.texture_strength * np.clip(big, -2.0, 2.0) / 2.0
        else:
            mod = np.ones((rows, cols), dtype=np.float32)
        tex = np.clip(mod[:, :, None] * base[None, None, :], 0, 255).astype(np.uint8)
        affine = np.array([[0.0, res, x0 + res / 2], [res, 0.0, y0 + res / 2], [0, 0, 1.0]])
        self._static[key] = (tex, affine)
        return tex, affine

    def _draw_table(self, view: View, world: World) -> None:
        st = self.style
        outline = self._table_outline(world)
        if st.table_texture == "none":
            view.poly(outline, st.table_bgr)
            return
        tex, affine = self._table_map(world)
        h = view.cam.plane_homography(0.0) @ affine
        spec = view.cam.spec
        warped = cv2.warpPerspective(tex, h, (spec.width, spec.height), flags=cv2.INTER_LINEAR)
        mask = np.zeros((spec.height, spec.width), dtype=np.uint8)
        view.poly(outline, (255, 255, 255), img=mask)
        cv2.copyTo(warped, mask, view.img)

    def _draw_receptacle(self, view: View, rec: Receptacle) -> None:
        st = self.style
        pts = np.column_stack([rec.outline(40), np.zeros(40 if rec.shape == "circle" else 4)])
        if rec.name == "tray":
            view.poly(pts, st.tray_bgr, outline=shade(st.tray_bgr, 0.7))
            inner = np.column_stack([
                rec.x + (rec.outline(4)[:, 0] - rec.x) * 0.85,
                rec.y + (rec.outline(4)[:, 1] - rec.y) * 0.85, np.zeros(4)])
            view.poly(inner, shade(st.tray_bgr, 1.08))
        else:
            view.poly(pts, shade(st.bin_bgr, 1.6))  # the rim
            inner = np.column_stack([rec.x + (pts[:, 0] - rec.x) * 0.85,
                                     rec.y + (pts[:, 1] - rec.y) * 0.85, np.zeros(len(pts))])
            view.poly(inner, st.bin_bgr)

    def _static_overhead(self, name: str, world: World) -> np.ndarray:
        key = (id(world), world.layout_version)
        if self._static_key != key:
            self._static = {k: v for k, v in self._static.items()
                            if k[0] in ("table_map", "blank")}
            self._static_key = key
        if (name, "static") not in self._static:
            spec = self.specs[name]
            img = np.empty((spec.height, spec.width, 3), dtype=np.uint8)
            img[:] = self.style.floor_bgr
            view = View(self._cams[name], img)
            self._draw_table(view, world)
            for rec in world.receptacles.values():
                self._draw_receptacle(view, rec)
            self._static[(name, "static")] = img
        layer: np.ndarray = self._static[(name, "static")]
        return layer

    # objects ----------------------------------------------------------------------------------
    def _object_marks(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Per object kind: texture dots (unit-radius local coords) and stripe segments."""
        rng = np.random.default_rng([self.style.seed, 0x0B1])
        marks = {}
        for kind in ("cup", "paper"):
            a = rng.uniform(0, 2 * np.pi, 14)
            r = 0.75 * np.sqrt(rng.uniform(0, 1, 14))
            dots = np.stack([r * np.cos(a), r * np.sin(a)], axis=1)
            ang = rng.uniform(0, np.pi)
            d = np.array([math.cos(ang), math.sin(ang)])
            n = np.array([-d[1], d[0]])
            segs = []
            for off in (-0.5, 0.0, 0.5):
                half = math.sqrt(1 - off * off) * 0.9
                segs.append(np.stack([off * n - half * d, off * n + half * d]))
            marks[kind] = (dots, np.array(segs))
        return marks

    def _draw_object(self, view: View, obj: WorldObject, origin: np.ndarray,
                     ax_u: np.ndarray, ax_v: np.ndarray) -> None:
        st = self.style
        colour = st.cup_bgr if obj.kind == "cup" else st.paper_bgr
        c, s = math.cos(obj.yaw), math.sin(obj.yaw)
        u = c * ax_u + s * ax_v
        v = -s * ax_u + c * ax_v
        view.poly(surface(origin, u, v, obj.shape), colour, outline=shade(colour, 0.75))
        if obj.kind == "cup":  # the inside of the cup, seen from above
            view.poly(surface(origin, u, v, obj.shape * 0.72), shade(colour, 0.78))
        else:  # creases
            creases = np.array([[-0.5, -0.2], [0.1, 0.3], [0.4, -0.3]]) * obj.radius
            for a, b in zip(creases[:-1], creases[1:], strict=True):
                p, q = surface(origin, u, v, np.stack([a, b]))
                view.segment(p, q, 0.002, shade(colour, 0.8))
        if st.object_texture == "none":
            return
        dots, segs = self._marks[obj.kind]
        mark = shade(colour, 0.55) if obj.kind == "cup" else shade(colour, 0.7)
        if st.object_texture == "speckle":
            view.dots(surface(origin, u, v, dots * obj.radius), obj.radius * 0.08, mark)
        else:
            for seg in segs:
                a, b = surface(origin, u, v, seg * obj.radius)
                view.segment(a, b, obj.radius * 0.12, mark)

    def _draw_table_objects(self, view: View, world: World) -> None:
        ex, ey = np.array([1.0, 0, 0]), np.array([0, 1.0, 0])
        # objects in the bin first (they are inside it), then the rest
        order = sorted(world.objects.values(), key=lambda o: o.location != "bin")
        for obj in order:
            if obj.location in ("held", "floor"):
                continue
            self._draw_object(view, obj, np.array([obj.x, obj.y, obj.z]), ex, ey)

    # cameras ------------------------------------------------------------------------------------
    def _render_fixed(self, name: str, world: World) -> np.ndarray:
        img = self._static_overhead(name, world).copy()
        view = View(self._cams[name], img)
        self._draw_table_objects(view, world)
        poses = self.arm.frame_poses(world.q, _ARM_FRAMES)
        st = self.style
        view.poly(np.column_stack([0.045 * np.cos(np.linspace(0, 2 * np.pi, 24)),
                                   0.045 * np.sin(np.linspace(0, 2 * np.pi, 24)),
                                   np.full(24, 0.05)]), st.base_bgr)
        p = {k: v[:3, 3] for k, v in poses.items()}
        arm_c, edge = st.arm_bgr, shade(st.arm_bgr, 0.8)
        view.segment(p["upper_arm_link"], p["lower_arm_link"], 0.034, edge)
        view.segment(p["upper_arm_link"], p["lower_arm_link"], 0.028, arm_c)
        view.segment(p["lower_arm_link"], p["wrist_link"], 0.03, edge)
        view.segment(p["lower_arm_link"], p["wrist_link"], 0.024, arm_c)
        grip = poses["gripper_link"]
        jaws, opening = jaw_frame(poses, float(world.q[5]))
        view.segment(p["wrist_link"], jaws[:3, 3] - jaws[:3, 0] * 0.07, 0.032, arm_c)
        held = world.held
        if held is not None:
            self._draw_object(view, held, np.array([held.x, held.y, held.z]),
                              np.array([1.0, 0, 0]), np.array([0, 1.0, 0]))
        plate = np.array([[-0.075, -0.03, 0.015], [-0.055, -0.03, 0.015],
                          [-0.055, 0.03, 0.015], [-0.075, 0.03, 0.015]])
        view.poly(plate @ jaws[:3, :3].T + jaws[:3, 3], arm_c, outline=edge)
        del grip
        self._draw_jaws(view, jaws, opening)
        return img

    def _draw_jaws(self, view: View, jaws: np.ndarray, opening: float) -> None:
        draw_jaws(view, jaws, opening, self.style.finger_bgr)

    def _render_wrist(self, name: str, world: World) -> np.ndarray:
        spec = self.specs[name]
        poses = self.arm.frame_poses(world.q, (TIP_FRAME, "gripper_link"))
        jaws, opening = jaw_frame(poses, float(world.q[5]))
        cam = self._cams[name]
        cam.set_pose(jaws @ WRIST_VIEW)
        st = self.style
        blank = self._static.get(("blank", name))
        if blank is None:
            blank = np.empty((spec.height, spec.width, 3), dtype=np.uint8)
            blank[:] = st.wall_bgr
            self._static[("blank", name)] = blank
        img = blank.copy()
        view = View(cam, img)
        f = 3.0
        view.poly(np.array([[-f, -f, 0.0], [f, -f, 0.0], [f, f, 0.0], [-f, f, 0.0]]),
                  st.floor_bgr)
        self._draw_table(view, world)
        for rec in world.receptacles.values():
            self._draw_receptacle(view, rec)
        self._draw_table_objects(view, world)
        held = world.held
        if held is not None:  # between the jaws, facing the camera
            self._draw_object(view, held, np.array([held.x, held.y, held.z]), jaws[:3, 1],
                              jaws[:3, 2])
        self._draw_jaws(view, jaws, opening)
        return img

    # lighting and noise ------------------------------------------------------------------------
    def _post(self, name: str, img: np.ndarray) -> np.ndarray:
        st = self.style
        if st.light_gain != 1.0 or st.light_gradient > 0:
            mask = self._light.get(name)
            if mask is None:
                mask = self._light_mask(name)
            cv2.multiply(img, mask, dst=img, scale=st.light_gain / 255.0)
        if st.noise_std > 0:
            bank = self._noise.get(name)
            if bank is None:
                bank = self._noise_bank(name)
            pos, neg = bank[int(self._noise_rng.integers(len(bank)))]
            cv2.add(img, pos, dst=img)
            cv2.subtract(img, neg, dst=img)
        return img

    def _light_mask(self, name: str) -> np.ndarray:
        spec = self.specs[name]
        rng = np.random.default_rng([self.style.seed, 0x11647, len(name)])
        cu, cv = rng.uniform(0, spec.width), rng.uniform(0, spec.height)
        yy, xx = np.mgrid[0:spec.height, 0:spec.width].astype(np.float32)
        d = np.hypot(xx - cu, yy - cv) / math.hypot(spec.width, spec.height)
        m = np.clip(255.0 * (1.0 - self.style.light_gradient * d / d.max()), 0, 255)
        mask = np.repeat(m.astype(np.uint8)[:, :, None], 3, axis=2)
        self._light[name] = mask
        return mask

    def _noise_bank(self, name: str, n: int = 6) -> list[tuple[np.ndarray, np.ndarray]]:
        spec = self.specs[name]
        rng = np.random.default_rng([self.style.seed, 0x4015E, len(name)])
        bank = []
        for _ in range(n):
            z = rng.normal(0.0, self.style.noise_std, (spec.height, spec.width, 3))
            bank.append((np.clip(z, 0, 255).astype(np.uint8),
                         np.clip(-z, 0, 255).astype(np.uint8)))
        self._noise[name] = bank
        return bank
