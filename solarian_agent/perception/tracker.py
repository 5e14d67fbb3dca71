"""A colour tracker seeded with a point (the harness's ``services_for`` trackers).

Seeded at a pixel, it segments the connected region whose colour is close to the seed's
(flood fill in Lab space); on every new frame it re-segments around its last centroid.  A
point that misses the object selects the background, whose mask is huge: the harness then
refuses the call through ``max_target_area``.  Masks are logged as overlays
(``overlays/<camera>.<field>.jsonl``) in the pixels of the frame as it arrived.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from ..core import names
from ..core.executor import TrackerResult
from ..core.messages import Image
from ..core.skill import TrackerRequest
from ..core.transport import Bus, QoS
from .images import Scaling


@dataclass
class _Track:
    request: TrackerRequest
    seed_lab: np.ndarray
    point: tuple[float, float]
    result: TrackerResult
    last_seq: int = -1


def segment_at(img: np.ndarray, point: tuple[float, float], tol: int = 18
               ) -> tuple[np.ndarray, np.ndarray]:
    """(mask, seed colour in Lab) of the region around ``point`` with a colour close to it."""
    h, w = img.shape[:2]
    u = int(np.clip(round(point[0]), 0, w - 1))
    v = int(np.clip(round(point[1]), 0, h - 1))
    lab = cv2.cvtColor(img, cv2.COLOR_BGR2LAB)
    # the seed colour: median of a small patch, robust to an edge pixel
    patch = lab[max(0, v - 2):v + 3, max(0, u - 2):u + 3].reshape(-1, 3)
    seed = np.median(patch, axis=0).astype(np.int16)
    dist = np.abs(lab.astype(np.int16) - seed).max(axis=2)
    similar = (dist <= tol).astype(np.uint8)
    n, labels = cv2.connectedComponents(similar, connectivity=8)
    lab_id = labels[v, u]
    if lab_id == 0:
        # the seed pixel sits on an edge and differs from its patch: seed with the pixel itself
        seed = lab[v, u].astype(np.int16)
        similar = (np.abs(lab.astype(np.int16) - seed).max(axis=2) <= tol).astype(np.uint8)
        n, labels = cv2.connectedComponents(similar, connectivity=8)
        lab_id = labels[v, u]
    return labels == lab_id, seed


def _result(mask: np.ndarray) -> TrackerResult:
    area = int(mask.sum())
    if area == 0:
        return TrackerResult(None, None, None)
    ys, xs = np.nonzero(mask)
    box = (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1)
    return TrackerResult(area / mask.size, box, mask)


class ColorTrackers:
    """Implements the executor's TrackerPort over the camera topics of a Bus."""

    def __init__(self, bus: Bus, cameras: tuple[str, ...] = (),
                 overlay_sink: Callable[[str, str, dict[str, Any]], None] | None = None,
                 tol: int = 18) -> None:
        self.bus = bus
        self.tol = tol
        self.overlay_sink = overlay_sink
        self._subs: dict[str, Any] = {}
        for cam in cameras:  # subscribe now, so the newest frame is there when seeded
            self._frame(cam)
        self._tracks: dict[str, _Track] = {}
        self._lock = threading.Lock()

    def _frame(self, camera: str) -> Image | None:
        sub = self._subs.get(camera)
        if sub is None:
            sub = self.bus.subscribe(names.image_topic(camera), names.T_IMAGE,
                                     qos=QoS(depth=1), node="trackers")
            self._subs[camera] = sub
        return sub.latest()  # type: ignore[no-any-return]

    def start(self, request: TrackerRequest, point: tuple[float, float]) -> TrackerResult:
        frame = self._frame(request.camera)
        if frame is None:
            raise RuntimeError(f"no frame from camera {request.camera!r} yet")
        mask, seed = segment_at(frame.data, point, self.tol)
        res = _result(mask)
        with self._lock:
            self._tracks[request.field] = _Track(request, seed, point, res, frame.seq)
        self._log(request, frame, res)
        return res

    def stop(self, field: str) -> None:
        with self._lock:
            self._tracks.pop(field, None)

    def result(self, field: str) -> TrackerResult | None:
        with self._lock:
            t = self._tracks.get(field)
            return t.result if t else None

    def update(self) -> None:
        """Follow every tracked target on its camera's newest frame (called each tick)."""
        with self._lock:
            tracks = list(self._tracks.values())
        for t in tracks:
            frame = self._frame(t.request.camera)
            if frame is None or frame.seq == t.last_seq:
                continue
            box = t.result.box
            centre = ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2) if box else t.point
            mask, _ = segment_at(frame.data, centre, self.tol)
            t.result = _result(mask)
            t.last_seq = frame.seq
            self._log(t.request, frame, t.result)

    def overlay(self, img: np.ndarray, camera: str, scaling: Scaling) -> np.ndarray:
        """The controller's overlay for planner images (``image_overlays``): the outline of
        every tracked mask on ``camera``, in the pixels of the image as sent.  Monitor frames
        never get it."""
        with self._lock:
            masks = [t.result.mask for t in self._tracks.values()
                     if t.request.camera == camera and t.result.mask is not None]
        if not masks:
            return img
        out = img.copy()
        for mask in masks:
            contours, _ = cv2.findContours(mask.astype(np.uint8), cv2.RETR_EXTERNAL,
                                           cv2.CHAIN_APPROX_SIMPLE)
            for c in contours:
                pts = c.reshape(-1, 2).astype(float)
                sent = np.column_stack([(pts[:, 0] - scaling.x0 + 0.5) / scaling.sx - 0.5,
                                        (pts[:, 1] - scaling.y0 + 0.5) / scaling.sy - 0.5])
                cv2.polylines(out, [np.round(sent).astype(np.int32)], True, (255, 0, 255), 1)
        return out

    def _log(self, req: TrackerRequest, frame: Image, res: TrackerResult) -> None:
        if self.overlay_sink is None or res.mask is None:
            return
        ok, png = cv2.imencode(".png", res.mask.astype(np.uint8) * 255)
        rec = {"ts": frame.stamp, "size": [frame.height, frame.width],
               req.field.split(".", 1)[-1]: {"mask": base64.b64encode(png.tobytes()).decode()
                                            if ok else None, "box": list(res.box or ())}}
        self.overlay_sink(req.camera, req.field.split(".", 1)[-1], rec)
