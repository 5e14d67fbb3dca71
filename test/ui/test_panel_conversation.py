"""What the panel's page shows beside the planner's own state: the status is never a bare
"unknown" (``connecting`` until the first state), the routing and bookkeeping events are
marked internal (the page hides them unless asked), a tool call the harness refused and a
message the planner has not yet seen are in the conversation."""

from __future__ import annotations

from pathlib import Path

from test_panel import FakeLink

import solarian_agent
from solarian_agent.core.clock import FakeClock
from solarian_agent.core.messages import AgentEvent, AgentState
from solarian_agent.ui.event_lines import describe_event
from solarian_agent.ui.link import INTERNAL_KINDS, is_internal
from solarian_agent.ui.panel import PanelHub
from solarian_agent.ui.panel_conversation import ConversationView

T = "2026-01-01T00:00:00.000Z"


def _hub() -> tuple[PanelHub, FakeLink]:
    link = FakeLink()
    hub = PanelHub(link, FakeClock())  # type: ignore[arg-type]
    return hub, link


def _state(status: str, conv: tuple[dict, ...] = ()) -> AgentState:
    return AgentState(1, status, "tidy", (), (), conv)


def test_status_is_connecting_until_the_first_state_never_unknown():
    hub, link = _hub()
    assert hub.state["status"] == "connecting"
    hub._process([("event", AgentEvent(T, "run_started", {"task": "x"}))])
    assert hub.state["status"] == "connecting"
    link.emit("state", _state("idle"))
    hub._process(hub.intake.drain())
    assert hub.state["status"] == "idle"
    assert '"idle"' in hub.snapshot_messages(None)[0]
    # the page itself has no "unknown" status to fall back on (it starts at "connecting")
    js = (Path(solarian_agent.__file__).parent / "data" / "panel" / "panel.js").read_text()
    assert "unknown" not in js.lower().replace("unknown command", "")


def test_routing_events_are_marked_internal_and_the_rest_not():
    hub, _ = _hub()
    hub._process([("event", AgentEvent(T, "route", {"event": "x", "to": "planner"})),
                  ("event", AgentEvent(T, "generation_advanced", {"generation": 2})),
                  ("event", AgentEvent(T, "run_started", {"task": "tidy"})),
                  ("event", AgentEvent(T, "action_refused", {"tool": "pick_object",
                                                             "reason": "e-stop is latched"}))])
    marks = [(e["kind"], e["internal"]) for e in hub.events]
    assert marks == [("route", True), ("generation_advanced", True), ("run_started", False),
                     ("action_refused", False)]
    assert is_internal("route") and not is_internal("plan_changed")
    assert "run_started" not in INTERNAL_KINDS and "tool_refused" not in INTERNAL_KINDS


def test_a_refused_tool_call_is_in_the_conversation_where_it_happened():
    hub, link = _hub()
    link.emit("state", _state("running", ({"role": "user", "text": "tidy"},
                                          {"role": "agent", "text": "picking the cup"})))
    hub._process(hub.intake.drain())
    data = {"tool": "pick_object", "reason": "the e-stop is latched"}
    hub._process([("event", AgentEvent(T, "tool_refused", data))])
    link.emit("state", _state("running", ({"role": "user", "text": "tidy"},
                                          {"role": "agent", "text": "picking the cup"},
                                          {"role": "agent", "text": "I will wait"})))
    hub._process(hub.intake.drain())
    conv = hub.state["conversation"]
    assert [m.get("role") for m in conv] == ["user", "agent", "system", "agent"]
    assert conv[2]["note"] == "refused" and conv[2]["text"] == describe_event("tool_refused",
                                                                              data)
    assert "e-stop is latched" in conv[2]["text"]


def test_why_the_planner_is_silent_is_in_the_conversation_and_not_internal():
    hub, link = _hub()
    link.emit("state", _state("running", ({"role": "user", "text": "tidy"},)))
    hub._process(hub.intake.drain())
    retry = {"attempt": 2, "attempts": 3, "error": "server: HTTP 503", "retry_in_s": 0.8}
    silent = {"failures": 3, "error": "server: HTTP 503",
              "reason": "the planner model failed 3 times in a row; it is called again when "
                        "the next event wakes it"}
    hub._process([("event", AgentEvent(T, "planner_model_retry", retry)),
                  ("event", AgentEvent(T, "planner_silent", silent))])
    conv = hub.state["conversation"]
    assert [(m.get("role"), m.get("note")) for m in conv[1:]] == [("system", "planner")] * 2
    assert conv[1]["text"] == ("planner model failed (server: HTTP 503); call 2 of 3 in 0.8 s")
    assert conv[2]["text"].startswith("planner silent: the planner model failed 3 times")
    assert not is_internal("planner_silent") and not is_internal("planner_model_retry")


def test_a_message_not_yet_seen_is_pending_until_the_planner_has_it():
    hub, link = _hub()
    link.emit("state", _state("idle"))
    hub._process(hub.intake.drain())
    hub.message_sent("put the cup on the tray")
    conv = hub.state["conversation"]
    assert conv == [{"role": "user", "text": "put the cup on the tray", "pending": True}]
    link.emit("state", _state("running", ({"role": "user", "text": "put the cup on the tray"},)))
    hub._process(hub.intake.drain())
    assert hub.state["conversation"] == [{"role": "user", "text": "put the cup on the tray"}]


def test_a_message_the_planner_listed_before_it_was_accepted_is_not_left_pending():
    # the planner's state (a topic) can overtake the agent's acceptance (a service reply)
    now = [0.0]
    view = ConversationView(lambda: now[0], claim_for_s=30.0)
    view.on_state([{"role": "user", "text": "tidy up"}])
    view.sent("tidy up")
    assert view.entries() == [{"role": "user", "text": "tidy up"}]
    # a second sending of the same words is a new message: pending until listed again
    view.sent("tidy up")
    assert [m.get("pending") for m in view.entries()] == [None, True]
    # a listing long before the acceptance does not count as this message's
    view2 = ConversationView(lambda: now[0], claim_for_s=30.0)
    view2.on_state([{"role": "user", "text": "again"}])
    now[0] = 31.0
    view2.expire()
    view2.sent("again")
    assert [m.get("pending") for m in view2.entries()] == [None, True]


def test_a_pending_message_expires_and_a_reset_clears_the_timeline():
    now = [0.0]
    view = ConversationView(lambda: now[0], pending_for_s=10.0)
    view.on_state([{"role": "user", "text": "a"}])
    view.sent("b")
    assert [m.get("pending") for m in view.entries()] == [None, True]
    now[0] = 11.0
    assert view.expire() and [m["text"] for m in view.entries()] == ["a"]
    view.on_state([{"role": "user", "text": "fresh"}])  # no overlap: the planner was reset
    assert [m["text"] for m in view.entries()] == ["fresh"]
    assert view.on_event("conversation_reset", {}) and view.entries() == []


def test_no_message_stays_pending_after_its_run_ended():
    """The same exchange again after a reset whose event has not come yet: the diff of the
    two lists sees nothing new, so the message stayed pending (for 120 s) after its run had
    succeeded.  Once the run has ended, its task or a user entry of its list is seen."""
    now = [0.0]
    view = ConversationView(lambda: now[0], claim_for_s=30.0)
    first = [{"role": "user", "text": "tidy"}, {"role": "agent", "text": "done"}]
    view.on_state(first, "succeeded", "tidy")
    now[0] = 60.0
    view.expire()
    # /reset, then the same words again: the new run's list is the same as the old one
    view.sent("tidy")
    view.on_state(first, "running", "tidy")
    assert [m.get("pending") for m in view.entries()] == [None, None, True]
    view.on_state(first, "succeeded", "tidy")
    assert not [m for m in view.entries() if m.get("pending")]
    # a message sent after the run ended, not yet taken in, is still pending
    view.sent("now the bin")
    view.on_state(first, "succeeded", "tidy")
    assert [m["text"] for m in view.entries() if m.get("pending")] == ["now the bin"]


def test_the_hub_gives_the_view_the_runs_status_and_task():
    hub, link = _hub()
    seen = []
    hub.conversation.on_state = lambda conv, status="", task="": seen.append((status, task))
    link.emit("state", _state("succeeded"))
    hub._process(hub.intake.drain())
    assert seen == [("succeeded", "tidy")]
