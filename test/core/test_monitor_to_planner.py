"""What the planner makes of monitor verdicts: a step the monitor failed stays failed until
the planner decides, controller checks are worded as reliable and monitor flags as fallible,
and an answer below its rules' floor is no finding."""

from solarian_agent.core import names
from solarian_agent.core.messages import MonitorVerdict
from solarian_agent.core.plan import PlanQueue
from solarian_agent.core.skill import Skill, Tool
from solarian_agent.models.scripted import reply
from solarian_agent.testing.harness import (
    Home,
    Spin,
    Wait,
    last_user_text,
    make_harness,
    record_events,
)
from solarian_agent.testing.harness import started as started_in

PROGRESS = {"name": "progress", "type": "choice",
            "choices": {"approaching": "a", "grasping": "g", "holding": "h", "failed": "f"},
            "when": [{"do": "escalate", "value": "failed", "threshold": 0.8,
                      "consecutive": 2}]}


class Watched(Skill):
    description = "Run until stopped, watched by a progress question (test skill)."
    ends_by_itself = False
    max_duration_s = 5.0
    resources = ()
    monitor = (PROGRESS,)


TOOLS = {"spin": Tool(Spin), "home": Tool(Home), "wait": Tool(Wait),
         "watched": Tool(Watched)}


def harness(script, **kw):
    h = make_harness(script, tools=TOOLS, **kw)
    h.skill_events = record_events(h.bus)
    h.verdicts = h.bus.publisher(names.MONITOR_VERDICTS, names.T_MONITOR_VERDICT)
    return h


def started(h, tool: str) -> list[dict]:
    return started_in(h.skill_events, tool)


def publish(h, aid, tool, question, value, p, decision="", then="", source="monitor"):
    h.verdicts.publish(MonitorVerdict(
        action_id=aid, tool=tool, question=question, value=value, probability=p,
        decision=decision, reason=f"rule {decision}" if decision else "", stamp=h.clock.now(),
        then=then, source=source, generation=h.planner.generation))


def test_a_step_the_monitor_failed_stays_failed_after_its_follow_up_until_the_planner_decides():
    h = harness([
        reply("plan", ("update_plan", {"steps": [
            {"description": "spin", "tool": "spin", "args": {}},
            {"description": "wait", "tool": "wait", "args": {"seconds": 0.2}}]}), ("spin", {})),
        reply("looking at it"),  # woken by the fail: no decision yet
        reply("again", ("spin", {})),  # woken by the follow-up's end: it decides to retry
        reply("", ("finish_task", {"summary": "stopped", "success": False})),
    ])
    h.say("spin then wait")
    assert h.run_until(lambda: h.planner.actions, 5)
    aid = next(iter(h.planner.actions))
    publish(h, aid, "spin", "progress", "failed", 0.95, "fail", then="home")
    assert h.run_until(lambda: started(h, "home"), 5)
    home_id = started(h, "home")[0]["action_id"]
    assert h.run_until(lambda: home_id not in h.planner.actions, 5)
    h.planner.tick()
    # the follow-up succeeded: the failed step is not restarted by the queue, nor is the next
    assert len(started(h, "spin")) == 1 and not started(h, "wait")
    assert h.planner.plan.steps[0].status == "failed"
    assert h.run_until(lambda: len(started(h, "spin")) == 2, 5)
    assert "Plan step 1 stays failed until you decide" in last_user_text(
        h.provider.calls[1].request)
    woke = last_user_text(h.provider.calls[2].request)
    assert "was failed by the monitor" in woke
    # the planner's own call takes the failed step again (its decision)
    step = h.planner.plan.steps[0]
    assert step.status == "running" and step.action_id == started(h, "spin")[1]["action_id"]


def test_a_monitor_failed_step_may_be_called_again_but_a_budget_failed_one_is_refused():
    q = PlanQueue()
    q.replace([{"description": "pick", "tool": "pick"}, {"description": "place",
                                                         "tool": "place"}])
    q.claim("pick", "a1")
    s = q.action_ended("a1", "failed", retries=3, by_monitor=True)
    assert s is not None and s.status == "failed" and s.failures == 1
    assert q.failed_for("pick") is None  # a call of pick is the planner's retry, not refused
    assert q.next_step(set(), {"pick", "place"}).step is None  # the queue never starts it
    assert q.claim("pick", "a2") is s and s.status == "running"
    # at the retry budget the monitor's fail is the budget's: refused until the plan changes
    q.action_ended("a2", "failed", retries=2, by_monitor=True)
    assert s.status == "failed" and q.failed_for("pick") is s
    assert q.claim("pick", "a3") is None


def test_update_plan_relisting_a_monitor_failed_step_as_pending_is_the_planners_decision():
    q = PlanQueue()
    q.replace([{"description": "pick", "tool": "pick"}])
    q.claim("pick", "a1")
    q.action_ended("a1", "failed", retries=3, by_monitor=True)
    q.replace([{"description": "pick", "tool": "pick"}])
    assert q.steps[0].status == "pending" and q.steps[0].failures == 1


def _fail_news(source: str) -> str:
    h = harness([reply("", ("spin", {})), reply("looking"), reply("looking")])
    h.say("spin")
    assert h.run_until(lambda: h.planner.actions, 5)
    aid = next(iter(h.planner.actions))
    publish(h, aid, "spin", "check_agent_action" if source == "controller" else "progress",
            "fail" if source == "controller" else "failed", 1.0, "fail", source=source)
    assert h.run_until(lambda: len(h.provider.calls) >= 2, 5)
    return last_user_text(h.provider.calls[1].request)


def test_a_controller_check_reaches_the_planner_as_reliable():
    woke = _fail_news("controller")
    assert "controller check failed action" in woke
    assert "A controller check is reliable" in woke
    assert "can be wrong" not in woke


def test_a_monitor_fail_reaches_the_planner_as_possibly_wrong():
    woke = _fail_news("monitor")
    assert "A monitor flag can be wrong: check the newest image" in woke
    assert "reliable" not in woke


def test_a_controller_escalation_is_worded_as_reliable():
    h = harness([reply("", ("spin", {})), reply("looking")])
    h.say("spin")
    assert h.run_until(lambda: h.planner.actions, 5)
    aid = next(iter(h.planner.actions))
    publish(h, aid, "spin", "check_agent_action", "escalate", 1.0, "escalate",
            source="controller")
    assert h.run_until(lambda: len(h.provider.calls) == 2, 5)
    woke = last_user_text(h.provider.calls[1].request)
    assert "The controller check flags action" in woke
    assert "A controller check is reliable" in woke and "can be wrong" not in woke


def test_an_answer_below_its_rules_floor_is_not_shown_to_the_planner():
    h = harness([reply("", ("watched", {})), reply("looking"), reply("looking")],
                config={"planner_heartbeat_s": 1.0})
    h.say("watch it")
    assert h.run_until(lambda: h.planner.actions, 5)
    aid = next(iter(h.planner.actions))
    # the cv backend's old answer while the gripper opens: below the failed rule's 0.8 floor
    publish(h, aid, "watched", "progress", "failed", 0.7)
    assert h.run_until(lambda: len(h.provider.calls) == 2, 5)
    woke = last_user_text(h.provider.calls[1].request)
    assert "progress=" not in woke and "Monitor (may be wrong" not in woke
    # a confident answer is shown; a later unsure one takes it back (it is stale now)
    publish(h, aid, "watched", "progress", "approaching", 0.9)
    assert h.run_until(lambda: len(h.provider.calls) == 3, 5)
    assert "progress=" in last_user_text(h.provider.calls[2].request)
    publish(h, aid, "watched", "progress", "holding", 0.65)
    h.planner.tick()
    assert not h.planner.book.notes
