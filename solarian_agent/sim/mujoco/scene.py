"""The tabletop scene as MJCF: the arm (from the URDF), a table, the red cup, the crumpled
yellow paper ball, the tray and the bin, laid out as the 2D world lays them out for a seed.

The layout (where things stand, the tray's yaw) comes from the 2D world's placement for the
same seed (:class:`~solarian_agent.sim.world.World`), so both backends set the same table.
The sizes are the 2D world's (:class:`~solarian_agent.sim.world.WorldConfig`); in 3D they
have heights too.

* The cup is a cylinder (a closed one: the inside is drawn as a darker disc on top) with its
  mass low, as a real cup's foot.
* The paper ball is a crumpled ball: an icosphere whose 42 vertices are moved in or out at random
  (drawn from the seed); MuJoCo collides with its convex hull.
* The tray is a plate with a rim; the bin a disc with a ring of wall segments.
* Materials are named (``table_plain``, ``table_wood``, ``table_checker``,
  ``table_blotches``, ``floor``, ``cup``, ``paper``, ``tray``, ``bin``, ...): the renderer
  sets their colours and picks the table's texture for its style (domain shift).

Low-poly by construction: primitives, one 80-face mesh, no shadows, no multisampling.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np

from solarian_agent.core.errors import ConfigError

from ..camera import CAMERA_SPECS, CameraSpec
from ..tabletop import Receptacle, WorldConfig, WorldObject
from .prints import TablePrint, add_prints
from .urdf_mjcf import ArmMjcf, ArmPhysics, fmt, matrix_quat

SCENE_CONTYPE, SCENE_CONAFFINITY = 1, 3
TABLE_MATERIALS: tuple[str, ...] = ("table_plain", "table_wood", "table_checker",
                                    "table_blotches")
TEXTURE_SIZE = 256
KEY_DIFFUSE, KEY_AMBIENT = 0.5, 0.3  # the key light (the renderer scales them by its style)


@dataclass(frozen=True)
class SceneConfig:
    """The 3D scene's physical parameters (the sizes are the 2D world's ``WorldConfig``)."""

    timestep: float = 0.002  # s per physics step
    floor_z: float = -0.75  # the floor under the table (m)
    table_thickness: float = 0.03
    cup_mass: float = 0.04  # kg
    paper_mass: float = 0.006
    tray_wall: float = 0.005  # m
    bin_wall: float = 0.004
    bin_segments: int = 16
    object_friction: float = 0.9
    table_friction: float = 0.7
    arm: ArmPhysics = field(default_factory=ArmPhysics)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.timestep) and 0 < self.timestep <= 0.01):
            raise ConfigError("sim.mujoco.timestep", f"must be in (0, 0.01] s, got "
                                                     f"{self.timestep!r}")
        for name in ("table_thickness", "cup_mass", "paper_mass", "tray_wall", "bin_wall",
                     "object_friction", "table_friction"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ConfigError(f"sim.mujoco.{name}", f"must be > 0, got {v!r}")
        if self.floor_z >= 0:
            raise ConfigError("sim.mujoco.floor_z", "must be below the table top (< 0)")
        if self.bin_segments < 6:
            raise ConfigError("sim.mujoco.bin_segments", "must be >= 6")


@dataclass(frozen=True)
class Layout:
    """Where things stand for one seed (from the 2D world's placement)."""

    seed: int
    receptacles: dict[str, Receptacle]
    objects: dict[str, WorldObject]


def fovy_deg(spec: CameraSpec) -> float:
    """The vertical field of view MuJoCo needs for ``spec``'s focal length."""
    return math.degrees(2.0 * math.atan(spec.height / 2.0 / spec.fy))


def paper_mesh(radius: float, height: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A crumpled paper ball: (vertices N x 3, faces M x 3) of an icosphere with its
    vertices moved in or out at random, squashed to ``height`` with a flat base on
    z = -height / 2 in its own frame (the ball is then a little lower than ``height``)."""
    t = (1.0 + math.sqrt(5.0)) / 2.0
    v = np.array([[-1, t, 0], [1, t, 0], [-1, -t, 0], [1, -t, 0], [0, -1, t], [0, 1, t],
                  [0, -1, -t], [0, 1, -t], [t, 0, -1], [t, 0, 1], [-t, 0, -1], [-t, 0, 1]],
                 dtype=float)
    f = [(0, 11, 5), (0, 5, 1), (0, 1, 7), (0, 7, 10), (0, 10, 11), (1, 5, 9), (5, 11, 4),
         (11, 10, 2), (10, 7, 6), (7, 1, 8), (3, 9, 4), (3, 4, 2), (3, 2, 6), (3, 6, 8),
         (3, 8, 9), (4, 9, 5), (2, 4, 11), (6, 2, 10), (8, 6, 7), (9, 8, 1)]
    verts = [p / np.linalg.norm(p) for p in v]
    mid: dict[tuple[int, int], int] = {}

    def midpoint(a: int, b: int) -> int:
        key = (min(a, b), max(a, b))
        if key not in mid:
            p = verts[a] + verts[b]
            verts.append(p / np.linalg.norm(p))
            mid[key] = len(verts) - 1
        return mid[key]

    faces = []
    for a, b, c in f:
        ab, bc, ca = midpoint(a, b), midpoint(b, c), midpoint(c, a)
        faces += [(a, ab, ca), (b, bc, ab), (c, ca, bc), (ab, bc, ca)]
    rng = np.random.default_rng([int(seed), 0x9A9E8])
    pts = np.array(verts)
    # irregular by 5 % either way, on average as wide as the layout's ball (40 mm: the narrowest
    # object a pick holds; a jaw stopped under 35 mm closed on nothing)
    pts *= (0.95 + 0.1 * rng.random(len(pts)))[:, None]
    pts[:, :2] *= radius
    pts[:, 2] *= height / 2.0
    # a little flat where it rests (crumpled paper sags onto the table): a base to stand on,
    # so the ball stays where it was laid instead of rolling off its lowest vertex
    base = pts[:, 2].min() + 0.03 * height
    pts[:, 2] = np.maximum(pts[:, 2], base)
    pts[:, 2] -= base + height / 2.0  # the base on z = -height / 2
    return pts, np.array(faces, dtype=int)


# ------------------------------------------------------------------------------- textures
def table_textures(seed: int = 0) -> dict[str, np.ndarray]:
    """Grey modulations (uint8 RGB) of the table's textures; the material's colour tints
    them.  Drawn once per scene, the same for every layout."""
    n = TEXTURE_SIZE
    rng = np.random.default_rng([int(seed), 0x7E7])
    xs = np.linspace(0.0, 0.5, n, dtype=np.float32)
    ys = np.linspace(0.0, 0.6, n, dtype=np.float32)
    phase = rng.uniform(0, 2 * np.pi, 2)
    grain = (np.sin(ys[None, :] * 90.0 + 3.0 * np.sin(xs[:, None] * 11.0 + phase[0]))
             + 0.5 * np.sin(ys[None, :] * 260.0 + phase[1]))
    wood = 0.86 + 0.12 * grain / 1.5
    small = rng.normal(0.0, 1.0, (10, 10)).astype(np.float32)
    big = cv2.resize(small, (n, n), interpolation=cv2.INTER_CUBIC)
    blotches = 0.86 + 0.12 * np.clip(big, -2.0, 2.0) / 2.0
    out = {}
    for name, mod in (("wood", wood), ("blotches", blotches)):
        g = np.clip(255.0 * mod, 0, 255).astype(np.uint8)
        out[name] = np.repeat(g[:, :, None], 3, axis=2)
    return out


def _png(img: np.ndarray) -> bytes:
    ok, buf = cv2.imencode(".png", img[:, :, ::-1])
    if not ok:  # pragma: no cover - OpenCV always encodes a uint8 image
        raise RuntimeError("could not encode a texture")
    return bytes(buf.tobytes())


# ------------------------------------------------------------------------------- the scene
def _sub(parent: ET.Element, tag: str, **attrs: Any) -> ET.Element:
    return ET.SubElement(parent, tag, {k: str(v) for k, v in attrs.items()})


def _yaw_quat(yaw: float) -> str:
    return fmt((math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)))


def _scene_geom(parent: ET.Element, name: str, **attrs: Any) -> ET.Element:
    return _sub(parent, "geom", name=name, contype=SCENE_CONTYPE,
                conaffinity=SCENE_CONAFFINITY, **attrs)


def build_scene(arm: ArmMjcf, layout: Layout, world_cfg: WorldConfig = WorldConfig(),
                cfg: SceneConfig = SceneConfig(), prints: tuple[TablePrint, ...] = ()
                ) -> tuple[str, dict[str, bytes]]:
    """The scene's MJCF text and its assets (texture PNGs) for ``layout``, with ``prints``
    (calibration boards, table marks) where their poses say."""
    root = ET.Element("mujoco", model="so101_tabletop")
    _sub(root, "compiler", angle="radian", autolimits="true")
    opt = _sub(root, "option", timestep=f"{cfg.timestep:.9g}", integrator="implicitfast",
               cone="elliptic", impratio="10")
    # several contact points between convex shapes (a pad on a cup): a pinch on one point per
    # finger would let the cup swing about the line through them
    _sub(opt, "flag", multiccd="enable")
    width = max(s.width for s in CAMERA_SPECS.values())
    height = max(s.height for s in CAMERA_SPECS.values())
    vis = _sub(root, "visual")
    _sub(vis, "global", offwidth=width, offheight=height)
    _sub(vis, "quality", shadowsize=0, offsamples=0)
    _sub(vis, "headlight", ambient="0 0 0", diffuse="0.1 0.1 0.1",
         specular="0 0 0")
    _sub(vis, "map", znear="0.01", zfar="50")
    _sub(root, "statistic", extent="1", center="0.2 0 0")

    assets: dict[str, bytes] = {}
    asset = _sub(root, "asset")
    _sub(asset, "texture", name="sky", type="skybox", builtin="gradient",
         rgb1="0.45 0.47 0.50", rgb2="0.40 0.42 0.45", width=32, height=32)
    for name, img in table_textures().items():
        assets[f"table_{name}.png"] = _png(img)
        _sub(asset, "texture", name=f"table_{name}", type="2d", file=f"table_{name}.png")
    _sub(asset, "texture", name="table_checker", type="2d", builtin="checker",
         rgb1="1 1 1", rgb2="0.76 0.76 0.76", width=64, height=64)
    plain = {"specular": "0.05", "shininess": "0.1"}
    _sub(asset, "material", name="table_plain", rgba="0.84 0.78 0.70 1", **plain)
    for name, rep in (("wood", "1 1"), ("checker", "5 6"), ("blotches", "1 1")):
        _sub(asset, "material", name=f"table_{name}", texture=f"table_{name}",
             texrepeat=rep, texuniform="false", rgba="0.84 0.78 0.70 1", **plain)
    colours = {"floor": "0.31 0.29 0.27 1", "leg": "0.35 0.3 0.25 1",
               "cup": "0.78 0.16 0.16 1", "cup_inside": "0.61 0.12 0.12 1",
               "paper": "0.86 0.78 0.16 1", "tray": "0.42 0.50 0.59 1",
               "tray_rim": "0.36 0.43 0.51 1", "bin": "0.17 0.18 0.19 1",
               "bin_rim": "0.27 0.29 0.30 1"}
    for name, rgba in colours.items():
        _sub(asset, "material", name=name, rgba=rgba, **plain)
    for m in arm.materials:
        asset.append(m)
    for m in arm.meshes:
        asset.append(m)
    cup = layout.objects["red_cup"]
    paper = layout.objects["yellow_paper"]
    verts, faces = paper_mesh(paper.radius, paper.height, layout.seed)
    _sub(asset, "mesh", name="paper", vertex=fmt(verts.ravel()), face=" ".join(
        str(int(i)) for i in faces.ravel()))

    default = _sub(root, "default")
    _sub(default, "geom", solref="0.01 1", solimp="0.95 0.99 0.001")

    wb = _sub(root, "worldbody")
    _sub(wb, "light", name="key", directional="true", pos="0.3 0.2 1.5",
         dir="-0.15 -0.1 -1", diffuse=fmt((KEY_DIFFUSE,) * 3), ambient=fmt((KEY_AMBIENT,) * 3),
         specular="0.1 0.1 0.1", castshadow="false")
    _sub(wb, "light", name="fill", directional="true", pos="-0.3 -0.3 1.0",
         dir="0.4 0.3 -1", diffuse="0.1 0.1 0.1", specular="0 0 0",
         castshadow="false")
    _scene_geom(wb, "floor", type="plane", pos=f"0.2 0 {cfg.floor_z:.6g}", size="3 3 0.05",
                material="floor", friction="0.8 0.005 0.0001")
    (x0, x1), (y0, y1) = world_cfg.table_x, world_cfg.table_y
    th = cfg.table_thickness
    _scene_geom(wb, "table", type="box", material="table_plain",
                pos=fmt(((x0 + x1) / 2, (y0 + y1) / 2, -th / 2)),
                size=fmt(((x1 - x0) / 2, (y1 - y0) / 2, th / 2)),
                friction=f"{cfg.table_friction:.6g} 0.005 0.0001")
    leg_h = (-th - cfg.floor_z) / 2
    for i, (lx, ly) in enumerate(((x0 + 0.03, y0 + 0.03), (x0 + 0.03, y1 - 0.03),
                                  (x1 - 0.03, y0 + 0.03), (x1 - 0.03, y1 - 0.03))):
        _sub(wb, "geom", name=f"leg{i}", type="box", contype=0, conaffinity=0,
             material="leg", pos=fmt((lx, ly, -th - leg_h)), size=fmt((0.02, 0.02, leg_h)))
    for b in arm.bodies:
        wb.append(b)
    _tray(wb, layout.receptacles["tray"], cfg)
    _bin(wb, layout.receptacles["bin"], cfg)
    r, h = cup.radius, cup.height
    body = _sub(wb, "body", name="red_cup", pos=fmt((cup.x, cup.y, h / 2 + 1e-4)))
    _sub(body, "freejoint", name="red_cup")
    _sub(body, "inertial", pos=fmt((0, 0, -h / 6)), mass=f"{cfg.cup_mass:.6g}",
         diaginertia=fmt((cfg.cup_mass * (3 * r * r + h * h) / 12,) * 2
                         + (cfg.cup_mass * r * r / 2,)))
    # rolling friction too (condim 6): a cup knocked over rolls a little, not off the table
    _scene_geom(body, "red_cup", type="cylinder", size=fmt((r, h / 2)), material="cup",
                friction=f"{cfg.object_friction:.6g} 0.01 0.005", condim=6)
    _sub(body, "geom", name="red_cup_inside", type="cylinder", contype=0, conaffinity=0,
         size=fmt((0.72 * r, 0.0008)), pos=fmt((0, 0, h / 2)), material="cup_inside",
         mass=0)
    body = _sub(wb, "body", name="yellow_paper",
                pos=fmt((paper.x, paper.y, paper.height / 2 + 1e-4)),
                quat=_yaw_quat(paper.yaw))
    _sub(body, "freejoint", name="yellow_paper")
    # rolling friction too (condim 6): a ball of paper does not roll on
    _scene_geom(body, "yellow_paper", type="mesh", mesh="paper", material="paper",
                mass=f"{cfg.paper_mass:.6g}", friction=f"{cfg.object_friction:.6g} 0.01 0.01",
                condim=6)
    assets.update(add_prints(asset, wb, prints))
    act = _sub(root, "actuator")
    for a in arm.actuators:
        act.append(a)
    return ET.tostring(root, encoding="unicode"), assets


def _tray(wb: ET.Element, rec: Receptacle, cfg: SceneConfig) -> None:
    hx, hy = rec.half_size
    t, h = cfg.tray_wall, rec.height
    body = _sub(wb, "body", name="tray", pos=fmt((rec.x, rec.y, 0.0)), quat=_yaw_quat(rec.yaw))
    _scene_geom(body, "tray_plate", type="box", size=fmt((hx, hy, t / 2)),
                pos=fmt((0, 0, t / 2)), material="tray")
    walls = (((hx - t / 2, 0), (t / 2, hy)), ((-hx + t / 2, 0), (t / 2, hy)),
             ((0, hy - t / 2), (hx, t / 2)), ((0, -hy + t / 2), (hx, t / 2)))
    for i, ((px, py), (sx, sy)) in enumerate(walls):
        _scene_geom(body, f"tray_wall{i}", type="box", size=fmt((sx, sy, h / 2)),
                    pos=fmt((px, py, h / 2)), material="tray_rim")


def _bin(wb: ET.Element, rec: Receptacle, cfg: SceneConfig) -> None:
    r, h, w, n = rec.radius, rec.height, cfg.bin_wall, cfg.bin_segments
    body = _sub(wb, "body", name="bin", pos=fmt((rec.x, rec.y, 0.0)))
    _scene_geom(body, "bin_floor", type="cylinder", size=fmt((r, 0.002)), pos="0 0 0.002",
                material="bin")
    half_len = (r - w / 2) * math.tan(math.pi / n) + w / 2
    for i in range(n):
        a = 2 * math.pi * i / n
        c, s = math.cos(a), math.sin(a)
        quat = matrix_quat(np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]))
        _scene_geom(body, f"bin_wall{i}", type="box", size=fmt((w / 2, half_len, h / 2)),
                    pos=fmt(((r - w / 2) * c, (r - w / 2) * s, h / 2)), quat=fmt(quat),
                    material="bin")
