"""approve: skills -- every skill goal of the agent waits for the operator's yes: approved (it
runs; who approved it is on the record), refused (with the operator's reason), timed out (a
refusal), an operator's own goal never waits; the answer from the terminal chat's link; and the
setting validated on load."""

from __future__ import annotations

import dataclasses

import pytest

from solarian_agent.core import names
from solarian_agent.core.config import load_agent_config
from solarian_agent.core.errors import ConfigError
from solarian_agent.core.messages import SkillGoal
from solarian_agent.core.transport import GoalStatus
from solarian_agent.system import build_sim_system, load_config
from solarian_agent.testing.harness import record_events
from solarian_agent.ui.link import BusLink


@pytest.fixture
def sim():
    cfg = dataclasses.replace(load_config(), approve="skills", approve_timeout_s=2.0)
    s = build_sim_system(config=cfg, seed=3, with_monitor=False)
    s.events = record_events(s.bus, depth=1000)
    s.runtime.run_for(0.2)
    yield s
    s.shutdown()


def _goal(s, action_id, pose="ready"):
    return s.bus.send_goal("skills/move_to_pose", SkillGoal(
        "move_to_pose", {"pose": pose}, s.executor.generation, action_id))


def _approvals(s):
    return [e.data for e in s.events if e.kind == "skill_approval"]


def test_a_skill_waits_for_the_operators_yes_and_the_record_names_who(sim):
    h = _goal(sim, "a1")
    sim.runtime.run_for(1.0)
    assert not h.done and not any(e.kind == "skill_started" for e in sim.events)
    assert sim.executor.approvals.waiting()[0]["action_id"] == "a1"
    assert _approvals(sim)[0]["decision"] == "waiting"
    r = sim.bus.call(names.SKILL_APPROVE, {"text": "approve", "by": "operator (panel)"})
    assert r["ok"], r
    assert sim.run_until(lambda: h.done, 30.0)
    assert h.status == GoalStatus.SUCCEEDED
    approved = [a for a in _approvals(sim) if a["decision"] == "approved"]
    assert approved == [{"action_id": "a1", "skill": "move_to_pose", "decision": "approved",
                         "by": "operator (panel)", "reason": ""}]


def test_refused_by_the_operator_from_the_chat_link(sim):
    h = _goal(sim, "a2")
    sim.runtime.run_for(0.3)
    link = BusLink(sim.bus)
    r = link.approve("refuse a2 the cup is not there", "operator (chat)")
    assert r["ok"], r
    sim.runtime.run_for(0.1)
    assert h.done and h.result.outcome == "refused"
    assert "the operator (operator (chat)) did not approve move_to_pose: the cup is not " \
           "there" in h.result.reason
    assert not any(e.kind == "skill_started" for e in sim.events)
    assert link.approve("approve")["reason"] == "no skill is waiting for approval"
    link.close()


def test_unanswered_it_times_out_into_a_refusal(sim):
    h = _goal(sim, "a3")
    sim.runtime.run_for(1.9)
    assert not h.done
    sim.runtime.run_for(0.2)
    assert h.done and h.result.outcome == "refused"
    assert "not approved within 2 s" in h.result.reason
    assert [a["decision"] for a in _approvals(sim)] == ["waiting", "timed_out"]
    assert sim.executor.approvals.waiting() == []


def test_the_operators_own_goal_needs_no_approval(sim):
    h = _goal(sim, "op1")
    assert sim.run_until(lambda: h.done, 30.0)
    assert h.status == GoalStatus.SUCCEEDED and _approvals(sim) == []


def test_a_cancelled_waiting_goal_is_forgotten(sim):
    h = _goal(sim, "a4")
    sim.runtime.run_for(0.2)
    h.cancel()
    sim.runtime.run_for(0.1)
    assert sim.executor.approvals.waiting() == []


def test_the_setting_is_validated_on_load():
    with pytest.raises(ConfigError) as e:
        load_agent_config({"agent": {"approve": "everything"}})
    assert e.value.path == "agent.approve"
    assert load_agent_config({"agent": {"approve": "skills"}}).approve == "skills"


def test_without_the_setting_nothing_waits():
    s = build_sim_system(seed=3, with_monitor=False)
    try:
        h = _goal(s, "a5")
        assert s.run_until(lambda: h.done, 30.0) and h.status == GoalStatus.SUCCEEDED
        assert not s.bus.call(names.SKILL_APPROVE, {"text": "approve"})["ok"]
    finally:
        s.shutdown()
