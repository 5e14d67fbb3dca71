"""The rules planner plans the current run's task: the conversation keeps the earlier runs'
tasks (until a reset), so "hello" then a real task must not be answered as "hello"."""

from solarian_agent.core.text import OPERATOR, TASK_PREFIX, quote
from solarian_agent.models.base import Message, ModelRequest
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
