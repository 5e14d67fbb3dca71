"""The tabletop world: seeded layout, speed limits, grasping and releasing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sim_helpers import DT, JAW_CLOSE, JAW_OPEN, jaws_around, move_tip, set_gripper, settle

from solarian_agent.arm.jaw import SO101_JAW
from solarian_agent.arm.kinematics import HOME, ArmModel
from solarian_agent.core.errors import ConfigError
from solarian_agent.sim.tabletop import (
    GOALS,
    OBJECT_NAMES,
    RECEPTACLE_NAMES,
    WorldConfig,
    WorldError,
)
from solarian_agent.sim.world import World


def footprints(world: World) -> list[tuple[str, float, float, float]]:
    out = [(n, o.x, o.y, o.radius) for n, o in world.objects.items()]
    out += [(n, r.x, r.y, r.bounding_radius) for n, r in world.receptacles.items()]
    return out


def test_layout_is_reproducible_from_the_seed(arm: ArmModel) -> None:
    a, b = World(arm, seed=42), World(arm, seed=42)
    assert a.truth()["objects"] == b.truth()["objects"]
    assert a.truth()["receptacles"] == b.truth()["receptacles"]
    b.reset(43)
    assert a.truth()["objects"] != b.truth()["objects"]
    b.reset(42)
    assert a.truth()["objects"] == b.truth()["objects"]


def test_layout_has_no_overlap_lies_on_the_table_and_is_reachable(arm: ArmModel) -> None:
    w = World(arm, seed=0)
    cfg = w.config
    for seed in range(60):
        w.reset(seed)
        fp = footprints(w)
        assert {n for n, *_ in fp} == set(OBJECT_NAMES) | set(RECEPTACLE_NAMES)
        for i, (na, xa, ya, ra) in enumerate(fp):
            assert cfg.table_x[0] + ra <= xa <= cfg.table_x[1] - ra
            assert cfg.table_y[0] + ra <= ya <= cfg.table_y[1] - ra
            for nb, xb, yb, rb in fp[i + 1:]:
                assert math.hypot(xa - xb, ya - yb) >= ra + rb + cfg.margin - 1e-9, (seed, na, nb)
        for o in w.objects.values():
            assert o.location == "table"
            assert w.reachable(o.x, o.y, cfg.grasp_z)
        for r in w.receptacles.values():
            assert w.reachable(r.x, r.y, 0.08)


def test_reset_puts_the_arm_home_and_next_seed_advances(world: World) -> None:
    assert world.at_home() and tuple(world.q) == HOME
    s = world.seed
    world.command({"shoulder_pan": 1.0})
    world.step(DT)
    world.reset()
    assert world.seed == s + 1 and world.at_home() and world.t == 0.0


def test_joints_move_no_faster_than_their_limits(world: World) -> None:
    vmax = world.arm.velocity
    world.command([1.5, 1.0, -1.0, -1.0, 2.0, 0.06])
    prev = world.q.copy()
    for _ in range(40):
        world.step(DT)
        assert np.all(np.abs(world.q - prev) <= vmax * DT + 1e-12)
        prev = world.q.copy()
    settle(world)
    assert world.q == pytest.approx([1.5, 1.0, -1.0, -1.0, 2.0, 0.06])


def test_a_slower_command_velocity_is_respected(world: World) -> None:
    world.command({"shoulder_pan": 1.0}, max_velocity=0.25)
    world.step(0.1)
    assert world.q[0] == pytest.approx(0.025)


def test_targets_outside_the_limits_are_clamped_and_bad_ones_refused(world: World) -> None:
    world.command({"shoulder_pan": 9.0, "gripper": 5.0})
    # the URDF's limits: shoulder_pan +-1.91986 rad, the jaw -0.174533 .. 1.74533 rad
    assert world.target[0] == pytest.approx(1.91986) and world.target[5] == pytest.approx(1.74533)
    with pytest.raises(WorldError, match="unknown joint"):
        world.command({"elbow": 0.1})
    with pytest.raises(WorldError, match="non-finite"):
        world.command([0.0, float("nan"), 0.0, 0.0, 0.0])
    assert np.all(np.isfinite(world.target))
    with pytest.raises(ValueError):
        world.step(0.0)


def _closing(world: World) -> np.ndarray:
    d = world.arm.frame_pose(world.q, "gripper_link")[:2, 0]
    return np.asarray(d / np.linalg.norm(d))


def test_grasp_needs_the_tool_point_low_and_the_object_between_the_jaws(world: World) -> None:
    cup = world.objects["red_cup"]
    # too high: closing does nothing; the jaw reaches its closed limit
    jaws_around(world, "red_cup", z=0.08)
    set_gripper(world, JAW_CLOSE)
    assert world.held is None and world.q[5] == pytest.approx(JAW_CLOSE)
    # low, but the cup on the wrong side of the fixed jaw (behind its face): not between them
    set_gripper(world, JAW_OPEN)
    jaws_around(world, "red_cup", z=0.015)
    tip = world.tip_xyz[:2].copy()
    closing = _closing(world)
    behind = np.array([cup.x, cup.y]) + 2 * (np.array([cup.x, cup.y]) - tip)
    move_tip(world, behind[0], behind[1], 0.015)
    assert float(closing @ (np.array([cup.x, cup.y]) - world.tip_xyz[:2])) < 0
    set_gripper(world, JAW_CLOSE)
    assert world.held is None
    # between the fixed jaw's face and the moving jaw: taken; the jaw stops at the cup's width
    set_gripper(world, JAW_OPEN)
    jaws_around(world, "red_cup", z=0.015)
    set_gripper(world, JAW_CLOSE)
    assert world.held is cup and cup.location == "held"
    assert SO101_JAW.opening(world.q[5]) == pytest.approx(cup.width, abs=1e-6)
    assert world.events[-1].kind == "grasped"
    # it moves with the jaws, against the fixed jaw: half its width along the closing direction
    move_tip(world, 0.18, -0.02, 0.1)
    expect = world.tip_xyz[:2] + cup.radius * _closing(world)
    assert (cup.x, cup.y) == pytest.approx((expect[0], expect[1]), abs=1e-9)
    assert world.truth()["held"] == "red_cup"


def test_an_open_gripper_does_not_grasp_on_its_way_down(world: World) -> None:
    cup = world.objects["red_cup"]
    jaws_around(world, "red_cup", z=0.015)
    assert world.held is None and cup.location == "table"


def _carry_to(world: World, name: str, x: float, y: float, z: float) -> None:
    """Put the held ``name``'s centre over (x, y): the tool point half its width short of it
    along the closing direction."""
    move_tip(world, x, y, z)
    r = world.objects[name].radius
    d = _closing(world)
    move_tip(world, x - r * d[0], y - r * d[1], z)


@pytest.mark.parametrize("name", ["red_cup", "yellow_paper"])
@pytest.mark.parametrize("receptacle", ["tray", "bin"])
def test_release_over_a_receptacle_puts_the_object_in_it(world: World, name: str,
                                                         receptacle: str) -> None:
    obj = world.objects[name]
    jaws_around(world, name)
    set_gripper(world, JAW_CLOSE)
    assert world.held is obj
    rec = world.receptacles[receptacle]
    _carry_to(world, name, rec.x, rec.y, 0.09)
    set_gripper(world, JAW_OPEN)
    assert world.held is None and obj.location == receptacle
    truth = world.truth()
    assert truth["objects"][name][f"in_{receptacle}"]
    assert name in truth[f"in_{receptacle}"]


def test_an_object_in_the_bin_can_be_picked_again(world: World) -> None:
    cup = world.objects["red_cup"]
    jaws_around(world, "red_cup")
    set_gripper(world, JAW_CLOSE)
    rec = world.receptacles["bin"]
    _carry_to(world, "red_cup", rec.x, rec.y, 0.12)
    set_gripper(world, JAW_OPEN)
    assert cup.location == "bin"
    # the bin is 8 cm deep: the tool point 5 cm up is inside it, low enough to take the cup
    jaws_around(world, "red_cup", z=0.05)
    set_gripper(world, JAW_CLOSE)
    assert world.held is cup and cup.location == "held"


def test_release_elsewhere_drops_the_object_on_the_table_where_it_was_held(
        world: World) -> None:
    obj = world.objects["yellow_paper"]
    jaws_around(world, "yellow_paper")
    set_gripper(world, JAW_CLOSE)
    spot = None
    for x, y in [(0.2, 0.0), (0.16, 0.1), (0.16, -0.1), (0.25, 0.05), (0.12, -0.18)]:
        if not any(r.contains(x, y) for r in world.receptacles.values()):
            spot = (x, y)
            break
    assert spot is not None
    _carry_to(world, "yellow_paper", spot[0], spot[1], 0.06)
    set_gripper(world, JAW_OPEN)
    assert obj.location == "table" and obj.z == 0.0
    assert (obj.x, obj.y) == pytest.approx(spot, abs=0.006)


def test_task_success_needs_goals_nothing_held_and_home(world: World) -> None:
    assert not world.success()
    for name, goal in GOALS.items():
        jaws_around(world, name)
        set_gripper(world, JAW_CLOSE)
        rec = world.receptacles[goal]
        _carry_to(world, name, rec.x, rec.y, 0.09)
        set_gripper(world, JAW_OPEN)
    assert world.task_complete() and not world.success()  # not home yet
    world.command(HOME)
    settle(world)
    assert world.success() and world.truth()["success"]
    assert world.path_length > 0.3 and world.steps > 0


def test_world_config_is_validated() -> None:
    with pytest.raises(ConfigError, match="sim.world.margin"):
        WorldConfig(margin=-1)
    with pytest.raises(ConfigError, match="sim.world.object_r"):
        WorldConfig(object_r=(0.3, 0.2))
    with pytest.raises(ConfigError, match="home"):
        WorldConfig(home=(0.0,))
