"""Rendered cameras: objects where project() says, fingers at the bottom of the wrist view,
pixel <-> table mapping, visual style knobs."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from sim_helpers import JAW_CLOSE, JAW_OPEN, jaws_around, move_tip, set_gripper

from solarian_agent.arm.kinematics import ArmModel
from solarian_agent.sim.camera import (
    OVERHEAD,
    ProjectionError,
    overhead_camera,
    project,
    unproject,
)
from solarian_agent.sim.render import Renderer, RenderError, VisualStyle
from solarian_agent.sim.world import World


def is_red(px: np.ndarray) -> bool:
    b, g, r = (int(v) for v in px)
    return r > 100 and r > 2 * max(b, g)


def is_yellow(px: np.ndarray) -> bool:
    b, g, r = (int(v) for v in px)
    return r > 150 and g > 150 and b < 100


def finger_mask(img: np.ndarray, style: VisualStyle) -> np.ndarray:
    light = np.array(style.finger_bgr)
    cols = [light, (light * 0.72).astype(int), (light * 0.6).astype(int),
            (light * 0.72 * 0.6).astype(int)]
    return np.any([np.all(np.abs(img.astype(int) - c) <= 1, axis=2) for c in cols], axis=0)


def finger_gap(img: np.ndarray, style: VisualStyle, row: int) -> tuple[int, int]:
    """Innermost finger columns left and right of the image centre on ``row``."""
    m = finger_mask(img, style)[row]
    mid = img.shape[1] // 2
    left = np.nonzero(m[:mid])[0]
    right = np.nonzero(m[mid:])[0] + mid
    assert left.size and right.size, "both fingers must be visible on this row"
    return int(left.max()), int(right.min())


@pytest.fixture
def renderer(arm: ArmModel) -> Renderer:
    return Renderer(arm)


def test_overhead_intrinsics_and_camera_info(renderer: Renderer) -> None:
    info = renderer.camera_info("overhead", stamp=3.0)
    assert (info.width, info.height) == (640, 480)
    assert info.k == OVERHEAD.k and info.frame_id == "overhead_camera_optical"
    assert info.stamp == 3.0
    assert renderer.camera_info("wrist").width == 480


def test_camera_at_follows_the_joints(renderer: Renderer, arm: ArmModel) -> None:
    q = [0.3, 0.2, 0.4, 0.6, 0.5, 0.02]
    cam = renderer.camera_at("wrist", q)
    assert np.allclose(cam.pose, arm.frame_pose(q, "wrist_camera_optical"))
    assert np.allclose(renderer.camera_at("overhead", q).pose,
                       renderer.camera("overhead").pose)


def test_project_and_unproject_are_inverse_on_the_table(renderer: Renderer) -> None:
    assert renderer.project((0.2, 0.0, 0.0)) == pytest.approx((320.0, 240.0))
    u, v = renderer.project((0.3, 0.1, 0.0))
    assert u < 320 and v < 240  # image up = +x, image right = -y
    for xyz in [(0.1, -0.2, 0.0), (0.35, 0.25, 0.0), (0.2, 0.05, 0.07)]:
        u, v = renderer.project(xyz)
        assert renderer.unproject(u, v, z=xyz[2]) == pytest.approx(xyz, abs=1e-9)
    # the module-level helpers use the same overhead camera
    assert project((0.3, 0.1, 0.0)) == pytest.approx(renderer.project((0.3, 0.1, 0.0)))
    assert unproject(100.0, 50.0) == pytest.approx(renderer.unproject(100.0, 50.0))
    assert overhead_camera().in_image(*project((0.2, 0.0, 0.0)))
    with pytest.raises(ProjectionError):
        unproject(100.0, 50.0, z=2.0)  # above the camera
    with pytest.raises(ProjectionError):
        project((0.2, 0.0, 1.5))  # behind it


def test_the_whole_table_is_in_the_overhead_view(renderer: Renderer, world: World) -> None:
    cam = renderer.camera("overhead")
    (x0, x1), (y0, y1) = world.config.table_x, world.config.table_y
    for x in (x0, x1):
        for y in (y0, y1):
            assert cam.in_image(*cam.project((x, y, 0.0)))


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_objects_appear_at_their_projection(renderer: Renderer, arm: ArmModel,
                                            seed: int) -> None:
    w = World(arm, seed=seed)
    img = renderer.render("overhead", w)
    assert img.shape == (480, 640, 3) and img.dtype == np.uint8
    cup, paper = w.objects["red_cup"], w.objects["yellow_paper"]
    u, v = (int(round(c)) for c in renderer.project((cup.x, cup.y, 0.0)))
    assert is_red(img[v, u])
    u, v = (int(round(c)) for c in renderer.project((paper.x, paper.y, 0.0)))
    assert is_yellow(img[v, u])
    # HSV segmentation finds the cup as one blob of about its projected size
    hsv = cv2.cvtColor(img, cv2.COLOR_BGR2HSV)
    red = ((hsv[..., 0] < 8) | (hsv[..., 0] > 172)) & (hsv[..., 1] > 120) & (hsv[..., 2] > 80)
    px_radius = OVERHEAD.fx * cup.radius / 0.8
    assert red.sum() == pytest.approx(np.pi * px_radius**2, rel=0.25)
    tray = w.receptacles["tray"]
    u, v = (int(round(c)) for c in renderer.project((tray.x, tray.y, 0.0)))
    b, g, r = (int(c) for c in img[v, u])
    assert b > r + 20  # grey-blue


def test_wrist_camera_shows_both_jaws_and_their_gap(renderer: Renderer,
                                                    world: World) -> None:
    style = renderer.style
    move_tip(world, 0.2, 0.0, 0.1)
    set_gripper(world, 0.0)
    closed = renderer.render("wrist", world).copy()
    assert closed.shape == (360, 480, 3)
    row = closed.shape[0] - 2
    assert finger_mask(closed, style)[row].sum() > 50  # fingers reach the bottom edge
    set_gripper(world, JAW_OPEN)
    opened = renderer.render("wrist", world)
    gap_closed = np.subtract(*finger_gap(closed, style, 300)[::-1])
    gap_open = np.subtract(*finger_gap(opened, style, 300)[::-1])
    assert gap_open > gap_closed + 40
    # the close-up is centred on the gap between the jaws
    lo, hi = finger_gap(opened, style, 300)
    assert abs((lo + hi) / 2 - 240) < 3


def test_a_held_object_appears_between_the_fingers(renderer: Renderer, world: World) -> None:
    cup = world.objects["red_cup"]
    jaws_around(world, "red_cup")
    set_gripper(world, JAW_CLOSE)
    assert world.held is cup
    move_tip(world, 0.2, 0.0, 0.12)
    img = renderer.render("wrist", world)
    centre = np.array([cup.x, cup.y, cup.z])
    u, v = renderer.camera("wrist").project(centre)
    assert is_red(img[int(v), int(u)])
    lo, hi = finger_gap(img, renderer.style, 300)
    assert lo < u < hi
    over = renderer.render("overhead", world)
    u, v = renderer.project(centre)
    assert is_red(over[int(v), int(u)])


def test_visual_style_knobs(arm: ArmModel, world: World) -> None:
    base = Renderer(arm).render("overhead", world).copy()
    shifted = VisualStyle.randomized(3, background=True, appearance=True, lighting=True,
                                     noise=True)
    assert shifted != VisualStyle() and shifted.noise_std > 0
    assert VisualStyle.randomized(3) == VisualStyle(seed=3)
    a = Renderer(arm, shifted).render("overhead", world).copy()
    b = Renderer(arm, shifted).render("overhead", world).copy()
    assert np.array_equal(a, b)  # deterministic from the style's seed
    assert np.abs(a.astype(int) - base.astype(int)).mean() > 5
    dark = Renderer(arm, VisualStyle(light_gain=0.5)).render("overhead", world)
    assert dark.mean() < 0.6 * base.mean()
    move_tip(world, 0.2, 0.0, 0.1)  # the wrist camera looks at the table
    for tex in ("wood", "checker", "blotches"):
        img = Renderer(arm, VisualStyle(table_texture=tex)).render("wrist", world)
        assert img.std() > 10
    with pytest.raises(RenderError):
        VisualStyle(table_texture="marble")
    with pytest.raises(RenderError):
        VisualStyle(light_gain=0.0)
    with pytest.raises(RenderError, match="unknown camera"):
        Renderer(arm).render("thermal", world)
