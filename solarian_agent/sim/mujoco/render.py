"""The cameras of the MuJoCo scene, rendered offscreen with OpenGL (BGR uint8, like the 2D
renderer's frames).

:class:`MujocoRenderer` is a :class:`~solarian_agent.sim.camera.CameraRig`: the camera models it
publishes (``CameraInfo``, pixel <-> table) are the URDF's optical frames and the
:data:`~solarian_agent.sim.camera.CAMERA_SPECS` intrinsics, the same as the 2D renderer's and
the skills'.  The MJCF's cameras sit on the same frames with the same field of view, so a
point on the table lands on the same pixel in both backends (unless a style jitters the
cameras on purpose).  The wrist camera is the 2D renderer's close-up, which the classical
monitor and the held check read: from behind the jaws' gap
(:func:`~solarian_agent.sim.drawing.jaw_frame`), a viewpoint inside the gripper's body, so it
draws the scene and the jaws' fingers only (``FINGER_VIEW_GROUP``).  From the URDF's
wrist_camera, beside the fixed jaw, the fixed jaw would hide an object held between the jaws.

One GL context (opened at construction: :func:`~solarian_agent.sim.mujoco.gl.open_context`
fails with the reason instead of hanging) renders every camera into its own viewport of one
offscreen buffer.  A context is current on one thread only, so every GL call runs on the
renderer's own GL thread; ``render`` may be called from any thread (the sim node renders on
its loop thread) and waits for its frame, at most ``frame_timeout_s``.  No shadows, no
reflections, no multisampling: a frame of the low-poly scene
costs a few milliseconds on Mesa's software rasteriser.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import cv2
import mujoco
import numpy as np

from solarian_agent.arm.kinematics import TIP_FRAME, ArmModel

from ..camera import OVERHEAD, WRIST, CameraRig, CameraSpec, RenderError
from ..drawing import WRIST_VIEW, jaw_frame, paint_jaws
from ..visual_style import VisualStyle, shade
from . import gl
from .scene import KEY_AMBIENT, KEY_DIFFUSE, TABLE_MATERIALS
from .style import SceneStyle

# the MJCF cameras look along -z with y up; the optical frames along +z with y down
_CAM_QUAT = np.array([0.0, 1.0, 0.0, 0.0])
_VISIBLE_GROUPS = (0, 1)  # scene geoms and the arm's visual geoms (3: collision, hidden)
_SCENE_GROUPS = (0,)  # the wrist close-up: the scene (its jaws are painted over it)
# the camera-borne light (ambient, diffuse): faint for the cameras, brighter for the close-up
_HEADLIGHT = ((0.0, 0.0, 0.0), (0.1, 0.1, 0.1))
_CLOSE_UP_HEADLIGHT = ((0.25, 0.25, 0.25), (0.3, 0.3, 0.3))
FRAME_TIMEOUT_S = 30.0  # a frame not drawn by then is an error, not a hang


def _rgba(bgr: tuple[int, int, int]) -> np.ndarray:
    b, g, r = bgr
    return np.array([r / 255.0, g / 255.0, b / 255.0, 1.0])


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
                     w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
                     w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def _rotvec_quat(r: np.ndarray) -> np.ndarray:
    angle = float(np.linalg.norm(r))
    if angle < 1e-12:
        return np.array([1.0, 0.0, 0.0, 0.0])
    axis = r / angle
    return np.concatenate([[math.cos(angle / 2)], math.sin(angle / 2) * axis])


def _offset(t: np.ndarray, r: np.ndarray) -> np.ndarray:
    """The pose (4x4) of a camera nudge: translation ``t`` (m), rotation vector ``r``."""
    rot = np.empty(9)
    mujoco.mju_quat2Mat(rot, _rotvec_quat(np.asarray(r, float)))
    out = np.eye(4)
    out[:3, :3], out[:3, 3] = rot.reshape(3, 3), t
    return out


class MujocoRenderer(CameraRig):
    """Renders a :class:`~solarian_agent.sim.mujoco.world.MujocoWorld` from its cameras."""

    def __init__(
        self,
        arm: ArmModel,
        style: SceneStyle | VisualStyle = SceneStyle(),
        cameras: Sequence[CameraSpec] = (OVERHEAD, WRIST),
        gl_timeout_s: float = gl.PROBE_TIMEOUT_S,
        wrist_close_up: bool = True,
    ) -> None:
        super().__init__(arm, cameras)
        # False: the wrist camera as mounted (the URDF's wrist_camera_optical, the arm drawn):
        # what a real wrist camera sees, for its hand-eye calibration in bring-up
        self.wrist_close_up = wrist_close_up
        self.style = style if isinstance(style, SceneStyle) else SceneStyle(visual=style)
        width = max(s.width for s in self.specs.values())
        height = max(s.height for s in self.specs.values())
        self.frame_timeout_s = FRAME_TIMEOUT_S
        # a GL context is current on one thread: every GL call runs on this one
        self._gl = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mujoco-gl")
        try:
            self._ctx = self._gl.submit(gl.open_context, width, height,
                                        gl_timeout_s).result(timeout=gl_timeout_s + 30.0)
        except BaseException:
            self._gl.shutdown(wait=False)
            raise
        self._model: Any = None
        self._con: Any = None
        self._scene: Any = None
        self._cam_ids: dict[str, int] = {}
        self._views: dict[str, np.ndarray] = {}  # camera -> its optical frame (world) now
        self._opt = mujoco.MjvOption()
        for g in range(len(self._opt.geomgroup)):
            self._opt.geomgroup[g] = 1 if g in _VISIBLE_GROUPS else 0
        for g in range(len(self._opt.sitegroup)):
            self._opt.sitegroup[g] = 0
        self._buf = {n: np.empty((s.height, s.width, 3), dtype=np.uint8)
                     for n, s in self.specs.items()}
        self._vcam = mujoco.MjvCamera()
        self._vcam.type = mujoco.mjtCamera.mjCAMERA_FIXED
        self.frames_rendered = 0

    # GL state ---------------------------------------------------------------------------------
    def _on_gl(self, fn: Any, *args: Any) -> Any:
        """Run ``fn`` on the GL thread and return its result (or raise what it raised); a
        frame that takes longer than ``frame_timeout_s`` is a :class:`RenderError`."""
        if self._ctx is None:
            raise RenderError("the renderer is closed")
        try:
            return self._gl.submit(fn, *args).result(timeout=self.frame_timeout_s)
        except FutureTimeout:
            raise RenderError(f"no frame from the GL thread within "
                              f"{self.frame_timeout_s:g} s") from None

    def _prepare(self, model: Any) -> None:
        """A render context for ``model`` (a world's reset builds a new model)."""
        if model is self._model:
            return
        if self._con is not None:
            self._con.free()
        self._con = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_100)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, self._con)
        self._scene = mujoco.MjvScene(model, maxgeom=400)
        for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION):
            self._scene.flags[flag] = 0
        self._cam_ids = {}
        for name in self.specs:
            cid = int(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, name))
            if cid < 0:
                raise RenderError(f"camera {name!r} is not in the MuJoCo model")
            self._cam_ids[name] = cid
        self._model = model

    def _apply_style(self, model: Any, data: Any) -> None:
        """The style's colours, table texture, lights and camera poses, on the model's visual
        fields (nothing the physics reads)."""
        st, vis = self.style, self.style.visual

        def mat(name: str, bgr: tuple[int, int, int]) -> None:
            mid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_MATERIAL, name)
            if mid >= 0:
                model.mat_rgba[mid] = _rgba(bgr)

        for name in TABLE_MATERIALS:
            mat(name, vis.table_bgr)
        mat("floor", vis.floor_bgr)
        mat("leg", shade(vis.floor_bgr, 1.2))
        mat("cup", vis.cup_bgr)
        mat("cup_inside", shade(vis.cup_bgr, 0.78))
        mat("paper", vis.paper_bgr)
        mat("tray", vis.tray_bgr)
        mat("tray_rim", shade(vis.tray_bgr, 0.85))
        mat("bin", vis.bin_bgr)
        mat("bin_rim", shade(vis.bin_bgr, 1.6))
        # the arm's printed parts in the style's arm colour, as the 2D renderer draws the arm
        # (the URDF's yellow print is the paper ball's colour to the overhead's segmentation:
        # a parked arm would read as the paper), its servos in the base's
        mat("arm_printed", vis.arm_bgr)
        mat("arm_servo", vis.base_bgr)
        table = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "table")
        tex = f"table_{vis.table_texture}" if vis.table_texture != "none" else "table_plain"
        model.geom_matid[table] = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_MATERIAL, tex)
        g = vis.light_gain
        key = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_LIGHT, "key")
        model.light_diffuse[key] = KEY_DIFFUSE * g
        model.light_ambient[key] = KEY_AMBIENT * g
        model.light_dir[key] = st.key_light_dir()
        for name in self.specs:
            t, r = st.camera_offset(name)
            cid = self._cam_ids[name]
            view = self._views.get(name)
            if view is None:
                model.cam_pos[cid] = t
                model.cam_quat[cid] = _quat_mul(_rotvec_quat(r), _CAM_QUAT)
                continue
            # the view (optical frame, world) with the style's offset, in the camera's body
            body = int(model.cam_bodyid[cid])
            b = np.eye(4)
            b[:3, :3], b[:3, 3] = data.xmat[body].reshape(3, 3), data.xpos[body]
            rel = np.linalg.solve(b, view @ _offset(t, r))
            quat = np.empty(4)
            mujoco.mju_mat2Quat(quat, rel[:3, :3].ravel())
            model.cam_pos[cid] = rel[:3, 3]
            model.cam_quat[cid] = _quat_mul(quat, _CAM_QUAT)
        mujoco.mj_camlight(model, data)

    # rendering -------------------------------------------------------------------------------
    def render(self, name: str, world: Any) -> np.ndarray:
        """A new BGR frame of camera ``name`` showing ``world`` now (drawn on the GL thread
        while the caller waits, so the world does not move meanwhile)."""
        spec = self.specs.get(name)
        if spec is None:
            raise RenderError(f"unknown camera {name!r}; cameras are {self.cameras}")
        jaws: tuple[np.ndarray, float] | None = None
        if name == WRIST.name and self.wrist_close_up:
            poses = self.arm.frame_poses(world.q, (TIP_FRAME, "gripper_link"))
            jaws = jaw_frame(poses, float(world.q[5]))
            self._views[name] = jaws[0] @ WRIST_VIEW
        out: np.ndarray = self._on_gl(self._draw, name, world)
        if name not in self._fixed:  # the model follows the frame it drew
            view = self._views.get(name)
            self._cams[name].set_pose(view if view is not None
                                      else self.arm.frame_pose(world.q, spec.frame))
        if jaws is not None:
            # the close-up's jaws, painted as the 2D renderer paints them, seen from where
            # the frame was drawn (the style may have nudged the camera)
            t, r = self.style.camera_offset(name)
            seen = copy.copy(self._cams[name])
            seen.set_pose(self._views[name] @ _offset(t, r))
            paint_jaws(seen, out, jaws[0], jaws[1], self.style.visual.finger_bgr)
        self.frames_rendered += 1
        return out

    def _draw(self, name: str, world: Any) -> np.ndarray:
        spec = self.specs[name]
        model, data = world.model, world.data
        self._prepare(model)
        self._apply_style(model, data)
        self._vcam.fixedcamid = self._cam_ids[name]
        close_up = name in self._views
        groups = _SCENE_GROUPS if close_up else _VISIBLE_GROUPS
        for g in range(len(self._opt.geomgroup)):
            self._opt.geomgroup[g] = 1 if g in groups else 0
        # the close-up exposes for what is between the jaws, as a wrist camera's auto exposure
        # does: a held object seen from below (the jaws up, at home) is otherwise in the key
        # light's shadow, too dark to tell its colour
        head = model.vis.headlight
        head.ambient[:], head.diffuse[:] = (_CLOSE_UP_HEADLIGHT if close_up
                                            else _HEADLIGHT)
        mujoco.mjv_updateScene(model, data, self._opt, None, self._vcam,
                               mujoco.mjtCatBit.mjCAT_ALL, self._scene)
        viewport = mujoco.MjrRect(0, 0, spec.width, spec.height)
        mujoco.mjr_render(viewport, self._scene, self._con)
        buf = self._buf[name]
        mujoco.mjr_readPixels(buf, None, viewport, self._con)
        # OpenGL's rows run bottom-up and its pixels are RGB
        out: np.ndarray = cv2.flip(cv2.cvtColor(buf, cv2.COLOR_RGB2BGR), 0)
        return out

    def render_all(self, world: Any) -> dict[str, np.ndarray]:
        return {name: self.render(name, world) for name in self.specs}

    def close(self) -> None:
        """Free the GL resources and stop the GL thread (the renderer cannot draw
        afterwards)."""
        if self._ctx is None:
            return

        def free() -> None:
            if self._con is not None:
                self._con.free()
                self._con = None
            self._ctx.free()

        try:
            self._gl.submit(free).result(timeout=self.frame_timeout_s)
        except FutureTimeout:
            pass  # a stuck driver: the thread is left behind, the renderer is closed anyway
        finally:
            self._model = None
            self._ctx = None
            self._gl.shutdown(wait=False)
