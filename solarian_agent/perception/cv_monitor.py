"""The offline ``cv`` vision backend: classical computer vision on the monitor's images.

It answers the questions of the built-in skills it knows, from the pixels alone (never from the
simulator's ground truth): the pick's ``progress`` choice (approaching / grasping / holding /
failed), and the predicates ``held`` (also ``holding`` / ``grasped``) and ``released``.  Any other
question gets no answer, so no rule can fire on it.

What it measures, in the wrist camera's close-up (or whole view) of the current and previous
frame:

* the jaws: neutral-grey regions (saturation near 0) reaching the bottom or the sides of the
  image; the two largest are the left and right jaw (one merged region: closed);
* the gap: the free columns between the jaws' inner edges in a band just below their tips;
* the object: the largest strongly coloured region (HSV saturation and value above a floor);
* ``fill``: the share of the gap, in the tip band, that the object covers; ``ratio``: the
  object's width over the gap.

The close-up follows the jaws (SO-101: a fixed jaw and a moving one, the camera centred on the
gap between them), so both jaws come up from the bottom edge and close towards the middle.
Held: the object reaches across the gap and fills it (both jaws touch it), with the jaws
stopped, or closed onto it showing it whole (taken up between the jaws it shows at their depth,
larger than on the table), or jaws stopped partway with it filling most of the gap (an
irregular object held shows a little narrower than the gap); jaws wide of the object hold
nothing, however much of the gap it fills.  Failed: closed on nothing, narrower than the object,
closed past the width it showed in the previous frame, a jaw sweeping over the object (hiding
part of it: a missed grasp), the object dropped out from between them, or they
reopened.  Grasping: the gap shrank since the previous frame with the object between
them.  Approaching: otherwise, with the jaws open; jaws opening when the action's reference
close-up shows them shut (a pick starting from the home pose, the jaws about 16 mm apart) are
approaching too, and without a reference frame an opening cannot be told from a reopening.  The
probabilities are heuristic confidences: clear cases get 0.85-0.9, ticks two frames cannot
decide 0.6-0.75, so a rule's ``threshold`` (0.8 on the shipped pick) keeps them from acting and
the next tick decides. Measured on the labelled ticks of the product's own picks
(``test/data/product_ticks``): 316 of 316 right (99.2 % on a recording of seeds 301-312, not
tuned on), no rule's condition met on a wrongly labelled tick.

``describe`` reports the same measurements as text (which objects' colours are in view, where,
and the jaw gap), marked as classical measurements rather than a model's reading.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from ..core.model_api import ModelError
from .vision import (
    Description,
    FrameForVision,
    MonitorAnswer,
    MonitorImage,
    MonitorQuestion,
    MonitorTickRequest,
    TickReply,
    predicate_answer,
)

HELD_NAMES = ("held", "holding", "grasped")
RELEASED_NAMES = ("released", "let_go")
PROGRESS_VALUES = frozenset({"approaching", "grasping", "holding", "failed"})

_COLOURS = (  # hue ranges (OpenCV 0-180) for naming a coloured region
    ((0, 10), "red"), ((170, 180), "red"), ((10, 22), "orange"), ((22, 38), "yellow"),
    ((38, 85), "green"), ((85, 130), "blue"), ((130, 170), "purple"),
)


@dataclass(frozen=True)
class GripView:
    """Measurements of one frame (pixels of the image as sent)."""

    width: int
    height: int
    fingers: int  # 0, 1 (merged: closed) or 2
    gap: float  # px between the jaws' inner edges in the tip band (0 when closed)
    tip_y: int  # the jaws' top row (-1: none)
    object_area: int
    object_width: int
    object_box: tuple[int, int, int, int] | None
    fill: float  # share of the gap columns in the tip band covered by the object
    object_hue: float

    @property
    def ratio(self) -> float:
        return self.object_width / self.gap if self.gap > 0 else float("inf")


def finger_mask(img: np.ndarray) -> np.ndarray:
    blur = cv2.medianBlur(img, 3)
    hsv = cv2.cvtColor(blur, cv2.COLOR_BGR2HSV)
    s, v = hsv[..., 1], hsv[..., 2]
    return ((s <= 16) & (v >= 70) & (v <= 175)).astype(np.uint8)


def object_mask(img: np.ndarray) -> np.ndarray:
    hsv = cv2.cvtColor(img, cv2.COLOR_BGR2HSV)
    return ((hsv[..., 1] > 90) & (hsv[..., 2] > 60)).astype(np.uint8)


MARK_BGR = (255, 255, 0)


def _largest(mask: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """The largest region of ``mask`` (its label, 0 for none under 15 px), labels, stats."""
    n, labels, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
    if n <= 1:
        return 0, labels, stats
    j = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
    return (j if stats[j, cv2.CC_STAT_AREA] >= 15 else 0), labels, stats


def measure(img: np.ndarray, marked: bool = False) -> GripView:
    """``marked``: the image carries the monitor's cyan target mark; its pixels are ignored."""
    h, w = img.shape[:2]
    if marked:
        img = img.copy()
        line = np.all(img == np.array(MARK_BGR, np.uint8), axis=2)
        img[line] = cv2.medianBlur(img, 3)[line]
    fm = finger_mask(img)
    n, labels, stats, cents = cv2.connectedComponentsWithStats(fm, connectivity=8)
    cands = []
    min_area = max(20, int(0.004 * h * w))
    for i in range(1, n):
        x, y, bw, bh, area = (int(v) for v in stats[i])
        touches = y + bh >= h - 1 or x <= 0 or x + bw >= w - 1
        if area >= min_area and touches and y + bh >= h * 0.6:
            cands.append((area, i))
    cands.sort(reverse=True)
    fingers = [i for _, i in cands[:2]]
    om = object_mask(img)
    obj_area, obj_w, obj_box, hue = 0, 0, None, -1.0
    j, olabels, ostats = _largest(om)
    if j:
        hsv = cv2.cvtColor(img, cv2.COLOR_BGR2HSV)
        hue = float(np.median(hsv[..., 0][olabels == j]))
        # two touching objects of different colours (a held paper before the cup) are one
        # region: keep the largest one's colour
        d = np.abs(hsv[..., 0].astype(np.int16) - int(round(hue)))
        om = (om.astype(bool) & (np.minimum(d, 180 - d) <= 15)).astype(np.uint8)
        j, olabels, ostats = _largest(om)
    if j:
        x, y, bw, bh, area = (int(v) for v in ostats[j])
        obj_area, obj_w, obj_box = area, bw, (x, y, x + bw - 1, y + bh - 1)
    if not fingers:
        return GripView(w, h, 0, 0.0, -1, obj_area, obj_w, obj_box, 0.0, hue)
    tops = [int(stats[i, cv2.CC_STAT_TOP]) for i in fingers]
    if len(fingers) == 1:
        return GripView(w, h, 1, 0.0, tops[0], obj_area, obj_w, obj_box, 0.0, hue)
    a, b = fingers
    left, right = (a, b) if cents[a][0] <= cents[b][0] else (b, a)
    tip = max(tops)
    band = range(tip + 2, min(h, tip + 2 + max(6, h // 12)))
    gaps, fills = [], []
    for y in band:
        row = labels[y]
        lx = np.nonzero(row == left)[0]
        rx = np.nonzero(row == right)[0]
        if lx.size == 0 or rx.size == 0:
            continue
        x0, x1 = int(lx.max()) + 1, int(rx.min())
        if x1 <= x0:
            gaps.append(0.0)
            continue
        gaps.append(float(x1 - x0))
        fills.append(float(om[y, x0:x1].mean()))
    if not gaps:
        return GripView(w, h, 2, 0.0, tip, obj_area, obj_w, obj_box, 0.0, hue)
    gap = float(np.median(gaps))
    fill = float(np.median(fills)) if fills else 0.0
    return GripView(w, h, 2 if gap > 0 else 1, gap, tip, obj_area, obj_w, obj_box, fill, hue)


def spans_gap(v: GripView) -> bool:
    """The object reaches across the gap between the jaws (both touch it) and fills it."""
    return v.fingers >= 2 and v.gap > 0 and v.fill >= 0.75 and 0.88 <= v.ratio <= 1.25


def held_score(v: GripView) -> float:
    """The probability-like confidence that the object is pinched between the jaws.  Jaws
    wide of the object (it does not reach both) hold nothing, however much of the gap it
    fills."""
    if v.fingers < 2 or v.gap <= 0 or v.object_area == 0:
        return 0.05
    if v.fill >= 0.75 and 0.88 <= v.ratio <= 1.15:
        return 0.92
    if v.fill >= 0.6 and 0.85 <= v.ratio <= 1.25:
        return 0.65
    return 0.08


def closed(v: GripView) -> bool:
    return v.fingers == 1 or (v.fingers >= 2 and v.gap < 0.05 * v.width)


def shut(v: GripView) -> bool:
    """Closed, or nearly: narrower than anything the jaws can grasp, as at the home pose where
    they stand about 16 mm apart."""
    return v.fingers > 0 and (closed(v) or v.gap < 0.2 * v.width)


def progress(cur: GripView, prev: GripView | None, ref: GripView | None = None
             ) -> tuple[str, float, str] | None:
    """The pick's phase from the previous and current close-up (and, where the monitor sends
    one, the reference close-up from when the action started): (value, confidence, what was
    measured).  A tick the frames cannot decide gets a confidence below a usual 0.8 floor."""
    if cur.fingers == 0:
        return None
    gap0 = prev.gap if prev is not None and prev.fingers > 0 else None
    width0 = prev.object_width if prev is not None and prev.object_area > 0 else 0
    shrink = (gap0 - cur.gap) / gap0 if gap0 else 0.0
    closing = gap0 is not None and cur.gap < gap0 - max(3.0, 0.05 * gap0)
    opening = gap0 is not None and cur.gap > gap0 + max(2.0, 0.04 * max(gap0, 1.0))
    # the action began with the jaws (nearly) shut: a pick from the home pose
    started_closed = ref is not None and shut(ref)
    seen = cur.object_area > 0
    detail = (f"gap {cur.gap:.0f}px" + (f" (was {gap0:.0f})" if gap0 is not None else "")
              + f", object {cur.object_width}px wide, fills {cur.fill:.0%} of the gap")
    if closed(cur):
        if prev is not None and closed(prev) and started_closed:
            # closed since the action began: not yet opened, or closed again on nothing
            return "failed", 0.6, "the jaws are closed, as when the action began; " + detail
        return "failed", 0.9, "the jaws are closed with nothing between them; " + detail
    if opening:
        if started_closed:
            # an object between opening jaws lies below them, or is being let go
            return ("approaching", 0.7 if spans_gap(cur) else 0.85, "the jaws open for the "
                    "approach (they were closed when the action began); " + detail)
        if ref is None:
            # opening at the start of an approach looks the same as a reopening
            return "failed", 0.6, "the jaws open; " + detail
        return "failed", 0.85, "the jaws reopened; " + detail
    if spans_gap(cur) and width0 and cur.gap < 0.97 * width0 and shrink > 0.2:
        return ("failed", 0.85, "the jaws closed past the object's width "
                f"({width0}px before); " + detail)
    if spans_gap(cur) and shrink <= 0.06 and held_score(cur) >= 0.9:
        return "holding", 0.9, "the object fills the gap and both jaws touch it; " + detail
    if (spans_gap(cur) and held_score(cur) >= 0.9 and shrink <= 0.2 and cur.ratio >= 0.93
            and cur.object_width > 1.03 * width0):
        # jaws passing an object's edges cut its visible width down with the gap; jaws
        # stopped on it show it whole between them
        return ("holding", 0.85, "the jaws closed on the object and stopped, showing it "
                "whole between them; " + detail)
    if spans_gap(cur) and held_score(cur) >= 0.9:
        # closed since the previous frame to about the object's width: pinched, or about to
        # pass it (a missed grasp looks the same for a moment); the next tick decides
        return "holding", 0.75, "the jaws closed to the object's width; " + detail
    if seen and cur.fill >= 0.9 and cur.ratio <= 1.25 and shrink <= 0.06:
        # a held object nearer the camera (lifted) looks a little wider than the gap
        return "holding", 0.85, "the object fills the gap and stays there; " + detail
    if seen and cur.ratio > 1.12:
        return "failed", 0.85, "the jaws are narrower than the object; " + detail
    if closing and width0 and cur.gap < 0.9 * width0:
        return "failed", 0.85, "the jaws close past the object's width; " + detail
    if closing and seen and prev is not None and cur.object_area < 0.6 * prev.object_area:
        return "failed", 0.85, "the object fell away from the closing jaws; " + detail
    if (closing and seen and width0 and prev is not None
            and cur.object_area < 0.93 * prev.object_area
            and cur.object_width >= 0.9 * width0 and cur.ratio > 0.85):
        # a jaw sweeping across the object hides part of it; jaws stopping on it (or an object
        # taken up between them) show it whole
        return "failed", 0.85, "a jaw passes over the object, hiding part of it; " + detail
    if closing and seen and cur.fill < 0.5 and cur.ratio > 0.95:
        return "failed", 0.7, "the jaws close beside the object; " + detail
    if (prev is not None and spans_gap(prev) and not spans_gap(cur)
            and cur.object_area < 0.6 * prev.object_area):
        return "failed", 0.85, "the object dropped out from between the jaws; " + detail
    if (gap0 is not None and abs(cur.gap - gap0) <= 2.0 and cur.fingers >= 2
            and 0.2 * cur.width < cur.gap < 0.6 * cur.width and seen and cur.fill >= 0.7
            and cur.ratio >= 0.75):
        # stopped well inside their open width, with the object filling most of the gap: an
        # irregular object (a crumpled paper) held shows a little narrower than the gap
        return ("holding", 0.85, "the jaws stopped partway, on the object between them; "
                + detail)
    nearly_spans = seen and cur.fill >= 0.75 and 0.84 <= cur.ratio <= 1.25
    if nearly_spans:
        # an irregular object pinched shows a little narrower than the gap; open jaws
        # around it show it narrower still: too close to call
        return "holding", 0.75, "the object nearly spans the gap; " + detail
    if closing and seen:
        return "grasping", 0.85, "the jaws are closing on the object; " + detail
    if closing:
        return "grasping", 0.6, "the jaws are closing, with no object in view; " + detail
    if spans_gap(cur):
        return "holding", 0.65, "the object fills the gap; " + detail
    if gap0 is not None and seen and cur.fill >= 0.4 and cur.gap < gap0 - 2.0:
        # a little narrower than before: closing starts, or the frame wobbles
        return "grasping", 0.7, "the jaws may be starting to close; " + detail
    if seen and cur.fill >= 0.5:
        # open jaws around the object: about to close, or closing too little to see
        return "approaching", 0.7, "the object lies between the open jaws; " + detail
    if prev is not None and seen and cur.object_area > prev.object_area * 1.05:
        return "approaching", 0.9, "the jaws are open and the object grows: closer; " + detail
    return "approaching", 0.85, "the jaws are open with the object ahead; " + detail


class CvVisionBackend:
    """The classical backend.  ``camera``: the camera whose images it reads (default: the
    question's ``camera``, else the first close-up, else a camera named like ``wrist``, else the
    first camera in the tick)."""

    name = "cv"
    model = "cv-grip-v1"
    reads_images = True
    inline = True  # answers in milliseconds: the monitor may call it on its tick thread

    def __init__(self, camera: str = "") -> None:
        self.camera = camera

    # monitor ticks -----------------------------------------------------------------------
    def _pick_images(self, images: Sequence[MonitorImage], camera: str
                     ) -> tuple[MonitorImage | None, MonitorImage | None]:
        hist = [i for i in images if not i.reference]
        cams = [i.camera for i in hist]
        cam = camera or self.camera
        if not cam or cam not in cams:
            close = [i.camera for i in hist if i.close_up]
            wrist = [c for c in cams if "wrist" in c]
            cam = (close or wrist or cams or [""])[0]
        mine = [i for i in hist if i.camera == cam]
        if not mine:
            return None, None
        cur = mine[-1]
        prev = mine[-2] if len(mine) > 1 else None
        return cur, prev

    @staticmethod
    def _pixels(img: MonitorImage) -> np.ndarray:
        if img.pixels is not None:
            return img.pixels
        arr = np.frombuffer(img.data, np.uint8)
        out = cv2.imdecode(arr, cv2.IMREAD_COLOR)
        if out is None:
            raise ModelError("bad_request", f"{img.camera} {img.label}: image not decodable")
        return out

    def answer_one(self, q: MonitorQuestion, images: Sequence[MonitorImage]
                   ) -> MonitorAnswer | None:
        cur_img, prev_img = self._pick_images(images, getattr(q, "camera", ""))
        if cur_img is None:
            return None
        cur = measure(self._pixels(cur_img), cur_img.mark is not None)
        prev = (measure(self._pixels(prev_img), prev_img.mark is not None)
                if prev_img is not None else None)
        if q.type == "choice" and q.name == "progress" and set(q.values) <= PROGRESS_VALUES:
            ref_img = next((i for i in images if i.reference and i.camera == cur_img.camera),
                           None)
            ref = measure(self._pixels(ref_img)) if ref_img is not None else None
            res = progress(cur, prev, ref)
            if res is None or res[0] not in q.values:
                return None
            return MonitorAnswer(q.name, res[0], res[1], res[2])
        if q.type == "predicate" and q.name in HELD_NAMES:
            if cur.fingers == 0:
                return None
            return predicate_answer(q.name, held_score(cur), f"gap {cur.gap:.0f}px, object "
                                    f"fills {cur.fill:.0%} of it")
        if q.type == "predicate" and q.name in RELEASED_NAMES:
            if cur.fingers == 0:
                return None
            opened = prev is not None and cur.gap > prev.gap + 3
            empty = cur.fill < 0.25
            p = 0.9 if (empty and (opened or cur.gap > 0.2 * cur.width)) else (
                0.6 if empty else 0.1)
            return predicate_answer(q.name, p, f"gap {cur.gap:.0f}px, object fills "
                                    f"{cur.fill:.0%} of it")
        return None

    def answer_tick(self, request: MonitorTickRequest, *, timeout_s: float) -> TickReply:
        answers: dict[str, MonitorAnswer] = {}
        problems: list[str] = []
        for q in request.questions:
            a = self.answer_one(q, request.images)
            if a is None:
                problems.append(f"{q.name}: the cv backend cannot answer this question")
            else:
                answers[q.name] = a
        return TickReply(answers, model=self.model, problems=tuple(problems))

    # descriptions ------------------------------------------------------------------------
    def describe(self, frame: FrameForVision, focus: str, *, timeout_s: float) -> Description:
        img = frame.pixels
        if img is None:
            img = cv2.imdecode(np.frombuffer(frame.data, np.uint8), cv2.IMREAD_COLOR)
            if img is None:
                raise ModelError("bad_request", "the frame is not a decodable image")
        h, w = img.shape[:2]
        om = object_mask(img)
        hsv = cv2.cvtColor(img, cv2.COLOR_BGR2HSV)
        n, labels, stats, cents = cv2.connectedComponentsWithStats(om, connectivity=8)
        regions = []
        for i in range(1, n):
            area = int(stats[i, cv2.CC_STAT_AREA])
            if area < max(30, 0.0005 * w * h):
                continue
            hue = float(np.median(hsv[..., 0][labels == i]))
            name = next((c for (lo, hi), c in _COLOURS if lo <= hue < hi), "coloured")
            cx, cy = cents[i]
            where = (("top" if cy < h / 3 else "bottom" if cy > 2 * h / 3 else "middle") + "-"
                     + ("left" if cx < w / 3 else "right" if cx > 2 * w / 3 else "centre"))
            regions.append((area, f"a {name} region ({area / (w * h):.1%} of the frame) at "
                                  f"the {where}, around pixel ({cx:.0f}, {cy:.0f})"))
        regions.sort(reverse=True)
        parts = [f"Classical measurement of a {w}x{h} frame (not a model's reading)."]
        if focus:
            parts.append(f"Focus asked: {focus}.")
        parts.append("Coloured regions: " + ("; ".join(r for _, r in regions[:6])
                                             if regions else "none") + ".")
        g = measure(img)
        if g.fingers:
            parts.append(f"Gripper jaws in view, gap {g.gap:.0f}px; the largest coloured "
                         f"region fills {g.fill:.0%} of the gap.")
        return Description(" ".join(parts), model=self.model)


__all__ = ["CvVisionBackend", "GripView", "closed", "held_score", "measure", "progress", "shut"]
