"""``sim.launch.py sim:=mujoco``: the same node, topics and services, over the MuJoCo
backend (the launch plan and the node's core; the rclpy shells are tested in test/ros)."""

from __future__ import annotations

from pathlib import Path

import pytest

from solarian_agent.core import names
from solarian_agent.core.clock import FakeClock
from solarian_agent.ros import components as C
from solarian_agent.ros import launch_plan
from solarian_agent.rosmsg import graph
from solarian_agent.sim.mujoco.world import MujocoWorld


def _params(plan: list[launch_plan.Planned], exe: str) -> dict[str, object]:
    return next(p.parameters for p in plan if p.executable == exe)


def test_the_launch_plan_passes_the_backend_to_the_sim_and_skills_nodes(
        repo_root: Path) -> None:
    assert "sim" in {a.name for a in launch_plan.SIM_ARGS}
    plan = launch_plan.sim_plan({"sim": "mujoco", "seed": "4"}, repo_root)
    assert _params(plan, "sim_node")["sim"] == "mujoco"
    assert _params(plan, "sim_node")["seed"] == 4
    assert _params(plan, "skills_node")["sim"] == "mujoco"
    default = launch_plan.sim_plan({}, repo_root)
    assert _params(default, "sim_node")["sim"] == "2d"
    names_ = {p.executable for p in plan}
    assert names_ == {p.executable for p in default}  # the same graph
    with pytest.raises(ValueError, match="sim:='gazebo' is not a simulator backend; "
                                         "allowed: 2d, mujoco"):
        launch_plan.sim_plan({"sim": "gazebo"}, repo_root)
    # the robot's skills point at the real table (no simulated scene's heights)
    robot_skills = launch_plan._agent_nodes({}, repo_root)[0]
    assert robot_skills.executable == "skills_node" and "sim" not in robot_skills.parameters


def test_the_sim_node_core_over_mujoco_publishes_and_serves_the_same_graph() -> None:
    cfg = C.load_config()
    core = C.build_sim_core(FakeClock(), cfg, seed=3, slip_p=0.5, sim="mujoco")
    try:
        assert isinstance(core.parts["world"], MujocoWorld)
        assert core.spec == graph.sim_node(graph.DEFAULT_SIM_CAMERAS)
        truth = core.bus.subscribe(names.SIM_TRUTH, C.graph.T_SIM_TRUTH)
        img = core.bus.subscribe(names.image_topic("wrist"), names.T_IMAGE)
        core.start()
        for _ in range(10):
            core.loops[0].fn()
        assert truth.latest()["backend"] == "mujoco"
        assert img.latest().data.shape == (360, 480, 3)
        assert core.bus.call(names.SIM_RESET, {"seed": 9})["seed"] == 9
        assert core.parts["world"].faults.config.slip_p == 0.5
    finally:
        core.shutdown()


def test_the_skills_point_at_the_backends_heights() -> None:
    flat = C.tool_set("tidy")
    deep = C.tool_set("tidy", "mujoco")
    assert "point_z" not in flat["pick_object"].bound
    assert deep["pick_object"].bound["point_z"] == pytest.approx(0.04)
    assert deep["place_at"].bound["point_z"] == pytest.approx(0.02)
    with pytest.raises(Exception, match="allowed: 2d, mujoco"):
        C.tool_set("tidy", "unity")
