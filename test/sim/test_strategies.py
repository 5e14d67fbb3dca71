"""Experiment 6-13's execution strategies through the product, and the tidy benchmark.

The strategies are the ``rules`` planner's (open-loop, step-verified, predictive), run through
the system the demo builds; the benchmark counts a success only when the planner claims it and
both a fresh verify_state and the simulator's truth confirm the task's goal.  A handful of
seeds here (the benchmark's seeds start at ``tidy.SEED_BASE``, which no test uses)."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest

from solarian_agent.arm.kinematics import ArmModel
from solarian_agent.benchmarks import tidy
from solarian_agent.perception import scene
from solarian_agent.sim.render import Renderer
from solarian_agent.sim.strategies import TidyTools
from solarian_agent.sim.world import World

MISS = [{"kind": "grasp_fail"}]


@pytest.fixture(scope="module")
def missed_grasp() -> dict[str, dict[str, Any]]:
    """The three strategies on one layout whose first grasp misses."""
    return {s: tidy.product_episode(11, s, None, forced=MISS)
            for s in ("open_loop", "step_verified", "predictive")}


def test_step_verified_recovers_a_missed_grasp_through_the_product(
        missed_grasp: dict[str, dict[str, Any]]) -> None:
    r = missed_grasp["step_verified"]
    assert r["faults"]["grasp_fail"] == 1
    assert r["claimed"] and r["verified"] and r["truth"] and r["success"]
    assert r["recoveries"] == 1
    assert r["calls"]["pick_object"] == 3  # two objects, the missed one redone
    assert r["calls"]["place_at"] == 2
    assert r["calls"]["verify_state"] >= 4  # after every pick and place, and at the end
    assert r["turns"] > 0 and r["sim_s"] > 0 and r["wall_s"] > 0


def test_open_loop_claims_what_the_fresh_check_and_the_truth_refuse(
        missed_grasp: dict[str, dict[str, Any]]) -> None:
    r = missed_grasp["open_loop"]
    assert r["claimed"] and r["status"] == "succeeded"
    assert not r["verified"] and not r["truth"] and not r["success"]
    assert "verify_state" not in r["calls"] and r["recoveries"] == 0


def test_predictive_uses_fewer_tool_calls_than_step_verified_at_equal_success(
        missed_grasp: dict[str, dict[str, Any]]) -> None:
    pred, step = missed_grasp["predictive"], missed_grasp["step_verified"]
    assert pred["success"] and step["success"]
    assert pred["recoveries"] == step["recoveries"] == 1
    assert pred["calls"]["verify_state"] < step["calls"]["verify_state"]
    assert pred["tool_calls"] < step["tool_calls"]


def test_a_pick_the_monitor_finished_is_held_and_placed_next() -> None:
    # the pick's finish rule ends it ("finished by the monitor") and home_holding follows;
    # the planner reads that as a held object and places it (before: it re-picked the held
    # cup until the turn budget, 78 picks and one place)
    r = tidy.product_episode(12, "predictive", None)
    assert [how for how, _ in r["picks"]] == ["monitor finish", "monitor finish"]
    assert r["success"], r["summary"]
    assert r["calls"]["pick_object"] == 2 and r["calls"]["place_at"] == 2
    assert r["calls"]["home_holding"] == 2 and r["calls"]["verify_state"] == 1


def test_a_claim_is_not_counted_when_the_fresh_check_disagrees(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from solarian_agent import task_check

    real = task_check.final_check

    def blind_check(system: Any, timeout_s: float = 5.0) -> dict[str, Any]:
        check = real(system, timeout_s)
        check["report"] = {**check["report"], "red_cup": {"location": "table"}}
        return check

    monkeypatch.setattr(task_check, "final_check", blind_check)
    r = tidy.product_episode(13, "predictive", None)  # no faults: the table is tidy
    assert r["claimed"] and r["truth"]
    assert not r["verified"] and not r["success"]
    rows = {row["name"]: row for row in tidy.strategy_rows("x", [r], None)}
    assert rows["x: success"]["value"] == 0.0
    assert "verify_state and truth disagree: 13" in rows["x: success"]["note"]
    assert "claimed but not confirmed: 13" in rows["x: success"]["note"]


def test_an_object_not_found_is_reported_and_the_rest_is_done() -> None:
    away = [{"kind": "move_object", "object": "yellow_paper", "x": 0.6, "y": 0.6}]
    r = tidy.product_episode(12, "step_verified", None, forced=away)
    assert r["status"] == "failed" and not r["success"]
    assert "red cup on the tray" in r["summary"]
    assert "could not put the yellow paper in the bin" in r["summary"]
    assert r["calls"]["pick_object"] == 1  # the cup; nothing was tried on what is not seen


def test_strategy_rows_name_every_measure_and_list_disagreements() -> None:
    def run(seed: int, success: bool, verified: bool, truth: bool, calls: int) -> dict[str, Any]:
        return {"seed": seed, "success": success, "claimed": True, "verified": verified,
                "truth": truth, "turns": 6, "tool_calls": calls,
                "calls": {"pick_object": 2, "verify_state": calls - 2}, "recoveries": 1,
                "faults": {"grasp_fail": 1}, "wall_s": 2.0, "sim_s": 10.0}

    runs = [run(1, True, True, True, 8), run(2, False, True, False, 6),
            run(3, False, False, True, 4)]
    rows = tidy.strategy_rows("step-verified", runs, 100.0)
    names = [r["name"] for r in rows]
    assert names == [f"step-verified: {m}" for m in (
        "success", "planner turns per episode", "tool calls per episode",
        "recoveries per episode", "wall seconds per episode")]
    assert rows[0]["value"] == pytest.approx(33.3)
    assert "1/3 seeds" in rows[0]["note"]
    assert "claimed but not confirmed: 2, 3" in rows[0]["note"]
    assert "verify_state and truth disagree: 2, 3" in rows[0]["note"]
    assert rows[0]["baseline"].startswith("ideal 100.0 %")
    assert rows[2]["value"] == 6.0 and "verify_state 4.0" in rows[2]["note"]


def test_progress_line_counts_and_names_the_failures() -> None:
    out = io.StringIO()
    prog = tidy.Progress("step-verified", 3, out)
    prog.step(True, "step_verified 1")
    prog.step(False, "step_verified 2")
    prog.step(True, "step_verified 3")
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("tidy bench: step-verified 2/3 episodes, 1 confirmed")
    assert "not confirmed: step_verified 2" in lines[0]
    assert lines[-1].startswith("tidy bench: step-verified 3/3 episodes, 2 confirmed")


def test_ideal_controller_is_only_the_labelled_upper_bound(arm: ArmModel) -> None:
    runs = tidy.ideal_runs([1, 2], arm)
    row = tidy.ideal_row(runs)
    assert row["name"].startswith("ideal controller (reference, reads the truth)")
    assert "upper bound" in row["baseline"] and "reads the truth" in row["baseline"]
    assert all(r["success"] for r in runs)


def test_tidy_benchmark_quick_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tidy, "QUICK", {"seeds": 1, "shift_seeds": 1, "harness_seeds": 1})
    monkeypatch.setattr(tidy, "REGIMES", {"default": {}, "noise": {"noise": True}})
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    rows = tidy.run(quick=True)
    for r in rows:
        assert {"name", "value", "unit", "baseline", "note"} <= set(r)
    names = [r["name"] for r in rows]
    assert len(names) == len(set(names))
    assert names[0].startswith("ideal controller")
    for _, label in tidy.STRATEGIES:
        for m in ("success", "planner turns per episode", "tool calls per episode",
                  "recoveries per episode", "wall seconds per episode"):
            assert f"{label}: {m}" in names
    assert "domain shift, noise: step_verified success" in names
    assert "domain shift, noise: perception accuracy" in names
    assert "through the product" in rows[names.index(
        "domain shift, noise: step_verified success")]["note"]
    assert "tidy bench: step-verified, open-loop, predictive 3/3 episodes" in err.getvalue()


# the reference tools straight over the World (the 6-11 upper bound's look) --------------------
def test_reference_tools_see_pixels_and_hold_only_with_fingers_stopped_apart(
        arm: ArmModel, monkeypatch: pytest.MonkeyPatch) -> None:
    world = World(arm, seed=9)
    tools = TidyTools(world, Renderer(arm))
    obs = tools.observe_scene()
    for name, obj in world.objects.items():
        x, y = obs.positions[name]
        assert np.hypot(x - obj.x, y - obj.y) < 0.015
    # the wrist camera sees the cup under open fingers: not held
    monkeypatch.setattr(scene, "held_in_wrist", lambda img, cfg=None: ("red_cup", 0.6))
    assert tools.verify_state().held is None
    monkeypatch.setattr(scene, "detect", lambda img, config=None: {})
    blind = tools.observe_scene()
    assert blind.positions == {} and not tools.pick("red_cup").ok


def test_a_check_and_the_image_disagreeing_cannot_loop_to_the_turn_budget() -> None:
    """Under the 'all' domain shift of seed 80000 the fresh check read the paper in the bin
    as on the tray while the images after each failed pick read it in the bin: the plan step
    went done and pending again and again (never retries_per_step in a row) until all 80
    turns were spent.  The planner now gives the object up after its picks failed 6 times in
    the run, and says so.  (Seed 80006: since the jaw closes gently and sweeps an object into
    the grip, seed 80000's paper picks succeed; on this one they keep failing.)"""
    from solarian_agent.models.rules_planner import MAX_FAILURES_PER_OBJECT
    from solarian_agent.sim.render import VisualStyle

    style = VisualStyle.randomized(80_006, **tidy.REGIMES["all"])
    r = tidy.product_episode(80_006, "step_verified", tidy.FAULTS, style=style)
    assert r["status"] == "failed" and not r["success"]
    assert f"{MAX_FAILURES_PER_OBJECT} attempts to pick it failed" in r["summary"]
    assert "red cup on the tray" in r["summary"]
    assert r["turns"] < 40


def test_an_object_put_away_again_and_again_but_never_seen_there_is_given_up() -> None:
    """Seed 80000 under the 'all' shift: the paper's picks out of the bin succeed, and each
    check misreads the bin, so the paper was picked out and put back until the turn budget.
    The planner gives it up once it was put in the bin 4 times and is still not seen there."""
    from solarian_agent.models.rules_planner import MAX_PLACES_PER_OBJECT
    from solarian_agent.sim.render import VisualStyle

    style = VisualStyle.randomized(80_000, **tidy.REGIMES["all"])
    r = tidy.product_episode(80_000, "step_verified", tidy.FAULTS, style=style)
    assert r["status"] == "failed" and not r["success"]
    assert (f"I put it in the bin {MAX_PLACES_PER_OBJECT} times and still do not see it "
            "there") in r["summary"]
    assert r["calls"]["place_at"] <= MAX_PLACES_PER_OBJECT + 1  # the cup's one, the paper's
    assert r["turns"] < 40
