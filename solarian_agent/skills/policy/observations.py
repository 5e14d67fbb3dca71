"""Observations and actions of a policy, as its config says (:mod:`.config`).

:class:`ObservationBuilder` reads the skill's ports on the control loop (joint state, the
newest camera frames, the tracker's mask) and returns the model's feeds, batch of 1, float32:

* ``state``: the configured joints (rad; the gripper as the moving jaw's angle), then the
  configured joint velocities (from ``joint_states``), then the goal:
  the table point (x, y in metres, the arm's base frame) under the planner's ``point``
  (``goal: point``) or under the centroid of the tracker's mask seeded with it
  (``goal: tracker_centroid``; the point itself when the tracker has no mask), unprojected
  at the tool's ``point_z``, taken once, at the first observation of the action; then
  ``(x - mean) / std`` when ``normalise`` is given;
* each image: the camera's newest frame resized (area interpolation) to ``size``, RGB,
  channels first, ``unit`` (0..1) or ``imagenet`` (0..1, then per channel mean / std);
* ``mask``: the tracker's mask resized (nearest) to ``size``, 0 or 1, one channel.

:func:`to_targets` turns one action row into joint targets: ``x * std + mean`` when
``unnormalise`` is given, then absolute targets or deltas added to the joints observed with
the chunk's observation.  Targets then go through the arm port like every other command, and
the arm driver's safety layer (joint, speed, step and workspace limits) has the last word.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import cv2
import numpy as np

from ...core.errors import SkillFailed
from .config import IMAGENET_MEAN, IMAGENET_STD, PolicyConfig


class ObservationBuilder:
    def __init__(self, cfg: PolicyConfig, ports: Mapping[str, Any], params: Mapping[str, Any]
                 ) -> None:
        self.cfg = cfg
        self.ports = ports
        self.params = params
        self._goal: np.ndarray | None = None

    def _port(self, name: str) -> Any:
        p = self.ports.get(name)
        if p is None:
            raise SkillFailed(f"the policy needs the {name!r} port")
        return p

    def joints(self) -> tuple[dict[str, float], dict[str, float]]:
        """(positions, velocities) by joint name from the newest joint_states."""
        js = self._port("arm").state()
        d = js.as_dict()
        missing = [j for j in self.cfg.state.joints if j not in d]
        if missing:
            raise SkillFailed(f"joint_states lacks joint {missing[0]!r}")
        vel: dict[str, float] = {}
        if self.cfg.state.velocities:
            v = tuple(getattr(js, "velocity", ()) or ())
            if len(v) != len(js.name):
                raise SkillFailed("the policy reads joint velocities, and joint_states "
                                  "carries none")
            vel = {str(n): float(x) for n, x in zip(js.name, v, strict=True)}
        return {k: float(v) for k, v in d.items()}, vel

    def tracker_field(self) -> str:
        return f"{self.cfg.state.goal_camera}.target"

    def goal_xy(self) -> np.ndarray:
        """The goal, fixed at the first observation (as the policy was trained: where the
        object stood when the pick began); a tracker that later follows the jaws over the
        object does not move it."""
        if self._goal is None:
            self._goal = self._goal_now()
        return self._goal

    def _goal_now(self) -> np.ndarray:
        st = self.cfg.state
        pt = self.params.get("point")
        if not (isinstance(pt, (list, tuple)) and len(pt) == 2):
            raise SkillFailed("the policy's goal needs the planner's point [x, y]")
        u, v = float(pt[0]), float(pt[1])
        if st.goal == "tracker_centroid":
            trackers = self.ports.get("trackers")
            res = trackers.result(self.tracker_field()) if trackers is not None else None
            if res is not None and res.mask is not None and np.any(res.mask):
                ys, xs = np.nonzero(res.mask)
                u, v = float(xs.mean()), float(ys.mean())
        z = float(self.params.get("point_z", 0.0))
        return np.asarray(self._port("cameras").unproject(st.goal_camera, u, v, z)[:2], float)

    def state(self, joints: Mapping[str, float], goal: np.ndarray | None,
              velocities: Mapping[str, float] | None = None) -> np.ndarray:
        st = self.cfg.state
        vel = velocities or {}
        x = np.array([joints[j] for j in st.joints]
                     + [vel.get(j, 0.0) for j in st.velocities], dtype=np.float64)
        if st.goal != "none":
            assert goal is not None
            x = np.concatenate([x, goal])
        if st.normalise is not None:
            x = (x - np.asarray(st.normalise.mean)) / np.asarray(st.normalise.std)
        return x.astype(np.float32)[None, :]

    def build(self) -> tuple[dict[str, np.ndarray], dict[str, float]]:
        """(the model's feeds, the joints observed)."""
        joints, vel = self.joints()
        goal = self.goal_xy() if self.cfg.state.goal != "none" else None
        feeds = {self.cfg.state.input: self.state(joints, goal, vel)}
        for im in self.cfg.images:
            frame = self._port("cameras").frame(im.camera)
            if frame is None:
                raise SkillFailed(f"no frame from camera {im.camera!r} yet")
            feeds[im.input] = image_input(frame.data, im.size, im.normalise)
        mk = self.cfg.mask
        if mk is not None:
            trackers = self.ports.get("trackers")
            res = trackers.result(f"{mk.camera}.target") if trackers is not None else None
            if res is None or res.mask is None:
                raise SkillFailed(f"the policy reads the tracker's mask on {mk.camera!r}, "
                                  "and the tracker has none")
            feeds[mk.input] = mask_input(np.asarray(res.mask), mk.size)
        return feeds, joints


def image_input(bgr: np.ndarray, size: tuple[int, int], normalise: str) -> np.ndarray:
    """(1, 3, h, w) float32 from a BGR uint8 frame."""
    small = cv2.resize(bgr, size, interpolation=cv2.INTER_AREA)
    rgb = small[:, :, ::-1].astype(np.float32) / 255.0
    if normalise == "imagenet":
        rgb = (rgb - np.asarray(IMAGENET_MEAN, np.float32)) / np.asarray(IMAGENET_STD,
                                                                         np.float32)
    return np.ascontiguousarray(rgb.transpose(2, 0, 1))[None]


def mask_input(mask: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    small = cv2.resize(mask.astype(np.uint8), size, interpolation=cv2.INTER_NEAREST)
    return (small > 0).astype(np.float32)[None, None]


def to_targets(cfg: PolicyConfig, row: np.ndarray, observed: Mapping[str, float]
               ) -> dict[str, float]:
    a = cfg.action
    x = np.asarray(row, dtype=np.float64)
    if a.unnormalise is not None:
        x = x * np.asarray(a.unnormalise.std) + np.asarray(a.unnormalise.mean)
    if a.mode == "delta":
        x = x + np.array([observed[j] for j in a.joints])
    return {j: float(v) for j, v in zip(a.joints, x, strict=True)}
