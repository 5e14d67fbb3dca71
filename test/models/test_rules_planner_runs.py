"""The rules planner plans the current run's task: the conversation keeps the earlier runs'
tasks (until a reset), so "hello" then a real task must not be answered as "hello"."""

from solarian_agent.core.model_api import Message, ModelRequest
from solarian_agent.core.text import OPERATOR, TASK_PREFIX, quote
from solarian_agent.models.rules_planner import RulesPlanner


def _task(text: str) -> Message:
    return Message.user(TASK_PREFIX + quote(OPERATOR, text))


def test_the_newest_task_is_planned_not_an_earlier_runs():
    planner = RulesPlanner()
    first = planner.complete(ModelRequest("s", (_task("hello there"),)), timeout_s=1)
    assert [c.name for c in first.tool_calls] == ["ask_user"]
    req = ModelRequest("s", (_task("hello there"), Message.user("run cancelled"),
                             _task("put the red cup on the tray")))
    second = planner.complete(req, timeout_s=1)
    assert [c.name for c in second.tool_calls] != ["ask_user"], second
    assert second.tool_calls[0].name == "observe"  # no image yet: it looks first


def test_rules_planner_answers_a_side_question_without_tools():
    from solarian_agent.core.model_api import Message, ModelRequest
    from solarian_agent.core.routing import PARALLEL_SYSTEM
    from solarian_agent.models.rules_planner import RulesPlanner

    req = ModelRequest(PARALLEL_SYSTEM, (Message.user(
        "Now: 2026-12-02T07:00:00Z (UTC)\nMain task: ⟦operator: \"tidy up\"⟧\n"
        "Running: a4 pick_object (1.2 s)\n\nQuestion: ⟦operator: \"what time is it?\"⟧"),),
        (), 200)
    out = RulesPlanner().complete(req, timeout_s=1.0)
    assert out.tool_calls == ()
    assert "2026-12-02T07:00:00Z" in out.text and "a4 pick_object" in out.text


def test_the_rules_planner_reads_the_jaw_as_the_pick_skill_does():
    """The planner's held / open / let-go openings are the skill's own (written out in the
    planner, which imports nothing of the arm)."""
    from solarian_agent.arm.grasp import HELD_MIN_OPENING, held_max_opening, pick_opening
    from solarian_agent.models.rules_state import CLOSED_JAWS_MM, OPEN_JAWS_MM, RELEASE_MM

    assert round(HELD_MIN_OPENING * 1000, 1) == CLOSED_JAWS_MM
    assert round(held_max_opening() * 1000, 1) == OPEN_JAWS_MM
    assert int(pick_opening() * 1000) == RELEASE_MM
