"""One bad input does not stop the monitor's other work: a malformed skill event does not
drop the events queued with it, and one action whose tick fails does not stop the others'."""

from __future__ import annotations

from monitor_helpers import PROGRESS, Rig, choice

from solarian_agent.core.messages import AgentEvent

Q = [{**PROGRESS, "when": [{"do": "finish", "value": "holding", "threshold": 0.8}]}]


def test_a_malformed_skill_event_does_not_drop_the_events_queued_with_it():
    rig = Rig(Q)
    rig.backend.default = {"progress": choice("approaching", 0.9)}
    rig._events.publish(AgentEvent(rig.clock.wall(), "skill_started", {
        "by": "agent", "skill": "grip", "action_id": "bad", "generation": "x"}))
    rig.start("a2")
    rig.tick()
    assert list(rig.engine.actions) == ["a2"]
    assert rig.events("monitor_error")
    rig.end("a2")
    rig.tick()
    assert rig.engine.actions == {}


def test_one_failing_action_does_not_stop_the_others_ticks():
    calls = {"n": 0}

    def readings(js):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("readings broke once")
        return {}

    rig = Rig(Q, readings=readings)
    rig.backend.default = {"progress": choice("approaching", 0.9)}
    rig.start("a1")
    rig.start("a2")
    rig.tick()  # both keep their first frame
    rig.tick()  # a1's call fails while it is built; a2 is still asked
    assert [r.action_id for r in rig.backend.requests] == ["a2"]
    assert any("readings broke once" in e["error"] for e in rig.events("monitor_error"))
    rig.tick()
    assert [r.action_id for r in rig.backend.requests][-2:] == ["a1", "a2"]
