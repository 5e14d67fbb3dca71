"""Image handling lives in :mod:`solarian_agent.core.images` (the planner and the monitor use it,
and the core imports no implementation); re-exported here for the perception code and others,
with the frame conversions the viewer, the panel and the bag recorder share."""

import cv2
import numpy as np

from ..core.images import (
    Scaling,
    crop_fraction,
    decode,
    draw_grid,
    draw_points,
    encode,
    fit_size,
    mark_box,
    resize_max_side,
)


def to_bgr(a: np.ndarray, encoding: str) -> np.ndarray:
    """A frame's pixels as BGR (rgb8, rgba8 and bgra8 converted; bgr8 and grey as they are)."""
    if a.ndim == 3 and encoding == "rgb8":
        return cv2.cvtColor(a, cv2.COLOR_RGB2BGR)
    if a.ndim == 3 and a.shape[2] == 4:
        return cv2.cvtColor(a, cv2.COLOR_RGBA2BGR if encoding == "rgba8" else cv2.COLOR_BGRA2BGR)
    return a


def jpeg_preview(a: np.ndarray, encoding: str, max_side: int, quality: int
                 ) -> tuple[bytes, int, int] | None:
    """A frame as a JPEG at most ``max_side`` wide or high, with the frame's own width and
    height; None when encoding fails."""
    a = to_bgr(a, encoding)
    h, w = a.shape[:2]
    if max(h, w) > max_side:
        s = max_side / max(h, w)
        a = cv2.resize(a, (max(1, round(w * s)), max(1, round(h * s))),
                       interpolation=cv2.INTER_AREA)
    ok, buf = cv2.imencode(".jpg", a, [int(cv2.IMWRITE_JPEG_QUALITY), int(quality)])
    return (bytes(buf), w, h) if ok else None


__all__ = ["Scaling", "crop_fraction", "decode", "draw_grid", "draw_points", "encode",
           "fit_size", "jpeg_preview", "mark_box", "resize_max_side", "to_bgr"]
