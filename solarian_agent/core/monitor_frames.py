"""The monitor's frame preparation: what it sees each tick, per camera.

A camera listed in ``close_ups`` is seen only as that region at capture resolution; the others
whole at ``image_max_side``.  Frames never carry overlays.  With ``mark_target`` a 1 px cyan box
is drawn 3 px outside the target's bounds (from the ``target_box`` port); with ``reference``
(default) the frames from the action's start come first, with the planner's point drawn on the
tool's camera.  Images are saved unmarked (the mark box is logged beside them), so a tick can
be replayed with or without the mark.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np

from . import images as im
from .messages import Image
from .monitor_rules import is_number
from .vision import MonitorImage

if TYPE_CHECKING:
    from .monitor import MonitorEngine, WatchedAction

MARK_MARGIN = 3
MARK_COLOR = (255, 255, 0)  # BGR cyan

Box = tuple[int, int, int, int]
# (action_id, tracker fields of the action, camera, frame) -> the target's bounds in capture
# pixels (x0, y0, x1, y1 inclusive), or None when the target is not known in that frame
TargetBoxFn = Callable[[str, Sequence[str], str, Image], "Box | None"]


@dataclass(frozen=True)
class Shot:
    """One camera frame as the monitor sees it, before any mark: the close-up or the resized
    view, its scaling to the capture and its encoding."""

    camera: str
    frame: Image
    pixels: np.ndarray
    scaling: im.Scaling
    close_up: bool
    data: bytes
    media_type: str

    @property
    def file_name(self) -> str:
        ext = "png" if self.media_type == "image/png" else "jpg"
        cam = self.camera.replace("/", "_")
        return f"monitor_{cam}_{self.frame.seq:06d}_{int(round(self.frame.stamp * 1000))}.{ext}"


def select_view(frame: np.ndarray, camera: str, close_ups: Mapping[str, Sequence[float]],
                image_max_side: int) -> tuple[np.ndarray, im.Scaling, bool]:
    """A close-up camera's region at capture resolution, or the whole frame at max side."""
    box = close_ups.get(camera)
    if box is not None:
        crop, scaling = im.crop_fraction(frame, (float(box[0]), float(box[1]), float(box[2]),
                                                 float(box[3])))
        return crop, scaling, True
    out, scaling = im.resize_max_side(frame, image_max_side)
    return out, scaling, False


def box_to_sent(box: Box, scaling: im.Scaling) -> Box | None:
    """Inclusive capture-pixel bounds → inclusive bounds of the sent pixels they touch (None
    when the box lies wholly outside the sent image)."""
    x0, y0, x1, y1 = box
    sx0 = math.floor((x0 - scaling.x0) / scaling.sx)
    sy0 = math.floor((y0 - scaling.y0) / scaling.sy)
    sx1 = math.ceil((x1 + 1 - scaling.x0) / scaling.sx) - 1
    sy1 = math.ceil((y1 + 1 - scaling.y0) / scaling.sy) - 1
    if sx1 < 0 or sy1 < 0 or sx0 >= scaling.sent_w or sy0 >= scaling.sent_h:
        return None
    return sx0, sy0, sx1, sy1


def draw_mark(img: np.ndarray, box: Box, margin: int = MARK_MARGIN) -> np.ndarray:
    """A 1 px cyan box ``margin`` px outside ``box``; sides outside the image are not drawn,
    so the mark never lands on the target's own pixels at an image edge."""
    out = img.copy()
    x0, y0, x1, y1 = box
    cv2.rectangle(out, (x0 - margin, y0 - margin), (x1 + margin, y1 + margin), MARK_COLOR, 1,
                  cv2.LINE_4)
    return out


def mask_bounds(mask: np.ndarray) -> Box | None:
    """Inclusive bounds of a tracker mask's set pixels (None: empty mask)."""
    ys, xs = np.nonzero(np.asarray(mask))
    if xs.size == 0:
        return None
    return int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max())


def tracker_target_box(result: Callable[[str], Any]) -> TargetBoxFn:
    """A ``target_box`` port over trackers: ``result(field)`` returns the tracker's latest
    :class:`~.executor.TrackerResult` (``mask`` and / or ``box`` with exclusive x1, y1).  The
    bounds of the mask when it matches the frame, else the box; fields are
    ``<camera>.<name>``, so only the trackers on the frame's camera count."""

    def target_box(action_id: str, trackers: Sequence[str], camera: str, frame: Image
                   ) -> Box | None:
        for f in trackers:
            if f.split(".", 1)[0] != camera:
                continue
            res = result(f)
            if res is None:
                continue
            mask = getattr(res, "mask", None)
            if mask is not None and np.asarray(mask).shape[:2] == (frame.height, frame.width):
                b = mask_bounds(mask)
                if b is not None:
                    return b
            box = getattr(res, "box", None)
            if box is not None and len(box) == 4:
                x0, y0, x1, y1 = (int(v) for v in box)
                return x0, y0, max(x0, x1 - 1), max(y0, y1 - 1)
        return None

    return target_box


def history_labels(stamps: Sequence[float], now: float) -> list[str]:
    """Oldest first: ``N.N s ago`` ..., ``previous``, ``current``."""
    n = len(stamps)
    out = []
    for i, st in enumerate(stamps):
        if i == n - 1:
            out.append("current")
        elif i == n - 2:
            out.append("previous")
        else:
            out.append(f"{max(0.0, now - st):.1f} s ago")
    return out


@dataclass(frozen=True)
class Entry:
    """One history frame of one action: the shot, its mark and the pixels / encoding as sent
    (marked once, when the frame was taken)."""

    shot: Shot
    mark: Box | None
    pixels: np.ndarray
    data: bytes
    media_type: str


class MonitorFraming:
    """Takes, scales, marks and records the frames of each tick.  ``self.e``: the engine."""

    def __init__(self, engine: MonitorEngine) -> None:
        self.e = engine
        self.shots: collections.OrderedDict[tuple[str, int, float], Shot] = \
            collections.OrderedDict()

    def shot(self, cam: str, frame: Image) -> Shot:
        key = (cam, frame.seq, frame.stamp)
        shot = self.shots.get(key)
        if shot is not None and shot.frame is frame:
            return shot
        px, scaling, close = select_view(frame.data, cam, self.e.config.close_ups,
                                         self.e.config.image_max_side)
        px = np.ascontiguousarray(px)
        data, mt = im.encode(px, self.e.image_format, self.e.jpeg_quality)
        shot = Shot(cam, frame, px, scaling, close, data, mt)
        self.shots[key] = shot
        while len(self.shots) > 4 * max(1, len(self.e.cameras)) * max(1, self.e.config.history):
            self.shots.popitem(last=False)
        return shot

    def mark_for(self, act: WatchedAction, cam: str, shot: Shot) -> Box | None:
        if not self.e.config.mark_target or self.e.target_box is None:
            return None
        try:
            box = self.e.target_box(act.action_id, act.trackers, cam, shot.frame)
        except Exception as e:
            self.e.log_event("monitor_error", action_id=act.action_id,
                             error=f"target_box raised {type(e).__name__}: {e}")
            return None
        return None if box is None else box_to_sent(box, shot.scaling)

    def take_frames(self, act: WatchedAction) -> list[tuple[str, Shot, Box | None]]:
        out = []
        for cam, sub in self.e.frames.items():
            frame = sub.latest()
            if not isinstance(frame, Image):
                continue
            shot = self.shot(cam, frame)
            out.append((cam, shot, self.mark_for(act, cam, shot)))
        return out

    def entry(self, shot: Shot, mark: Box | None) -> Entry:
        if mark is None:
            return Entry(shot, None, shot.pixels, shot.data, shot.media_type)
        px = draw_mark(shot.pixels, mark)
        data, mt = im.encode(px, self.e.image_format, self.e.jpeg_quality)
        return Entry(shot, mark, px, data, mt)

    @staticmethod
    def monitor_image(e: Entry, label: str, age: float) -> MonitorImage:
        s = e.shot
        return MonitorImage(s.camera, label, round(age, 3), e.data, e.media_type,
                            s.scaling.sent_w, s.scaling.sent_h, e.pixels, s.close_up, False,
                            e.mark, s.file_name, s.frame.seq, s.frame.stamp)

    def reference(self, act: WatchedAction, now: float) -> list[MonitorImage]:
        if act.reference is not None:
            return [MonitorImage(r.camera, r.label, round(now - r.stamp, 3), r.data,
                                 r.media_type, r.width, r.height, r.pixels, r.close_up, True,
                                 None, r.file, r.seq, r.stamp) for r in act.reference]
        refs: list[MonitorImage] = []
        point_cam = self.point_camera(act)
        points = self.points(act)
        for cam, frame in act.start_frames.items():
            px, scaling, close = select_view(frame.data, cam, self.e.config.close_ups,
                                             self.e.config.image_max_side)
            if cam == point_cam and points:
                sent = [scaling.to_sent(x, y) for x, y in points]
                inside = [(x, y) for x, y in sent
                          if 0 <= x < scaling.sent_w and 0 <= y < scaling.sent_h]
                if inside:
                    px = im.draw_points(np.ascontiguousarray(px), inside)
            px = np.ascontiguousarray(px)
            data, mt = im.encode(px, self.e.image_format, self.e.jpeg_quality)
            ext = "png" if mt == "image/png" else "jpg"
            name = f"monitor_{act.action_id}_reference_{cam.replace('/', '_')}.{ext}"
            refs.append(MonitorImage(cam, "reference", round(now - frame.stamp, 3), data, mt,
                                     scaling.sent_w, scaling.sent_h, px, close, True, None,
                                     name, frame.seq, frame.stamp))
        act.reference = refs
        return refs

    def point_camera(self, act: WatchedAction) -> str:
        spec = self.spec(act.tool)
        cam = spec.get("camera") if spec else None
        if isinstance(cam, str) and cam:
            return cam
        return self.e.cameras[0] if len(self.e.cameras) == 1 else ""

    def points(self, act: WatchedAction) -> list[tuple[float, float]]:
        spec = self.spec(act.tool)
        out = []
        for p in (spec.get("image_points") or ()) if spec else ():
            v = act.params.get(p)
            if (isinstance(v, (list, tuple)) and len(v) == 2
                    and all(is_number(c) for c in v)):
                out.append((float(v[0]), float(v[1])))
        return out

    def spec(self, tool: str) -> Mapping[str, Any] | None:
        return self.e.catalogue.get(tool)

    def image_record(self, shot: Shot, mark: Box | None, label: str, age: float
                     ) -> dict[str, Any]:
        return {"camera": shot.camera, "label": label, "age_s": round(age, 3),
                "file": f"images/{shot.file_name}", "close_up": shot.close_up,
                "size": [shot.scaling.sent_w, shot.scaling.sent_h],
                "crop": [shot.scaling.x0, shot.scaling.y0, shot.scaling.cw, shot.scaling.ch],
                "capture_size": [shot.scaling.capture_w, shot.scaling.capture_h],
                "seq": shot.frame.seq, "mark": list(mark) if mark is not None else None}

    def save_shots(self, shots: Sequence[Shot]) -> None:
        log = self.e.log_fn()
        if log is None:
            return
        for s in shots:
            if not log.has_image(s.file_name):
                log.save_image(s.file_name, s.data)
