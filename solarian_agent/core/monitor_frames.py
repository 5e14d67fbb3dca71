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
from typing import Any

import cv2
import numpy as np

from . import images as im
from .messages import Image
from .monitor_rules import is_number
from .vision import MonitorImage

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


@dataclass(frozen=True)
class ImageEncoding:
    """How the monitor encodes what it sends (``jpeg`` / ``png`` / ..., quality for jpeg)."""

    format: str = "jpeg"
    quality: int = 90

    def encode(self, pixels: np.ndarray) -> tuple[bytes, str]:
        return im.encode(pixels, self.format, self.quality)


@dataclass(frozen=True)
class Viewing:
    """How a camera frame becomes what the monitor sends: the close-up regions, the other
    cameras' max side and the encoding."""

    close_ups: Mapping[str, Sequence[float]]
    image_max_side: int
    encoding: ImageEncoding

    def view(self, frame: np.ndarray, camera: str) -> tuple[np.ndarray, im.Scaling, bool]:
        return select_view(frame, camera, self.close_ups, self.image_max_side)


class ShotCache:
    """The shots of the latest frames, keyed by (camera, seq, stamp): a frame seen by several
    actions, or on several ticks, is scaled and encoded once.  The oldest go first beyond
    ``capacity`` (enough for every camera's history frames with room to spare)."""

    def __init__(self, viewing: Viewing, capacity: int) -> None:
        self._viewing = viewing
        self._capacity = capacity
        self._shots: collections.OrderedDict[tuple[str, int, float], Shot] = \
            collections.OrderedDict()

    def get(self, key: tuple[str, int, float]) -> Shot | None:
        return self._shots.get(key)

    def shot(self, cam: str, frame: Image) -> Shot:
        key = (cam, frame.seq, frame.stamp)
        shot = self._shots.get(key)
        if shot is not None and shot.frame is frame:
            return shot
        px, scaling, close = self._viewing.view(frame.data, cam)
        px = np.ascontiguousarray(px)
        data, mt = self._viewing.encoding.encode(px)
        shot = Shot(cam, frame, px, scaling, close, data, mt)
        self._shots[key] = shot
        while len(self._shots) > self._capacity:
            self._shots.popitem(last=False)
        return shot

    def __len__(self) -> int:
        return len(self._shots)


def marked_entry(shot: Shot, mark: Box | None, encoding: ImageEncoding) -> Entry:
    """A history frame: the shot as is, or with the mark drawn and encoded again."""
    if mark is None:
        return Entry(shot, None, shot.pixels, shot.data, shot.media_type)
    px = draw_mark(shot.pixels, mark)
    data, mt = encoding.encode(px)
    return Entry(shot, mark, px, data, mt)


def monitor_image(e: Entry, label: str, age: float) -> MonitorImage:
    """A history frame as sent, labelled by age."""
    s = e.shot
    return MonitorImage(s.camera, label, round(age, 3), e.data, e.media_type,
                        s.scaling.sent_w, s.scaling.sent_h, e.pixels, s.close_up, False,
                        e.mark, s.file_name, s.frame.seq, s.frame.stamp)


def image_record(shot: Shot, mark: Box | None, label: str, age: float) -> dict[str, Any]:
    """What the log records of one history frame sent."""
    return {"camera": shot.camera, "label": label, "age_s": round(age, 3),
            "file": f"images/{shot.file_name}", "close_up": shot.close_up,
            "size": [shot.scaling.sent_w, shot.scaling.sent_h],
            "crop": [shot.scaling.x0, shot.scaling.y0, shot.scaling.cw, shot.scaling.ch],
            "capture_size": [shot.scaling.capture_w, shot.scaling.capture_h],
            "seq": shot.frame.seq, "mark": list(mark) if mark is not None else None}


def reference_record(r: MonitorImage) -> dict[str, Any]:
    """What the log records of one reference frame sent."""
    return {"camera": r.camera, "label": "reference", "age_s": r.age_s,
            "file": f"images/{r.file}", "close_up": r.close_up, "size": [r.width, r.height],
            "reference": True, "seq": r.seq, "mark": None}


def point_camera(spec: Mapping[str, Any] | None, cameras: Sequence[str]) -> str:
    """The camera the tool's image points are on: the tool's own, else the only camera."""
    cam = spec.get("camera") if spec else None
    if isinstance(cam, str) and cam:
        return cam
    return cameras[0] if len(cameras) == 1 else ""


def image_points(spec: Mapping[str, Any] | None, params: Mapping[str, Any]
                 ) -> list[tuple[float, float]]:
    """The planner's points in the action's parameters (the tool's ``image_points``)."""
    out = []
    for p in (spec.get("image_points") or ()) if spec else ():
        v = params.get(p)
        if isinstance(v, (list, tuple)) and len(v) == 2 and all(is_number(c) for c in v):
            out.append((float(v[0]), float(v[1])))
    return out


def reference_images(action_id: str, start_frames: Mapping[str, Image], viewing: Viewing,
                     points: Mapping[str, Sequence[tuple[float, float]]], now: float
                     ) -> list[MonitorImage]:
    """The frames from the action's start as sent, ``points`` (capture pixels, by camera)
    drawn where they fall inside the view."""
    refs: list[MonitorImage] = []
    for cam, frame in start_frames.items():
        px, scaling, close = viewing.view(frame.data, cam)
        on_cam = points.get(cam)
        if on_cam:
            sent = [scaling.to_sent(x, y) for x, y in on_cam]
            inside = [(x, y) for x, y in sent
                      if 0 <= x < scaling.sent_w and 0 <= y < scaling.sent_h]
            if inside:
                px = im.draw_points(np.ascontiguousarray(px), inside)
        px = np.ascontiguousarray(px)
        data, mt = viewing.encoding.encode(px)
        ext = "png" if mt == "image/png" else "jpg"
        name = f"monitor_{action_id}_reference_{cam.replace('/', '_')}.{ext}"
        refs.append(MonitorImage(cam, "reference", round(now - frame.stamp, 3), data, mt,
                                 scaling.sent_w, scaling.sent_h, px, close, True, None,
                                 name, frame.seq, frame.stamp))
    return refs


def aged_references(refs: Sequence[MonitorImage], now: float) -> list[MonitorImage]:
    """Reference frames made earlier, their ages brought up to ``now``."""
    return [MonitorImage(r.camera, r.label, round(now - r.stamp, 3), r.data, r.media_type,
                         r.width, r.height, r.pixels, r.close_up, True, None, r.file, r.seq,
                         r.stamp) for r in refs]
