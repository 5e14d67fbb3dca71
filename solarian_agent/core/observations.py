"""Planner observations: every image the planner sees has an id, and points read off it map
back to capture pixels of the tool's camera — refused if the image is too old or was taken
before the robot last moved, since a point read off such an image may no longer be on its
target."""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from . import images as im
from .clock import Clock
from .errors import StaleObservationError, ToolCallRejected
from .messages import Image, JointState
from .text import quote_prefix
from .tool_schema import describe_bad_number, is_bad_number


@dataclass(frozen=True)
class Observation:
    id: str
    camera: str
    capture_stamp: float  # when the frame was captured (clock seconds)
    seq: int
    scaling: im.Scaling
    data: bytes  # encoded as sent to the model (grid and overlays included)
    media_type: str
    frame: Image  # the capture itself (shared, read-only)

    @property
    def width(self) -> int:
        return self.scaling.sent_w

    @property
    def height(self) -> int:
        return self.scaling.sent_h

    @property
    def file_name(self) -> str:
        ext = "png" if self.media_type == "image/png" else "jpg"
        return f"{self.id}_{self.camera.replace('/', '_')}.{ext}"


class MotionTracker:
    """When did the robot last move?  Fed with joint states; a joint counts as moving when it
    changed by more than ``eps`` (rad, or m for the gripper) since the last reading that
    counted as movement: the last fraction of a degree of a move settling is not "moving"."""

    def __init__(self, eps: float = 0.01) -> None:
        self.eps = eps
        self._last: tuple[float, ...] | None = None
        self.last_moved: float = float("-inf")

    def update(self, js: JointState) -> None:
        pos = tuple(js.position)
        if self._last is not None and len(pos) == len(self._last):
            if any(abs(a - b) > self.eps for a, b in zip(pos, self._last, strict=True)):
                self.last_moved = js.stamp
                self._last = pos
        else:
            self._last = pos


# an overlay draws on the image as it will be sent: (image, camera, scaling to the capture)
Overlay = Callable[[np.ndarray, str, im.Scaling], np.ndarray]


class ObservationStore:
    def __init__(
        self,
        clock: Clock,
        image_max_side: int,
        max_point_age_s: float,
        grid: bool = True,
        keep: int = 64,
    ) -> None:
        self.clock = clock
        self.image_max_side = image_max_side
        self.max_point_age_s = max_point_age_s
        self.grid = grid
        self.keep = keep
        self.motion = MotionTracker()
        self._ids = itertools.count(1)
        self._obs: OrderedDict[str, Observation] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, camera: str, frame: Image, overlays: Sequence[Overlay] = (),
            region: tuple[float, float, float, float] | None = None) -> Observation:
        """An observation of ``frame`` (or of ``region``, fractions x0, y0, x1, y1 of it),
        sized to ``image_max_side``; its scaling maps the sent pixels back to the capture."""
        if region is None:
            img, scaling = im.resize_max_side(frame.data, self.image_max_side)
        else:
            crop, cs = im.crop_fraction(frame.data, region)
            img, rs = im.resize_max_side(np.ascontiguousarray(crop), self.image_max_side)
            scaling = im.Scaling(cs.capture_w, cs.capture_h, rs.sent_w, rs.sent_h, cs.x0,
                                 cs.y0, cs.crop_w, cs.crop_h)
        for ov in overlays:
            img = ov(img, camera, scaling)
        if self.grid:
            img = im.draw_grid(img)
        data, mt = im.encode(img)
        obs = Observation(f"obs-{next(self._ids)}", camera, frame.stamp, frame.seq, scaling,
                          data, mt, frame)
        with self._lock:
            self._obs[obs.id] = obs
            while len(self._obs) > self.keep:
                self._obs.popitem(last=False)
        return obs

    def get(self, obs_id: str) -> Observation | None:
        with self._lock:
            return self._obs.get(obs_id)

    def newest(self, camera: str) -> Observation | None:
        with self._lock:
            for o in reversed(self._obs.values()):
                if o.camera == camera:
                    return o
        return None

    def map_point(self, obs_id: str, point: Sequence[float], camera: str | None,
                  param: str = "point") -> tuple[float, float]:
        """Sent-image pixels → capture pixels.  Refused: an unknown id, another camera's image, a
        point that is not [x, y] inside the image, and an image older than ``max_point_age_s`` or
        taken before the robot last moved, whose point may no longer be on its target."""
        obs = self.get(obs_id)
        if obs is None:
            raise ToolCallRejected(f"{param}: unknown observation_id {quote_prefix(obs_id)}; "
                                   "use the id "
                                   "printed with the image you read the point from")
        if camera is not None and obs.camera != camera:
            raise ToolCallRejected(f"{param}: this tool points in the {camera} image, but "
                                   f"{obs_id} is from {obs.camera}")
        if (not isinstance(point, (list, tuple)) or len(point) != 2
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                           for v in point)):
            raise ToolCallRejected(f"{param} must be [x, y] pixels, got {quote_prefix(point)}")
        for i, v in enumerate(point):
            if is_bad_number(v):  # float() of a 400-digit integer would raise
                raise ToolCallRejected(f"{param}[{i}]: {describe_bad_number(v)}")
        x, y = float(point[0]), float(point[1])
        if not (0 <= x < obs.width and 0 <= y < obs.height):
            raise ToolCallRejected(f"{param} [{x:g}, {y:g}] is outside {obs_id} "
                                   f"({obs.width}x{obs.height} px)")
        now = self.clock.now()
        age = now - obs.capture_stamp
        if age > self.max_point_age_s:
            raise StaleObservationError(
                f"{param}: {obs_id} is {age:.1f} s old (max_point_age_s is "
                f"{self.max_point_age_s:g}); observe again and point in the new image")
        if obs.capture_stamp < self.motion.last_moved:
            raise StaleObservationError(
                f"{param}: {obs_id} was taken before the robot last moved; observe again and "
                "point in the new image")
        return obs.scaling.to_capture(x, y)
