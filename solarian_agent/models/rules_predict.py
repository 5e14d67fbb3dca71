"""The predictive strategy's short-horizon model of skill outcomes, to rank the candidate next
skills before choosing one (a fresh ``verify_state`` still decides what was done), over what the
planner sees: the overhead image's detections and the harness's reports.

* Which object next: every order of the pending goals is costed as the pixel path the tip
  travels (from the arm's base, through each object to its receptacle), each leg divided by the
  chance that its pick succeeds (a Beta prior per object updated from this run's failed and
  successful picks: geometric retries); the first object of the cheapest order is next.
* A pick: the jaws should stop at the object's width, estimated from its pixel footprint
  with the tray (110 mm x 85 mm) as the scale; a pick that ends with the jaws' opening inside
  [``low`` x, ``high`` x] that width is confidently holding the object.
* A place: the object lands where it is released; the release is confidently inside the
  receptacle when the pointed pixel lies at least ``place_margin_px`` inside its pixel hull.

A confident prediction that the outcome then matches lets the planner skip a ``verify_state``;
anything else is checked.  The final check before finishing is never skipped.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import cv2

from ..perception import scene

TRAY_MM = (110.0, 85.0)
BASE_PX = (320.0, 410.0)  # the arm's base below the overhead camera (640 x 480)


@dataclass(frozen=True)
class PickPrediction:
    obj: str
    width_mm: float
    low_mm: float
    high_mm: float

    def matches(self, opening_mm: float | None) -> bool:
        return opening_mm is not None and self.low_mm <= opening_mm <= self.high_mm


class OutcomeModel:
    def __init__(self, prior: tuple[float, float] = (4.0, 1.0), low: float = 0.5,
                 high: float = 1.4, place_margin_px: float = 12.0,
                 default_width_mm: float = 40.0) -> None:
        self.prior = prior
        self.low, self.high = low, high
        self.place_margin_px = place_margin_px
        self.default_width_mm = default_width_mm

    # which object next -----------------------------------------------------------------------
    def p_pick(self, successes: int, failures: int) -> float:
        a, b = self.prior
        return (a + successes) / (a + b + successes + failures)

    def rank(self, pending: Sequence[tuple[str, str]], dets: dict[str, scene.Detection],
             counts: dict[str, tuple[int, int]]) -> list[tuple[float, tuple[str, str]]]:
        """The pending goals, each with the expected pixel cost of the cheapest order that
        starts with it, cheapest first; a goal whose object or receptacle is not seen costs
        infinity."""
        best: dict[tuple[str, str], float] = {}
        orders = itertools.permutations(pending) if len(pending) <= 5 else (
            (g, *[p for p in pending if p != g]) for g in pending)
        for order in orders:
            cost, at = 0.0, BASE_PX
            for obj, dest in order:
                o, d = dets.get(obj), dets.get(dest)
                if o is None or d is None:
                    cost = math.inf
                    break
                s, f = counts.get(obj, (0, 0))
                cost += (math.dist(at, o.inner) + math.dist(o.inner, d.inner)) / \
                    self.p_pick(s, f)
                at = d.inner
            first = order[0]
            best[first] = min(best.get(first, math.inf), cost)
        return sorted(((c, g) for g, c in best.items()), key=lambda t: t[0])

    # a pick ----------------------------------------------------------------------------------
    def mm_per_px(self, dets: dict[str, scene.Detection]) -> float | None:
        tray = dets.get("tray")
        if tray is None or tray.area <= 0:
            return None
        return math.sqrt(TRAY_MM[0] * TRAY_MM[1] / tray.area)

    def predict_pick(self, obj: str, dets: dict[str, scene.Detection]) -> PickPrediction:
        d = dets.get(obj)
        scale = self.mm_per_px(dets)
        if d is None or scale is None:
            w = self.default_width_mm
        else:
            w = 2.0 * math.sqrt(d.area / math.pi) * scale
        return PickPrediction(obj, round(w, 1), round(self.low * w, 1),
                              round(self.high * w, 1))

    # a place ---------------------------------------------------------------------------------
    def place_confident(self, receptacle: str, point: Sequence[float],
                        dets: dict[str, scene.Detection]) -> bool:
        d = dets.get(receptacle)
        if d is None or not d.hull.size:
            return False
        depth = cv2.pointPolygonTest(d.hull, (float(point[0]), float(point[1])), True)
        return bool(depth >= self.place_margin_px)


__all__ = ["OutcomeModel", "PickPrediction"]
