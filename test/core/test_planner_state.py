"""The planner's state objects (core/planner_state.py), each with one owner: the run and its
plan, the action book, the wakes, the turn slot, the refusals, the monitor notes."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import solarian_agent
from solarian_agent.core.clock import FakeClock
from solarian_agent.core.events import Event
from solarian_agent.core.messages import MonitorVerdict
from solarian_agent.core.observations import MotionTracker
from solarian_agent.core.plan import PlanQueue
from solarian_agent.core.planner_state import (
    ActionBook,
    ModelRetries,
    MonitorNotes,
    Refusals,
    RunState,
    TurnSlot,
    Wakes,
)
from solarian_agent.core.planner_tools import ActionInfo, PendingStart, Turn

CORE = Path(solarian_agent.__file__).parent / "core"
PLAN_WRITERS = {"replace", "claim", "start", "action_ended", "follow_up"}


def two_steps() -> RunState:
    run = RunState()
    run.replace_plan([{"description": "pick", "tool": "pick", "args": {"at": 1}},
                      {"description": "place", "tool": "place", "args": {"to": "tray"}}])
    return run


def test_the_run_state_moves_a_step_through_the_queue_rules():
    run = two_steps()
    run.start_step(1, "a1")
    assert [(s.status, s.action_id) for s in run.plan.steps] == [("running", "a1"),
                                                                 ("pending", None)]
    assert run.step_ended("a1", "succeeded", retries=2, by_monitor=False) is run.plan.steps[0]
    assert run.plan.steps[0].status == "done"
    step = run.claim_step("place", "a2")
    assert step is run.plan.steps[1] and step.status == "running"
    run.step_ended("a2", "failed", retries=2, by_monitor=True)
    assert step.status == "failed" and step.decide  # the planner decides, not the queue
    follow = run.follow_up("a2", "home", "a3")
    assert follow is step and step.status == "running" and step.action_id == "a3"


def test_a_new_plan_starts_the_tools_it_names_afresh():
    run = two_steps()
    run.count_outcome("pick", "failed")
    run.count_outcome("wave", "failed")
    run.count_outcome("place", "timed_out")  # a timeout is not a failure
    assert run.tool_failures == {"pick": 1, "wave": 1}
    run.replace_plan([{"description": "pick again", "tool": "pick"}])
    assert run.tool_failures == {"wave": 1}


def test_the_plan_is_read_only_to_every_part_but_the_run_state():
    """Only RunState (core/planner_state.py) calls the plan queue's writers, and no planner
    module sets a plan step's fields itself: a step's status changes by the queue's rules
    (retries, monitor failures, follow-ups) only."""
    offenders: list[str] = []
    for path in sorted(CORE.glob("planner*.py")):
        if path.name == "planner_state.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in PLAN_WRITERS and "plan" in ast.unparse(node.func.value):
                offenders.append(f"{path.name}:{node.lineno} {ast.unparse(node.func)}")
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            for t in targets:
                for el in (t.elts if isinstance(t, ast.Tuple) else [t]):
                    if isinstance(el, ast.Attribute) and el.attr in (
                            "status", "action_id", "failures", "decide") \
                            and not ast.unparse(el.value).endswith("run"):
                        offenders.append(f"{path.name}:{node.lineno} {ast.unparse(el)}")
    assert offenders == []
    assert isinstance(two_steps()._plan, PlanQueue)


def test_an_ended_action_takes_its_bookkeeping_with_it():
    book = ActionBook()
    book.add(ActionInfo("a1", "pick", {}, 0.0, SimpleNamespace(), watched=True))  # type: ignore[arg-type]
    book.followups["a1"] = ("home", "finish")
    book.woken_for_fail.add("a1")
    book.escalated |= {("a1", "held"), ("a2", "held")}
    book.notes.note(MonitorVerdict("a1", "pick", "held", "yes", 0.9), None)
    assert book.pop("a1") is not None and "a1" not in book
    assert book.settle("a1") == (("home", "finish"), True)
    assert not book.followups and not book.woken_for_fail and len(book.notes) == 0
    assert book.escalated == {("a2", "held")}
    assert book.settle("a1") == (None, False)


def test_the_book_remembers_a_bounded_number_of_ends():
    book = ActionBook()
    for i in range(ActionBook.MAX_ENDED + 5):
        book.record_end(f"a{i}", "succeeded")
    assert len(book.ended) == ActionBook.MAX_ENDED and "a0" not in book.ended


def test_a_monitor_answer_below_its_floor_replaces_the_older_note_with_nothing():
    notes = MonitorNotes()
    notes.note(MonitorVerdict("a1", "pick", "held", "yes", 0.9), floor=0.5)
    assert len(notes) == 1
    notes.note(MonitorVerdict("a1", "pick", "held", "no", 0.2), floor=0.5)
    assert len(notes) == 0
    notes.note(MonitorVerdict("op", "teleop", "held", "yes", 0.9), floor=None)
    assert notes.for_actions({"a1": object()}) == [] and len(notes) == 0


def test_a_holding_wake_holds_the_queue_and_a_new_wake_restarts_the_models_retries():
    retries = ModelRetries()
    wakes = Wakes(retries, now=0.0, heartbeat_s=None)
    retries.failures, retries.silent = 2, True
    wakes.wake("model_error")
    assert retries.failures == 2 and retries.silent and not wakes.hold
    wakes.wake("action_failed", hold=True)
    assert wakes.reasons == ["model_error", "action_failed"] and wakes.hold and wakes.due
    assert retries.failures == 0 and not retries.silent
    wakes.settle()
    assert not wakes.due and wakes.hold  # the hold lasts until the planner replies


def test_the_heartbeat_wakes_only_while_actions_run_and_nothing_else_woke():
    wakes = Wakes(ModelRetries(), now=0.0, heartbeat_s=2.0)
    wakes.heartbeat(1.0, actions_running=True)
    wakes.heartbeat(5.0, actions_running=False)
    assert not wakes.due
    wakes.heartbeat(5.0, actions_running=True)
    assert wakes.reasons == ["heartbeat"] and wakes.last_activity == 5.0
    wakes.heartbeat(9.0, actions_running=True)  # already woken: no second heartbeat
    assert wakes.reasons == ["heartbeat"]


def test_a_model_retry_waits_its_backoff_and_an_answer_ends_it():
    retries = ModelRetries()
    assert retries.answered() is None
    retries.failures, retries.retry_at = 1, 10.0
    assert retries.backing_off(9.0) and not retries.backing_off(10.0)
    assert retries.retry_at is None and retries.answered() == 1 and retries.failures == 0


def test_deferred_ends_wait_until_no_call_of_the_turn_waits_for_its_skill():
    slot = TurnSlot()
    turn = Turn(1)
    turn.pending.append(PendingStart(SimpleNamespace(id="c1"), SimpleNamespace(),  # type: ignore[arg-type]
                                     "a1", "pick", 0.0))
    slot.current = turn
    ev = Event("skills", "action", "succeeded", {}, "queue", "action_ended")
    slot.deferred.append(ev)
    assert slot.starting("a1") and not slot.starting("a2")
    assert slot.release() == [] and slot.deferred == [ev]
    turn.pending.clear()
    assert slot.release() == [ev] and slot.deferred == []


def test_dropping_the_turn_cancels_its_model_call():
    slot = TurnSlot()
    cancelled: list[bool] = []
    slot.current = Turn(1, future=SimpleNamespace(cancel=lambda: cancelled.append(True)))  # type: ignore[arg-type]
    slot.drop()
    assert slot.current is None and cancelled == [True]


def test_only_turns_whose_calls_were_all_refused_count_toward_the_budget():
    clock = FakeClock()
    refusals = Refusals(clock, MotionTracker(), limit=2)
    text = refusals.refuse("pick", "refused: stale image")
    assert text == "refused: stale image"
    assert "This very call was refused just before" in refusals.refuse("pick",
                                                                       "refused: stale image")
    assert not refusals.close_turn(started_any=False) and refusals.last_turn
    assert "1 turn before this one" in refusals.refuse("pick", "refused: other")
    assert refusals.close_turn(started_any=False)  # the budget is used up
    refusals.started()
    assert refusals.in_row == 0 and refusals.turns == 0 and refusals.last is None
    refusals.refuse("pick", "x")
    assert not refusals.close_turn(started_any=True) and refusals.turns == 0
