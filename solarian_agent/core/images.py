"""Image handling shared by the planner and the monitor: resize, crop, grid, marks, encode, and the
exact mapping of points between a sent image and the capture it came from."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np


@dataclass(frozen=True)
class Scaling:
    """How a sent image relates to its capture: a crop at ``(x0, y0)`` of ``crop_w x crop_h``
    capture pixels, resized to ``sent_w x sent_h``."""

    capture_w: int
    capture_h: int
    sent_w: int
    sent_h: int
    x0: int = 0
    y0: int = 0
    crop_w: int = 0  # 0: the whole capture
    crop_h: int = 0

    @property
    def cw(self) -> int:
        return self.crop_w or self.capture_w

    @property
    def ch(self) -> int:
        return self.crop_h or self.capture_h

    @property
    def sx(self) -> float:
        return self.cw / self.sent_w

    @property
    def sy(self) -> float:
        return self.ch / self.sent_h

    def to_capture(self, x: float, y: float) -> tuple[float, float]:
        """Map a point in sent-image pixels back to capture pixels (pixel-centre exact)."""
        return (self.x0 + (x + 0.5) * self.sx - 0.5, self.y0 + (y + 0.5) * self.sy - 0.5)

    def to_sent(self, x: float, y: float) -> tuple[float, float]:
        return ((x - self.x0 + 0.5) / self.sx - 0.5, (y - self.y0 + 0.5) / self.sy - 0.5)


def fit_size(w: int, h: int, max_side: int) -> tuple[int, int]:
    """The size with the longest side at most ``max_side``, aspect ratio preserved."""
    if max(w, h) <= max_side:
        return w, h
    s = max_side / max(w, h)
    return max(1, round(w * s)), max(1, round(h * s))


def resize_max_side(img: np.ndarray, max_side: int) -> tuple[np.ndarray, Scaling]:
    h, w = img.shape[:2]
    nw, nh = fit_size(w, h, max_side)
    out = img if (nw, nh) == (w, h) else cv2.resize(img, (nw, nh), interpolation=cv2.INTER_AREA)
    return out, Scaling(w, h, nw, nh)


def crop_fraction(img: np.ndarray, box: tuple[float, float, float, float]
                  ) -> tuple[np.ndarray, Scaling]:
    """Crop a region given as fractions (x0, y0, x1, y1) at capture resolution (no resize)."""
    h, w = img.shape[:2]
    x0, y0 = int(round(box[0] * w)), int(round(box[1] * h))
    x1, y1 = int(round(box[2] * w)), int(round(box[3] * h))
    x1, y1 = max(x1, x0 + 1), max(y1, y0 + 1)
    out = img[y0:y1, x0:x1]
    cw, ch = x1 - x0, y1 - y0
    return out, Scaling(w, h, cw, ch, x0, y0, cw, ch)


def draw_grid(img: np.ndarray, step: int | None = None) -> np.ndarray:
    """A labelled pixel grid (in the sent image's own pixels) to help a model read coordinates."""
    out = img.copy()
    h, w = out.shape[:2]
    step = step or (50 if max(w, h) <= 700 else 100)
    color = (255, 255, 255)
    for x in range(step, w, step):
        cv2.line(out, (x, 0), (x, h - 1), color, 1, cv2.LINE_4)
        cv2.putText(out, str(x), (x + 2, 10), cv2.FONT_HERSHEY_PLAIN, 0.7, color, 1)
    for y in range(step, h, step):
        cv2.line(out, (0, y), (w - 1, y), color, 1, cv2.LINE_4)
        cv2.putText(out, str(y), (2, y - 2), cv2.FONT_HERSHEY_PLAIN, 0.7, color, 1)
    # darken the grid slightly so it never hides small objects entirely
    return cv2.addWeighted(out, 0.6, img, 0.4, 0)


def draw_points(img: np.ndarray, points: list[tuple[float, float]], label: str = ""
                ) -> np.ndarray:
    out = img.copy()
    for x, y in points:
        c = (int(round(x)), int(round(y)))
        cv2.drawMarker(out, c, (255, 0, 255), cv2.MARKER_CROSS, 14, 2)
        cv2.circle(out, c, 9, (255, 0, 255), 1)
        if label:
            cv2.putText(out, label, (c[0] + 8, c[1] - 8), cv2.FONT_HERSHEY_PLAIN, 1.0,
                        (255, 0, 255), 1)
    return out


def mark_box(img: np.ndarray, box: tuple[int, int, int, int], margin: int = 3) -> np.ndarray:
    """A 1 px cyan box ``margin`` px outside ``box`` (x0, y0, x1, y1), covering none of it."""
    out = img.copy()
    h, w = out.shape[:2]
    x0, y0, x1, y1 = box
    p0 = (max(0, x0 - margin), max(0, y0 - margin))
    p1 = (min(w - 1, x1 + margin), min(h - 1, y1 + margin))
    cv2.rectangle(out, p0, p1, (255, 255, 0), 1, cv2.LINE_4)
    return out


def encode(img: np.ndarray, fmt: str = "jpeg", quality: int = 85) -> tuple[bytes, str]:
    if fmt == "png":
        ok, buf = cv2.imencode(".png", img)
        mt = "image/png"
    else:
        ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, quality])
        mt = "image/jpeg"
    if not ok:
        raise ValueError(f"could not encode a {img.shape} image as {fmt}")
    return buf.tobytes(), mt


def decode(data: bytes) -> np.ndarray:
    arr = np.frombuffer(data, dtype=np.uint8)
    img = cv2.imdecode(arr, cv2.IMREAD_COLOR)
    if img is None:
        raise ValueError("not a decodable image")
    return img
