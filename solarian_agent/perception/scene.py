"""Classical colour segmentation of the tabletop: where the red cup, the yellow paper, the tray
and the bin are in an overhead image.

This is what the offline planner and ``verify_state`` see: pixels only, never the simulator's
ground truth.  Colours are named by HSV ranges (:class:`ColourSpec`), so a domain-shift test can
swap them; thin grid lines drawn over a planner image are closed over before segmenting.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import cv2
import numpy as np


@dataclass(frozen=True)
class ColourSpec:
    """HSV bounds (OpenCV ranges: H 0-179, S and V 0-255).  ``hue`` may wrap (lo > hi)."""

    hue: tuple[int, int]
    sat: tuple[int, int]
    val: tuple[int, int]

    def mask(self, hsv: np.ndarray) -> np.ndarray:
        h, s, v = hsv[..., 0], hsv[..., 1], hsv[..., 2]
        lo, hi = self.hue
        hm = (h >= lo) & (h <= hi) if lo <= hi else (h >= lo) | (h <= hi)
        m = hm & (s >= self.sat[0]) & (s <= self.sat[1]) & (v >= self.val[0]) & (v <= self.val[1])
        return m.astype(np.uint8) * 255


DEFAULT_COLOURS: dict[str, ColourSpec] = {
    "red_cup": ColourSpec((170, 8), (110, 255), (60, 255)),
    "yellow_paper": ColourSpec((18, 38), (110, 255), (110, 255)),
    "tray": ColourSpec((95, 125), (35, 150), (80, 210)),
    "bin": ColourSpec((0, 179), (0, 70), (0, 62)),
}
OBJECTS = ("red_cup", "yellow_paper")
RECEPTACLES = ("tray", "bin")
GOALS = {"red_cup": "tray", "yellow_paper": "bin"}
ALIASES = {
    "red_cup": ("red cup", "cup", "red mug", "mug"),
    "yellow_paper": ("yellow paper", "paper", "crumpled paper", "paper ball", "yellow ball",
                     "paper wad"),
    "tray": ("tray",),
    "bin": ("bin", "trash", "trash can", "wastebasket", "basket", "rubbish bin"),
}


@dataclass(frozen=True)
class Detection:
    name: str
    centroid: tuple[float, float]  # pixels (u, v)
    area: int  # pixels
    box: tuple[int, int, int, int]  # x0, y0, x1, y1 (inclusive-exclusive)
    hull: np.ndarray = field(repr=False, compare=False, default_factory=lambda: np.zeros(0))
    # the pixel deepest inside the visible region: a safe place to point at even when the
    # object is partly hidden (a crescent's centroid can lie outside it)
    inner: tuple[float, float] = (0.0, 0.0)

    def contains(self, u: float, v: float, margin: float = 0.0) -> bool:
        if self.hull.size == 0:
            x0, y0, x1, y1 = self.box
            return x0 - margin <= u < x1 + margin and y0 - margin <= v < y1 + margin
        return cv2.pointPolygonTest(self.hull, (float(u), float(v)), True) >= -margin


@dataclass(frozen=True)
class SceneConfig:
    colours: dict[str, ColourSpec] = field(default_factory=lambda: dict(DEFAULT_COLOURS))
    min_area: int = 40
    # pixels of the arm's base seen from above, excluded from the dark "bin" class
    # (u, v, radius) in 640x480 pixels: the arm's base below the overhead camera
    exclude: tuple[tuple[float, float, float], ...] = ((320.0, 410.0, 55.0),)


def _components(mask: np.ndarray, min_area: int) -> list[tuple[int, np.ndarray, tuple[int, ...]]]:
    n, labels, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
    out = []
    for i in range(1, n):
        x, y, w, h, area = (int(v) for v in stats[i])
        if area >= min_area:
            out.append((area, labels == i, (x, y, x + w, y + h)))
    out.sort(key=lambda t: -t[0])
    return out


def detect(img_bgr: np.ndarray, config: SceneConfig = SceneConfig()) -> dict[str, Detection]:
    """The largest plausible region of each colour class."""
    h, w = img_bgr.shape[:2]
    scale = max(h, w) / 640.0
    min_area = max(8, int(config.min_area * scale * scale))
    hsv = cv2.cvtColor(img_bgr, cv2.COLOR_BGR2HSV)
    kernel = np.ones((3, 3), np.uint8)
    out: dict[str, Detection] = {}
    for name, spec in config.colours.items():
        m = spec.mask(hsv)
        m = cv2.morphologyEx(m, cv2.MORPH_CLOSE, kernel, iterations=2)
        for area, comp, box in _components(m, min_area):
            x0, y0, x1, y1 = box
            if name in RECEPTACLES and (x0 <= 0 or y0 <= 0 or x1 >= w or y1 >= h):
                continue  # the floor or the frame edge, not a receptacle on the table
            ys, xs = np.nonzero(comp)
            cu, cv_ = float(xs.mean()), float(ys.mean())
            if any((cu - eu * w / 640.0) ** 2 + (cv_ - ev * h / 480.0) ** 2
                   < (er * scale) ** 2 for eu, ev, er in config.exclude):
                continue
            pts = np.column_stack([xs, ys]).astype(np.int32)
            hull = cv2.convexHull(pts)
            dist = cv2.distanceTransform(comp.astype(np.uint8), cv2.DIST_L2, 3)
            iv, iu = np.unravel_index(int(np.argmax(dist)), dist.shape)
            out[name] = Detection(name, (cu, cv_), int(area), box, hull, (float(iu), float(iv)))
            break
    return out


def resolve(phrase: str) -> str | None:
    """Map a phrase from a task ("the red cup") to a scene name."""
    p = phrase.lower().strip()
    best: tuple[int, str] | None = None
    for name, words in ALIASES.items():
        for wd in words:
            if wd in p and (best is None or len(wd) > best[0]):
                best = (len(wd), name)
    return best[1] if best else None


def report(dets: dict[str, Detection]) -> dict[str, dict[str, object]]:
    """Where each object is, judged from the image: in its receptacle's footprint, on the
    table, or not seen."""
    out: dict[str, dict[str, object]] = {}
    for obj in OBJECTS:
        d = dets.get(obj)
        if d is None:
            out[obj] = {"location": "not_seen"}
            continue
        loc = "table"
        for rec in RECEPTACLES:
            r = dets.get(rec)
            if r is not None and r.contains(*d.centroid, margin=2.0):
                loc = rec
                break
        out[obj] = {"location": loc, "pixel": [round(d.centroid[0], 1), round(d.centroid[1], 1)],
                    "area_px": d.area}
    for rec in RECEPTACLES:
        r = dets.get(rec)
        out[rec] = ({"location": "table", "pixel": [round(r.centroid[0], 1),
                                                    round(r.centroid[1], 1)]}
                    if r is not None else {"location": "not_seen"})
    return out


# the region between the finger tips in the wrist camera, as fractions (x0, y0, x1, y1)
WRIST_GRIP_REGION = (0.38, 0.6, 0.62, 0.85)


def held_in_wrist(img_bgr: np.ndarray, config: SceneConfig = SceneConfig(),
                  region: tuple[float, float, float, float] = WRIST_GRIP_REGION
                  ) -> tuple[str | None, float]:
    """Which object (if any) sits between the fingers in a wrist image, and the share of the
    grip region it fills."""
    h, w = img_bgr.shape[:2]
    x0, y0, x1, y1 = (int(region[0] * w), int(region[1] * h), int(region[2] * w),
                      int(region[3] * h))
    hsv = cv2.cvtColor(img_bgr[y0:y1, x0:x1], cv2.COLOR_BGR2HSV)
    best: tuple[str | None, float] = (None, 0.0)
    for name in OBJECTS:
        frac = float(config.colours[name].mask(hsv).mean() / 255.0)
        if frac > best[1]:
            best = (name, frac)
    return best if best[1] >= 0.25 else (None, best[1])
