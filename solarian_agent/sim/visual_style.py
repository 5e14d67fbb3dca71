"""How the simulated cameras see the table: colours (BGR), textures, lighting and pixel noise.

Default colours are chosen so a classical HSV detector separates them: red cup (40, 40, 200),
yellow paper (40, 200, 220), grey-blue tray, dark bin, on a light low-saturation table.
:class:`VisualStyle` holds the knobs of the domain-shift test (experiment 6-14): table colour /
texture, object colours / textures, lighting gain and gradient, pixel noise.  Both renderers
(the 2D one and MuJoCo's) read it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import cv2
import numpy as np

from .camera import RenderError

BGR = tuple[int, int, int]
TABLE_TEXTURES: tuple[str, ...] = ("none", "wood", "checker", "blotches")
OBJECT_TEXTURES: tuple[str, ...] = ("none", "speckle", "stripes")


@dataclass(frozen=True)
class VisualStyle:
    table_bgr: BGR = (178, 200, 215)
    floor_bgr: BGR = (70, 74, 78)
    wall_bgr: BGR = (125, 120, 115)
    table_texture: str = "none"
    texture_strength: float = 0.12  # relative brightness swing of the table texture
    cup_bgr: BGR = (40, 40, 200)
    paper_bgr: BGR = (40, 200, 220)
    tray_bgr: BGR = (150, 128, 108)
    bin_bgr: BGR = (48, 46, 44)
    arm_bgr: BGR = (222, 222, 216)
    base_bgr: BGR = (55, 55, 60)
    finger_bgr: BGR = (128, 128, 128)  # the jaws (name kept: other backends read it)
    object_texture: str = "none"
    light_gain: float = 1.0
    light_gradient: float = 0.0  # 0..1: darkening away from a light spot
    noise_std: float = 0.0  # Gaussian pixel noise, grey levels
    seed: int = 0  # texture, light spot and noise draws

    def __post_init__(self) -> None:
        if self.table_texture not in TABLE_TEXTURES:
            raise RenderError(f"table_texture {self.table_texture!r} not in {TABLE_TEXTURES}")
        if self.object_texture not in OBJECT_TEXTURES:
            raise RenderError(
                f"object_texture {self.object_texture!r} not in {OBJECT_TEXTURES}"
            )
        if not self.light_gain > 0:
            raise RenderError("light_gain must be > 0")
        if not 0.0 <= self.light_gradient <= 1.0:
            raise RenderError("light_gradient must be in [0, 1]")
        if self.noise_std < 0 or self.texture_strength < 0:
            raise RenderError("noise_std and texture_strength must be >= 0")

    @classmethod
    def randomized(
        cls,
        seed: int,
        *,
        background: bool = False,
        appearance: bool = False,
        lighting: bool = False,
        noise: bool = False,
    ) -> VisualStyle:
        """A style for the domain-shift test: each flag varies one group of knobs (all
        ``False`` gives the default look).  Object colours keep their category (the cup stays
        reddish, the paper yellowish) so the task stays well defined."""
        rng = np.random.default_rng([int(seed), 0x57E1])
        style = cls(seed=int(seed))
        if background:
            hue = rng.uniform(0, 180)
            style = replace(
                style,
                table_bgr=hsv_to_bgr(hue, rng.uniform(15, 70), rng.uniform(150, 230)),
                floor_bgr=hsv_to_bgr(rng.uniform(0, 180), rng.uniform(0, 60),
                                      rng.uniform(40, 110)),
                table_texture=str(rng.choice(TABLE_TEXTURES[1:])),
                texture_strength=float(rng.uniform(0.08, 0.25)),
            )
        if appearance:
            style = replace(
                style,
                cup_bgr=hsv_to_bgr(rng.uniform(-8, 8) % 180, rng.uniform(160, 255),
                                    rng.uniform(130, 230)),
                paper_bgr=hsv_to_bgr(rng.uniform(22, 34), rng.uniform(120, 230),
                                      rng.uniform(170, 250)),
                tray_bgr=hsv_to_bgr(rng.uniform(95, 125), rng.uniform(30, 90),
                                     rng.uniform(100, 180)),
                bin_bgr=hsv_to_bgr(rng.uniform(0, 180), rng.uniform(0, 60),
                                    rng.uniform(25, 70)),
                object_texture=str(rng.choice(OBJECT_TEXTURES[1:])),
            )
        if lighting:
            style = replace(style, light_gain=float(rng.uniform(0.65, 1.35)),
                            light_gradient=float(rng.uniform(0.1, 0.45)))
        if noise:
            style = replace(style, noise_std=float(rng.uniform(3.0, 12.0)))
        return style


def hsv_to_bgr(h: float, s: float, v: float) -> BGR:
    """An OpenCV HSV colour (hue 0-180) as BGR."""
    px = np.array([[[int(h) % 180, int(np.clip(s, 0, 255)), int(np.clip(v, 0, 255))]]],
                  dtype=np.uint8)
    b, g, r = cv2.cvtColor(px, cv2.COLOR_HSV2BGR)[0, 0]
    return int(b), int(g), int(r)


def shade(c: BGR, k: float) -> BGR:
    """``c`` with each channel scaled by ``k`` (clamped to 0-255)."""
    b, g, r = (min(255, max(0, int(v * k))) for v in c)
    return b, g, r

