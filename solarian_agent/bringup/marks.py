"""Table marks for the pointing check: ArUco markers printed and laid on the table.

Each mark is one ArUco marker (by default ``DICT_4X4_50`` ids 30-33: the same dictionary as
the default ChArUco board, whose markers use the low ids, so a board in view is never taken
for a mark) with a white border.  A camera finds a mark's centre where the marker's diagonals
cross (a perspective view keeps that point, not the corners' mean), and its calibration turns
the pixel into a table point.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

MARK_DICTIONARY = "DICT_4X4_50"
MARK_IDS: tuple[int, ...] = (30, 31, 32, 33)
MARK_SIZE_M = 0.03


@dataclass(frozen=True)
class MarkImage:
    """A printable mark: ``image`` (grey) with the marker's centre at ``origin_px``."""

    mark_id: int
    image: np.ndarray
    px_per_m: float
    origin_px: tuple[float, float]


def _dictionary(name: str = MARK_DICTIONARY) -> Any:
    import cv2

    return cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, name))


def draw_mark(mark_id: int, size_m: float = MARK_SIZE_M, px: int = 120,
              border_px: int = 30) -> MarkImage:
    """Marker ``mark_id`` drawn ``px`` pixels wide inside a white border."""
    import cv2

    inner = cv2.aruco.generateImageMarker(_dictionary(), int(mark_id), px)
    img = np.full((px + 2 * border_px, px + 2 * border_px), 255, np.uint8)
    img[border_px:border_px + px, border_px:border_px + px] = inner
    c = border_px + (px - 1) / 2.0
    return MarkImage(int(mark_id), img, px / size_m, (c, c))


def find_marks(image: np.ndarray, ids: Sequence[int] = MARK_IDS) -> dict[int, tuple[float, float]]:
    """The centre pixel (u, v) of each mark of ``ids`` found in ``image`` (BGR or grey)."""
    import cv2

    grey = image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
    params = cv2.aruco.DetectorParameters()
    params.cornerRefinementMethod = cv2.aruco.CORNER_REFINE_SUBPIX
    detector = cv2.aruco.ArucoDetector(_dictionary(), params)
    corners, found, _ = detector.detectMarkers(grey)
    out: dict[int, tuple[float, float]] = {}
    if found is None:
        return out
    wanted = set(int(i) for i in ids)
    for quad, mid in zip(corners, found.ravel(), strict=True):
        if int(mid) in wanted:
            out[int(mid)] = _diagonals(np.asarray(quad, float).reshape(4, 2))
    return out


def _diagonals(q: np.ndarray) -> tuple[float, float]:
    """Where the lines corner 0-2 and corner 1-3 cross."""
    p, r = q[0], q[2] - q[0]
    s, d = q[1], q[3] - q[1]
    den = r[0] * d[1] - r[1] * d[0]
    if abs(den) < 1e-9:
        c = q.mean(axis=0)
        return float(c[0]), float(c[1])
    t = ((s[0] - p[0]) * d[1] - (s[1] - p[1]) * d[0]) / den
    x = p + t * r
    return float(x[0]), float(x[1])


__all__ = ["MARK_DICTIONARY", "MARK_IDS", "MARK_SIZE_M", "MarkImage", "draw_mark",
           "find_marks"]
