"""The MuJoCo world: the 2D world's layout per seed, servos within the limits, grasps that
hold or slip by contact and friction, the injectable faults, and truth from the physics."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sim3d_helpers import close_gripper, jaws_down_around, pick, settle

from solarian_agent.arm.jaw import SO101_JAW
from solarian_agent.arm.kinematics import ArmModel
from solarian_agent.core.errors import ConfigError
from solarian_agent.sim.faults import FaultConfig, FaultInjector
from solarian_agent.sim.ideal import IdealConfig, IdealController
from solarian_agent.sim.mujoco.scene import SceneConfig
from solarian_agent.sim.mujoco.urdf_mjcf import ArmPhysics
from solarian_agent.sim.mujoco.world import DEFAULT_CONFIG, MujocoWorld, MujocoWorldConfig
from solarian_agent.sim.tabletop import WorldError
from solarian_agent.sim.world import World


@pytest.mark.parametrize("seed", [3, 11])
def test_the_layout_is_the_2d_worlds_for_the_seed_at_rest_on_the_table(
        arm: ArmModel, world: MujocoWorld, seed: int) -> None:
    world.reset(seed)
    flat = World(arm, DEFAULT_CONFIG, seed=seed)
    assert world.receptacles == flat.receptacles
    truth = world.truth()
    assert truth["backend"] == "mujoco" and truth["seed"] == seed and truth["held"] is None
    for name, obj in flat.objects.items():
        got = truth["objects"][name]
        assert math.hypot(got["x"] - obj.x, got["y"] - obj.y) < 0.002, name
        assert got["location"] == "table" and abs(got["z"]) < 0.003
    assert truth["objects"]["red_cup"]["upright"]
    assert world.at_home() and not world.success()


def test_reset_builds_a_new_scene_and_restarts_time(world: MujocoWorld) -> None:
    world.reset(3)
    world.step(0.2)
    version, model = world.layout_version, world.model
    world.reset(4)
    assert world.t == 0.0 and world.steps == 0 and world.seed == 4
    assert world.layout_version == version + 1 and world.model is not model
    world.reset()  # the next seed
    assert world.seed == 5


def test_a_grasp_holds_the_cup_by_friction_and_lifts_it(world: MujocoWorld) -> None:
    world.reset(3)
    pick(world, "red_cup")
    truth = world.truth()
    assert truth["held"] == "red_cup"
    cup = truth["objects"]["red_cup"]
    assert cup["location"] == "held" and cup["z"] > 0.08
    assert cup["z"] == pytest.approx(world.tip_xyz[2] - 0.015, abs=0.006)
    # the jaw stopped on the cup: the cup is taller than the moving jaw's finger, so the
    # finger's upper end (the narrowest of the opened jaws' V) meets it and the jaws' narrowest
    # gap is its diameter
    gap = SO101_JAW.clearance(world.q[5])
    assert gap == pytest.approx(2 * DEFAULT_CONFIG.cup_radius, abs=0.003)
    assert [e["kind"] for e in truth["events"]] == ["grasped"]


def test_without_friction_the_same_grasp_slips(arm: ArmModel) -> None:
    slick = MujocoWorldConfig(scene=SceneConfig(arm=ArmPhysics(finger_friction=0.005)))
    w = MujocoWorld(arm, seed=3, physics=slick)
    pick(w, "red_cup")
    truth = w.truth()
    assert truth["held"] is None and truth["objects"]["red_cup"]["location"] == "table"
    assert w.q[5] < SO101_JAW.lower + 0.01  # the jaw closed past it once it slid out
    assert "slipped" in [e["kind"] for e in truth["events"]]


def test_an_injected_slip_drops_the_lifted_cup_back_onto_the_table(
        world: MujocoWorld) -> None:
    world.reset(3)
    world.faults.inject({"kind": "slip"}, world.t, ("red_cup",))
    pick(world, "red_cup")
    truth = world.truth()
    kinds = [e["kind"] for e in truth["events"]]
    assert kinds[0] == "grasped" and "slipped" in kinds
    assert truth["held"] is None and truth["objects"]["red_cup"]["location"] == "table"
    assert truth["faults"]["counts"]["slip"] == 1
    # friction is back once it is free of the jaws: the next grasp holds (the paper ball: the
    # closing jaw swings through the falling cup and may tip it over)
    assert world.model.geom_friction[world._finger_geoms, 0] == pytest.approx(
        world.physics.scene.arm.finger_friction)
    pick(world, "yellow_paper")
    assert world.truth()["held"] == "yellow_paper"


def test_an_injected_grasp_failure_leaves_the_object_behind(world: MujocoWorld) -> None:
    world.reset(3)
    world.faults.inject({"kind": "grasp_fail"}, world.t)
    pick(world, "yellow_paper")
    truth = world.truth()
    assert [e["kind"] for e in truth["events"]][:1] == ["grasp_failed"]
    assert truth["held"] is None and truth["objects"]["yellow_paper"]["location"] == "table"
    assert truth["faults"]["counts"]["grasp_fail"] == 1


def test_random_faults_come_from_the_injector_seed(arm: ArmModel) -> None:
    w = MujocoWorld(arm, faults=FaultInjector(FaultConfig(grasp_fail_p=1.0,
                                                          max_consecutive=1)), seed=3)
    pick(w, "red_cup")
    assert w.truth()["held"] is None  # the first attempt fails ...
    pick(w, "red_cup")
    assert w.truth()["held"] == "red_cup"  # ... and at most max_consecutive in a row


def test_move_object_puts_it_elsewhere_and_waits_while_it_is_held(
        world: MujocoWorld) -> None:
    world.reset(3)
    world.faults.inject({"kind": "move_object", "object": "red_cup", "x": 0.2, "y": 0.1},
                        world.t, ("red_cup", "yellow_paper"))
    world.step(0.02)
    cup = world.truth()["objects"]["red_cup"]
    assert (cup["x"], cup["y"]) == pytest.approx((0.2, 0.1), abs=0.002)
    assert world.truth()["events"][-1]["kind"] == "moved"
    pick(world, "red_cup")
    world.faults.inject({"kind": "move_object", "object": "red_cup"}, world.t,
                        ("red_cup", "yellow_paper"))
    world.step(0.02)
    assert world.truth()["held"] == "red_cup"  # a held object is not taken from the gripper
    assert world.faults.counts["move_object"] == 1


def test_commands_are_clamped_to_the_joint_limits_and_bad_ones_refused(
        arm: ArmModel, world: MujocoWorld) -> None:
    world.reset(3)
    world.command({"shoulder_pan": 9.0, "gripper": 5.0})
    assert world.target[0] == arm.upper[0] and world.target[5] == arm.upper[5]
    # the URDF's limits: shoulder_pan +-1.91986 rad, the jaw -0.174533 .. 1.74533 rad
    assert (world.target[0], world.target[5]) == pytest.approx((1.91986, 1.74533))
    with pytest.raises(WorldError, match="unknown joint"):
        world.command({"elbow": 0.1})
    with pytest.raises(WorldError, match="non-finite"):
        world.command({"wrist_flex": float("nan")})
    assert np.all(np.isfinite(world.target))
    world.step(0.5)
    assert np.all(world.setpoint <= arm.upper + 1e-12)
    assert np.all(world.setpoint >= arm.lower - 1e-12)


def test_the_servo_setpoint_moves_no_faster_than_the_velocity_limits(
        arm: ArmModel, world: MujocoWorld) -> None:
    world.reset(3)
    start = world.setpoint.copy()
    world.command([1.5, 0.8, -0.8, 0.2, 2.0, 0.06])
    world.step(0.1)
    assert np.all(np.abs(world.setpoint - start) <= arm.velocity * 0.1 + 1e-9)


def test_a_squeezing_gripper_keeps_its_setpoint_within_the_lead(world: MujocoWorld) -> None:
    world.reset(3)
    jaws_down_around(world, "red_cup")
    close_gripper(world)
    base = world.control_base()["gripper"]
    lead = world.arm.velocity[5] * world.physics.lead_time_s
    assert base == pytest.approx(world.q[5] - lead, abs=1e-9)  # still squeezing the cup
    assert world.truth()["held"] == "red_cup"
    settle(world)


@pytest.mark.parametrize("seed", [1, 2])
def test_the_ideal_controller_tidies_the_physical_table(world: MujocoWorld,
                                                        seed: int) -> None:
    world.reset(seed)
    res = IdealController(world, IdealConfig(hover_z=0.12, release_z=0.11)).run()
    truth = world.truth()
    assert res.success, res.failures
    assert truth["in_tray"] == ["red_cup"] and truth["in_bin"] == ["yellow_paper"]
    assert truth["success"] and truth["objects"]["red_cup"]["upright"]


def test_invalid_physics_settings_name_their_path() -> None:
    with pytest.raises(ConfigError, match="sim.mujoco.lead_time_s"):
        MujocoWorldConfig(lead_time_s=0.0)
    with pytest.raises(ConfigError, match="sim.mujoco.timestep"):
        SceneConfig(timestep=0.1)
    with pytest.raises(ConfigError, match="sim.mujoco.arm.kp"):
        ArmPhysics(kp=-1.0)
