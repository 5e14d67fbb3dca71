"""The MuJoCo cameras: frames of the published sizes, rendered where the published camera
models say, the wrist camera following the arm, colours perception finds, and the 3D domain
shift (lighting, textures, camera pose jitter)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from solarian_agent.arm.kinematics import TIP_FRAME, ArmModel
from solarian_agent.perception import cv_monitor, scene
from solarian_agent.sim.backend import point_heights
from solarian_agent.sim.camera import RenderError
from solarian_agent.sim.drawing import WRIST_VIEW, jaw_frame
from solarian_agent.sim.mujoco.render import MujocoRenderer
from solarian_agent.sim.mujoco.style import SceneStyle
from solarian_agent.sim.mujoco.world import MujocoWorld
from solarian_agent.sim.render import Renderer


def _edge_samples(world: MujocoWorld, cam: object, inset_px: float = 4.0
                  ) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(pixel just inside, pixel just outside) the table at its edges' midpoints (the near
    edge is under the arm)."""
    x1 = world.config.table_x[1]
    y0, y1 = world.config.table_y
    out = []
    for inside, outside in (((x1 - 0.01, 0.0), (x1 + 0.01, 0.0)),
                            ((0.2, y0 + 0.01), (0.2, y0 - 0.01)),
                            ((0.2, y1 - 0.01), (0.2, y1 + 0.01))):
        pi = cam.project((*inside, 0.0))  # type: ignore[attr-defined]
        po = cam.project((*outside, 0.0))  # type: ignore[attr-defined]
        d = np.array(po) - np.array(pi)
        d /= np.linalg.norm(d)
        edge = (np.array(pi) + np.array(po)) / 2
        a, b = edge - inset_px * d, edge + inset_px * d
        out.append(((int(round(a[0])), int(round(a[1]))), (int(round(b[0])), int(round(b[1])))))
    return out


def test_frames_have_the_published_sizes_and_show_something(
        renderer: MujocoRenderer, world: MujocoWorld) -> None:
    world.reset(3)
    for cam, (w, h) in {"overhead": (640, 480), "wrist": (480, 360)}.items():
        img = renderer.render(cam, world)
        assert img.shape == (h, w, 3) and img.dtype == np.uint8 and img.flags.writeable
        info = renderer.camera_info(cam)
        assert (info.width, info.height) == (w, h)
        if cam == "overhead":
            assert img.std() > 10
        else:  # at home the close-up looks up past the jaws: both jaws, apart, nothing else
            view = cv_monitor.measure(img)
            assert view.fingers == 2 and view.gap > 0 and view.object_area == 0, view
    with pytest.raises(RenderError, match="unknown camera"):
        renderer.render("side", world)


def test_the_camera_models_are_the_2d_renderers(arm: ArmModel,
                                                renderer: MujocoRenderer) -> None:
    flat = Renderer(arm)
    for cam in flat.cameras:
        assert renderer.camera_info(cam) == flat.camera_info(cam)
        q = np.array([0.2, 0.1, 0.3, 0.9, 0.4, 0.03])
        assert np.allclose(renderer.camera_at(cam, q).pose, flat.camera_at(cam, q).pose)
    assert np.allclose(renderer.camera("overhead").pose, flat.camera("overhead").pose)


def test_the_table_edges_are_rendered_where_the_published_model_projects_them(
        renderer: MujocoRenderer, world: MujocoWorld) -> None:
    world.reset(3)
    img = renderer.render("overhead", world).astype(int)
    table, floor = np.array([178, 200, 215]), np.array([70, 74, 78])
    for (ui, vi), (uo, vo) in _edge_samples(world, renderer.camera("overhead")):
        inside, outside = img[vi, ui], img[vo, uo]
        assert np.abs(inside - table).max() < np.abs(inside - floor).max(), (ui, vi)
        assert np.abs(outside - floor).max() < np.abs(outside - table).max(), (uo, vo)


def test_the_wrist_camera_follows_the_arm(arm: ArmModel, renderer: MujocoRenderer,
                                          world: MujocoWorld) -> None:
    world.reset(3)
    home = renderer.render("wrist", world)
    world.command([0.6, 0.4, 0.2, 1.0, 0.0, 0.05])
    for _ in range(100):
        world.step(0.02)
    moved = renderer.render("wrist", world)
    assert np.abs(home.astype(int) - moved.astype(int)).mean() > 10
    # the close-up's pose, as the 2D renderer's: behind the jaws' gap, following the jaw
    poses = arm.frame_poses(world.q, (TIP_FRAME, "gripper_link"))
    assert np.allclose(renderer.camera("wrist").pose,
                       jaw_frame(poses, float(world.q[5]))[0] @ WRIST_VIEW)


@pytest.mark.parametrize("seed", [3, 8])
def test_perception_finds_everything_where_it_is(renderer: MujocoRenderer,
                                                 world: MujocoWorld, seed: int) -> None:
    world.reset(seed)
    dets = scene.detect(renderer.render("overhead", world))
    assert set(dets) == {"red_cup", "yellow_paper", "tray", "bin"}
    cam = renderer.camera("overhead")
    z = point_heights("mujoco")
    # a pick has half the fingers' spare opening (7.5 mm around the cup); a place has the
    # receptacle's room around the object (2 cm and more)
    for name, tool, tol in (("red_cup", "pick_object", 0.0075),
                            ("yellow_paper", "pick_object", 0.0075),
                            ("tray", "place_at", 0.02), ("bin", "place_at", 0.02)):
        x, y, _ = cam.unproject(*dets[name].inner, z[tool]["point_z"])
        thing = world.objects.get(name) or world.receptacles[name]
        assert math.hypot(x - thing.x, y - thing.y) < tol, name
    rep = scene.report(dets)
    assert rep["red_cup"]["location"] == "table" and rep["yellow_paper"]["location"] == "table"


def test_domain_shift_changes_the_look_not_the_scene(arm: ArmModel,
                                                     renderer: MujocoRenderer,
                                                     world: MujocoWorld) -> None:
    world.reset(3)
    base = renderer.render("overhead", world).astype(int)
    shifted = MujocoRenderer(arm, SceneStyle.randomized(4, lighting=True, textures=True))
    jittered = MujocoRenderer(arm, SceneStyle.randomized(4, camera=True))
    try:
        look = shifted.render("overhead", world).astype(int)
        assert np.abs(look - base).mean() > 8
        assert {"red_cup", "yellow_paper"} <= set(scene.detect(look.astype(np.uint8)))
        moved = jittered.render("overhead", world)
        # the camera sits off its calibration: the cup is drawn a few pixels away
        a = scene.detect(base.astype(np.uint8))["red_cup"].centroid
        b = scene.detect(moved)["red_cup"].centroid
        assert 2.0 < math.hypot(a[0] - b[0], a[1] - b[1]) < 40.0
        # the published model is the calibration, not the jittered pose
        assert np.allclose(jittered.camera("overhead").pose, renderer.camera("overhead").pose)
        # the world's physics is untouched by a style
        assert world.truth()["objects"]["red_cup"]["location"] == "table"
    finally:
        shifted.close()
        jittered.close()


def test_style_validation() -> None:
    with pytest.raises(RenderError, match="light_tilt_deg"):
        SceneStyle(light_tilt_deg=80.0)
    with pytest.raises(RenderError, match="camera_jitter"):
        SceneStyle(camera_jitter_m=0.5)
    assert SceneStyle.randomized(1) == SceneStyle.randomized(1)
    assert SceneStyle.randomized(1, lighting=True) != SceneStyle.randomized(2, lighting=True)


def test_frames_can_be_drawn_from_any_thread(renderer: MujocoRenderer,
                                             world: MujocoWorld) -> None:
    """The sim node renders on its loop thread, not the thread that made the renderer."""
    import threading

    world.reset(3)
    here = renderer.render("overhead", world)
    there: dict[str, object] = {}

    def draw() -> None:
        try:
            there["img"] = renderer.render("overhead", world)
        except Exception as e:  # pragma: no cover - the failure being tested against
            there["err"] = e

    t = threading.Thread(target=draw)
    t.start()
    t.join(timeout=60)
    assert "err" not in there, there.get("err")
    assert np.array_equal(there["img"], here)  # type: ignore[arg-type]
