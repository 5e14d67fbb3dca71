"""Counts (not timings) from the harness benchmark scenarios, held as tests."""

from solarian_agent.benchmarks.harness import (
    ticks_from_action_end_to_next_step,
    ticks_to_stop_on_monitor_finish,
    ticks_to_stop_on_takeover,
    turns_per_pick_and_place,
)


def test_plan_queue_pick_and_place_takes_at_most_four_turns():
    with_queue = turns_per_pick_and_place(True)[0]
    without = turns_per_pick_and_place(False)[0]
    assert with_queue <= 4 < without


def test_operator_takeover_stops_skill_within_one_tick():
    assert ticks_to_stop_on_takeover() == 1


def test_monitor_decision_and_plan_step_each_within_one_tick():
    assert ticks_to_stop_on_monitor_finish() == 1
    assert ticks_from_action_end_to_next_step() == 1
