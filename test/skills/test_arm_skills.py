"""The tidy-up skills on the simulator, through their action servers (as the planner uses
them): ending rules, refusals, failures and the fresh-observation check."""

import math

import pytest

from solarian_agent.core import names
from solarian_agent.core.messages import SkillGoal
from solarian_agent.core.transport import GoalStatus
from solarian_agent.perception import scene
from solarian_agent.sim.camera import project
from solarian_agent.skills.arm_skills import StallTripwire
from solarian_agent.system import build_sim_system
from solarian_agent.testing.harness import record_events

_ids = iter(range(1, 10_000))


@pytest.fixture
def sim():
    s = build_sim_system(seed=7, with_monitor=False)
    events = record_events(s.bus, depth=1000)
    s.events = events
    s.runtime.run_for(0.2)
    yield s
    s.shutdown()


def run_tool(s, tool, params, timeout=30.0):
    gen = s.executor.generation
    h = s.bus.send_goal(names.skill_action(tool), SkillGoal(tool, params, gen, f"t{next(_ids)}"))
    assert s.run_until(lambda: h.done, timeout)
    return h


def ended(s, action_id):
    return next(e.data for e in s.events if e.kind == "skill_ended"
                and e.data["action_id"] == action_id)


def px(s, name):
    t = s.world.truth()
    o = t["objects"].get(name) or t["receptacles"][name]
    return list(project([o["x"], o["y"], 0.0]))


def test_move_to_named_pose_ends_within_tolerance(sim):
    h = run_tool(sim, "move_to_pose", {"pose": "ready"})
    assert h.status == GoalStatus.SUCCEEDED and h.result.reason == "arrived"
    q = sim.arm.q()
    # config/skills/move.yaml's ready: shoulder_lift -0.8 rad, jaw 0.67 rad
    assert abs(q[1] - (-0.8)) <= math.radians(2) and abs(q[5] - 0.67) <= math.radians(2)
    # a pose the arm is already at ends on the first check
    h2 = run_tool(sim, "move_to_pose", {"pose": "ready"})
    assert ended(sim, h2.goal.action_id)["duration_s"] <= sim.runtime.period_s + 1e-9


def test_unknown_pose_is_refused_by_schema(sim):
    h = sim.bus.send_goal("skills/move_to_pose", SkillGoal("move_to_pose", {"pose": "dance"},
                                                           sim.executor.generation, "tx"))
    assert h.result.outcome == "refused" and "pose" in h.result.reason


def test_gripper_closing_on_object_ends_by_stillness_not_timeout(sim):
    assert run_tool(sim, "pick_object", {"point": px(sim, "red_cup")}).result.outcome == \
        "succeeded"
    h = run_tool(sim, "set_gripper", {"opening_mm": 0})
    assert h.result.outcome == "succeeded" and h.result.reason == "stopped moving"
    d = ended(sim, h.goal.action_id)["duration_s"]
    assert 0.79 <= d <= 0.9  # 0.3 s still, counted from 0.5 s after the send
    assert sim.world.held is not None and sim.world.held.name == "red_cup"


def test_pick_and_place_cup_on_tray(sim):
    assert run_tool(sim, "pick_object", {"point": px(sim, "red_cup")}).result.outcome == \
        "succeeded"
    h = run_tool(sim, "place_at", {"point": px(sim, "tray")})
    assert h.result.outcome == "succeeded"
    run_tool(sim, "home", {})
    assert sim.world.truth()["objects"]["red_cup"]["location"] == "tray"


def test_point_on_background_is_refused_before_the_skill_starts(sim):
    h = run_tool(sim, "pick_object", {"point": [60, 60]})
    assert h.result.outcome == "refused" and "point again" in h.result.reason
    kinds = [e.kind for e in sim.events]
    assert "target_rejected" in kinds
    assert not any(e.kind == "skill_started" and e.data["skill"] == "pick_object"
                   for e in sim.events)
    rej = next(e.data for e in sim.events if e.kind == "target_rejected")
    assert rej["target_area"] > 0.05
    assert sim.trackers.result("overhead.target") is None  # the tracker was stopped


def test_failed_grasp_is_reported_with_a_reason(sim):
    sim.bus.call(names.SIM_INJECT_FAULT, {"kind": "grasp_fail", "count": 1})
    h = run_tool(sim, "pick_object", {"point": px(sim, "red_cup")})
    assert h.result.outcome == "failed"
    assert "closed on nothing" in h.result.reason
    assert sim.world.held is None  # nothing was taken


def test_slip_after_lift_fails_the_pick(sim):
    sim.bus.call(names.SIM_INJECT_FAULT, {"kind": "slip", "count": 1})
    h = run_tool(sim, "pick_object", {"point": px(sim, "yellow_paper")})
    assert h.result.outcome == "failed" and "slipped" in h.result.reason


def test_place_without_holding_fails(sim):
    h = run_tool(sim, "place_at", {"point": px(sim, "tray")})
    assert h.result.outcome in ("failed", "refused") and "nothing is held" in h.result.reason


def test_verify_state_uses_a_fresh_frame_and_reports_locations(sim):
    before = sim.cameras.frame("overhead")
    h = run_tool(sim, "verify_state", {})
    rep = h.result.data["report"]
    assert rep["red_cup"]["location"] == "table" and rep["tray"]["location"] == "table"
    assert h.result.data["observed_at"] > before.stamp
    assert h.result.data["arm_at_home"] is True


def test_verify_state_says_what_is_held_from_the_arms_state_not_only_the_wrist_image(sim):
    """The held check: a pick that holds says what it holds; after a place the
    open, empty gripper holds nothing (whatever the wrist camera sees below the fingers), and
    nor do fingers closed on nothing."""
    run_tool(sim, "pick_object", {"point": px(sim, "red_cup")})
    held = run_tool(sim, "verify_state", {}).result.data
    assert held["held"] == "red_cup" and held["report"]["red_cup"]["location"] == "held"
    # the jaws stand on the 45 mm cup
    assert held["opening_mm"] == pytest.approx(45.0, abs=0.5)
    assert run_tool(sim, "place_at", {"point": px(sim, "tray")}).result.outcome == "succeeded"
    after = run_tool(sim, "verify_state", {}).result.data
    assert after["held"] is None and after["report"]["red_cup"]["location"] == "tray"
    assert after["opening_mm"] >= 60
    # jaws closed on nothing hold nothing either
    run_tool(sim, "set_gripper", {"opening_mm": 0})
    assert run_tool(sim, "verify_state", {}).result.data["held"] is None


def test_stall_tripwire_fails_a_still_pick_after_five_seconds(sim):
    trip = StallTripwire(sim.arm)
    assert trip("a1", "pick_object", 0.0) is None
    sim.runtime.run_for(1.0)
    assert trip("a1", "pick_object", 1.0) is None
    sim.runtime.run_for(4.0)
    verdict = trip("a1", "pick_object", 5.0)
    assert verdict is not None and verdict[0] == "fail" and verdict[2] == "home_holding"
    assert trip("a2", "verify_state", 9.0) is None


def test_scene_detection_matches_projection(sim):
    dets = scene.detect(sim.cameras.frame("overhead").data)
    for name in ("red_cup", "yellow_paper", "tray", "bin"):
        u, v = px(sim, name)
        assert abs(dets[name].centroid[0] - u) < 6 and abs(dets[name].centroid[1] - v) < 6


def test_estop_is_latched_stops_the_skill_and_wins_until_reset(sim):
    h = sim.bus.send_goal("skills/pick_object", SkillGoal(
        "pick_object", {"point": px(sim, "red_cup")}, sim.executor.generation, "es1"))
    sim.runtime.run_for(0.5)
    assert h.status == GoalStatus.EXECUTING
    r = sim.bus.call(names.ESTOP, {"reason": "operator pressed the button"})
    assert r["success"]
    sim.runtime.run_for(0.1)
    assert h.done and h.result.outcome == "stopped"  # the e-stop is an operator takeover
    q0 = sim.world.q.copy()
    sim.runtime.run_for(1.0)
    assert abs(sim.world.q - q0).max() < 0.02  # holding (momentum of one step at most)
    # while latched no skill starts, and no command reaches the arm
    h2 = run_tool(sim, "move_to_pose", {"pose": "ready"}, timeout=30)
    assert h2.result.outcome == "refused" and "e-stop is latched" in h2.result.reason
    before = sim.sim.commands_rejected
    sim.arm.command({"shoulder_lift": 0.2})
    assert sim.sim.commands_rejected == before + 1
    assert "e-stop latched" in sim.sim.last_rejection
    assert sim.bus.call(names.ESTOP_RESET, {})["success"]
    h3 = run_tool(sim, "move_to_pose", {"pose": "ready"})
    assert h3.result.outcome == "succeeded" and abs(sim.world.q[1] - (-0.8)) < 0.05


@pytest.mark.parametrize("overlays", [True, False])
def test_planner_images_carry_the_tracker_outline_only_with_image_overlays(overlays):
    from dataclasses import replace

    from solarian_agent.core.config import load_agent_config
    from solarian_agent.perception import images as im
    from solarian_agent.system import default_config_path

    cfg = replace(load_agent_config(default_config_path()), image_overlays=overlays,
                  image_grid=False)
    s = build_sim_system(config=cfg, seed=7, with_monitor=False)
    s.runtime.run_for(0.2)
    h = s.bus.send_goal("skills/pick_object", SkillGoal(
        "pick_object", {"point": px(s, "red_cup")}, s.executor.generation, "ov1"))
    s.runtime.run_for(0.1)
    assert h.status == GoalStatus.EXECUTING
    view = s.planner.views.observe(["overhead"]).views[0].observation
    img = im.decode(view.data)
    # the outline is magenta (high blue and red, low green); nothing else in the scene is
    magenta = ((img[..., 0] > 120) & (img[..., 2] > 150) & (img[..., 1] < 110)).sum()
    assert (magenta > 20) == overlays, magenta
    s.shutdown()
