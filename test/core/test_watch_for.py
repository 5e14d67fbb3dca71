"""The planner's check of ``watch_for``: it is popped off the arguments before the goal is
sent, so the executor never sees it; a bad one is refused before any goal is sent, one at
its limits reaches the goal (and never the skill's own parameters)."""

from __future__ import annotations

from typing import Any

import pytest

from solarian_agent.core import names
from solarian_agent.core.model_api import ModelRequest
from solarian_agent.core.transport import QoS
from solarian_agent.models.scripted import reply
from solarian_agent.testing.harness import make_harness


def _tool_results(req: ModelRequest) -> list[str]:
    return [m.text() for m in req.messages if m.role == "tool"]


@pytest.mark.parametrize("watch_for, what", [
    (["arm hits table", "cube falls", "gripper opens", "cube slides"], "too long"),
    (["ab"], "is too short"),
    (["x" * 301], "does not satisfy maxLength"),
    ("cube falls", "is not of type 'array'"),
])
def test_a_bad_watch_for_is_refused_before_a_goal_is_sent(watch_for: Any, what: str) -> None:
    """``watch_for`` is popped off the arguments before the goal is sent, so the executor never
    sees it: the planner's own check is the only one."""
    h = make_harness([reply("", ("wait", {"seconds": 0.1, "watch_for": watch_for})),
                      reply("", ("finish_task", {"summary": "gave up", "success": False}))])
    starts: list[Any] = []
    h.bus.subscribe(names.SKILL_EVENTS, names.T_AGENT_EVENT,
                    callback=lambda e: starts.append(e) if e.kind == "skill_started" else None,
                    qos=QoS(depth=100))
    h.say("wait, watching")
    assert h.run_until(lambda: h.planner.status == "failed", 10)
    said = _tool_results(h.provider.calls[1].request)[-1]
    assert said.startswith("refused: invalid arguments for wait at watch_for")
    assert what in said
    assert starts == [] and h.executor.running == {}


def test_watch_for_at_its_limits_is_accepted_and_reaches_the_goal() -> None:
    conditions = ["abc", "y" * 300, "the cube falls off"]
    h = make_harness([reply("", ("wait", {"seconds": 0.1, "watch_for": conditions})),
                      reply("", ("finish_task", {"summary": "ok", "success": True}))])
    starts: list[Any] = []
    h.bus.subscribe(names.SKILL_EVENTS, names.T_AGENT_EVENT,
                    callback=lambda e: starts.append(e.data) if e.kind == "skill_started"
                    else None, qos=QoS(depth=100))
    h.say("wait, watching")
    assert h.run_until(lambda: h.planner.status == "succeeded", 10)
    assert len(starts) == 1
    assert starts[0]["watch_for"] == conditions
    assert "watch_for" not in starts[0]["params"]  # the skill itself never gets it
