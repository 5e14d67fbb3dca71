"""Image handling lives in :mod:`solarian_agent.core.images` (the planner and the monitor use it,
and the core imports no implementation); re-exported here for the perception code and others."""

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

__all__ = ["Scaling", "crop_fraction", "decode", "draw_grid", "draw_points", "encode",
           "fit_size", "mark_box", "resize_max_side"]
