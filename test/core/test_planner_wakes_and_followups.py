"""Planner wakes, the plan queue holding for the planner's reply, monitor ``then`` follow-ups
and per-action bookkeeping."""

import threading
import time

from solarian_agent.core import names
from solarian_agent.core.messages import MonitorVerdict, OperatorEvent
from solarian_agent.core.model_api import ImagePart
from solarian_agent.core.planner import ThreadCaller
from solarian_agent.core.skill import Skill, Tool
from solarian_agent.core.transport import QoS
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


class NeedsArg(Skill):
    description = "A skill that needs an argument, so a follow-up without one is refused."
    parameters = {"type": "object", "properties": {"x": {"type": "number"}},
                  "required": ["x"], "additionalProperties": False}
    resources = ()


TOOLS = {"spin": Tool(Spin), "home": Tool(Home), "wait": Tool(Wait),
         "needs_arg": Tool(NeedsArg)}


def started(h, tool: str) -> list[dict]:
    return started_in(h.skill_events, tool)


def harness(script, **kw):
    h = make_harness(script, tools=TOOLS, **kw)
    h.skill_events = record_events(h.bus)
    h.verdicts = h.bus.publisher(names.MONITOR_VERDICTS, names.T_MONITOR_VERDICT)
    return h


def verdict(h, aid: str, tool: str, decision: str, then: str = "") -> None:
    h.verdicts.publish(MonitorVerdict(aid, tool, "progress", "holding", 0.95, decision,
                                      f"rule {decision}", h.clock.now(), then, "monitor",
                                      h.planner.generation))


def test_heartbeat_wakes_once_per_period_not_every_tick():
    h = make_harness([reply("", ("wait", {"seconds": 10}))]
                     + [reply("still waiting") for _ in range(30)],
                     config={"planner_heartbeat_s": 2.0})
    h.say("wait")
    h.runtime.run_for(5.0)
    # the turn that started the wait, then one heartbeat at ~2 s and one at ~4 s: never one
    # per control tick, which would burn the run's turn budget in a second
    assert 2 <= len(h.provider.calls) <= 3
    assert all("[woken: heartbeat]" in last_user_text(c.request)
               for c in h.provider.calls[1:])


def test_a_timeout_is_not_counted_as_a_failure_in_a_row():
    # a policy that never ends by itself ends every run by its limit: a timeout is not a
    # failure, so the planner is never told to change approach for it
    h = make_harness([reply("", ("spin", {})), reply("", ("spin", {})),
                      reply("", ("spin", {})), reply("", ("spin", {})),
                      reply("", ("finish_task", {"summary": "ok", "success": True}))])
    h.say("spin")
    assert h.run_until(lambda: h.planner.status == "succeeded", 30)
    for call in h.provider.calls[1:]:
        woke = last_user_text(call.request)
        assert "ran its limit; judge from the newest image" in woke
        assert "failed" not in woke and "change your approach" not in woke


def test_follow_up_after_a_finish_takes_the_next_step_naming_its_tool():
    h = harness([
        reply("plan", ("update_plan", {"steps": [
            {"description": "spin", "tool": "spin", "args": {}},
            {"description": "carry it home", "tool": "home", "args": {}},
            {"description": "check"}]}), ("spin", {})),
        reply("", ("finish_task", {"summary": "ok", "success": True})),
    ])
    h.say("spin, then home")
    assert h.run_until(lambda: h.planner.actions, 5)
    aid = next(iter(h.planner.actions))
    verdict(h, aid, "spin", "finish", then="home")
    assert h.run_until(lambda: h.planner.status == "succeeded", 10)
    # home ran once, as the follow-up that took step 2; the queue did not start it again
    assert len(started(h, "home")) == 1
    assert [s.status for s in h.planner.plan.steps] == ["done", "done", "pending"]
    assert len(h.provider.calls) == 2
    assert "has no tool" in last_user_text(h.provider.calls[1].request)


def test_follow_up_after_a_finish_carries_the_step_on_when_the_plan_does_not_name_it():
    h = harness([
        reply("plan", ("update_plan", {"steps": [
            {"description": "spin and home", "tool": "spin", "args": {}},
            {"description": "check"}]}), ("spin", {})),
        reply("", ("finish_task", {"summary": "ok", "success": True})),
    ])
    h.say("spin")
    assert h.run_until(lambda: h.planner.actions, 5)
    aid = next(iter(h.planner.actions))
    verdict(h, aid, "spin", "finish", then="home")
    assert h.run_until(lambda: started(h, "home"), 2)
    step = h.planner.plan.steps[0]
    assert step.status == "running" and step.action_id == started(h, "home")[0]["action_id"]
    assert len(h.provider.calls) == 1  # not woken for the finish
    assert h.run_until(lambda: h.planner.status == "succeeded", 10)


def test_no_follow_up_for_an_action_a_stop_ended_before_the_monitor_s_finish():
    """The stop came first (the operator's "stop the pick"): the action ends stopped, and the
    monitor's finish -> home follow-up must not move the arm on after it."""
    h = harness([reply("", ("spin", {})), reply("stopped, as asked")])
    h.say("spin")
    assert h.run_until(lambda: h.planner.actions, 5)
    aid = next(iter(h.planner.actions))
    assert h.run_until(lambda: aid in h.executor.running, 2)
    h.executor.stop_all("the operator said stop")
    verdict(h, aid, "spin", "finish", then="home")
    h.planner.tick()  # the finish is accepted (its reason noted) while the stop is pending
    assert h.planner.book.followups == {aid: ("home", "finish")}
    assert h.run_until(lambda: not h.planner.actions, 2)
    h.runtime.run_for(0.5)
    assert not started(h, "home") and not h.planner.book.followups
    ended = [e.data for e in h.skill_events if e.kind == "skill_ended"
             and e.data.get("action_id") == aid]
    assert ended and ended[0]["outcome"] == "stopped"
    assert not any("finished by the monitor" in n for n in h.planner.wakes.news)


def test_follow_up_that_cannot_start_wakes_the_planner_instead_of_running_the_queue():
    h = harness([
        reply("plan", ("update_plan", {"steps": [
            {"description": "spin", "tool": "spin", "args": {}},
            {"description": "wait", "tool": "wait", "args": {"seconds": 0.2}}]}),
              ("spin", {})),
        reply("", ("finish_task", {"summary": "stopped", "success": False})),
    ])
    h.say("spin then wait")
    assert h.run_until(lambda: h.planner.actions, 5)
    aid = next(iter(h.planner.actions))
    verdict(h, aid, "spin", "finish", then="needs_arg")  # refused: no arguments
    assert h.run_until(lambda: h.planner.status != "running", 10)
    assert not started(h, "wait")  # the queue waited for the planner
    woke = last_user_text(h.provider.calls[1].request)
    assert "follow-up needs_arg could not start" in woke


def test_the_queue_waits_for_the_reply_after_a_monitor_flag():
    gate = threading.Event()
    gate.set()
    h = harness([
        reply("plan", ("update_plan", {"steps": [
            {"description": "wait 1", "tool": "wait", "args": {"seconds": 1.0}},
            {"description": "wait 2", "tool": "wait", "args": {"seconds": 0.2}}]}),
              ("wait", {"seconds": 1.0})),
        reply("", ("finish_task", {"summary": "checked", "success": True})),
    ], caller=ThreadCaller())
    h.provider.gate = gate
    h.say("wait twice")
    for _ in range(2000):
        h.runtime.step()
        if h.planner.actions and h.planner.turn is None:
            break
        time.sleep(0.001)
    aid = next(iter(h.planner.actions))
    gate.clear()  # the planner's next call stays in flight
    verdict(h, aid, "wait", "escalate")
    h.runtime.run_for(2.0)  # the flagged action succeeds meanwhile
    assert h.planner.turn is not None and aid not in h.planner.actions
    assert len(started(h, "wait")) == 1  # the queue waits for the reply
    gate.set()
    for _ in range(3000):
        h.runtime.step()
        if h.planner.status != "running":
            break
        time.sleep(0.001)
    assert h.planner.status == "succeeded"
    assert len(started(h, "wait")) == 1


def test_per_action_bookkeeping_goes_with_the_action_even_when_the_run_is_paused():
    h = harness([reply("", ("spin", {})), reply("looking")])
    h.say("spin")
    assert h.run_until(lambda: h.planner.actions, 5)
    aid = next(iter(h.planner.actions))
    verdict(h, aid, "spin", "escalate")
    assert h.run_until(lambda: len(h.provider.calls) == 2, 5)
    assert h.planner.book.escalated
    verdict(h, aid, "spin", "fail", then="home")
    h.planner.tick()  # the fail is concluded; its follow-up waits for the stop
    assert aid in h.planner.book.followups and aid in h.planner.book.woken_for_fail
    h.bus.publisher(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT).publish(
        OperatorEvent("key", {"key": "w"}))
    assert h.run_until(lambda: not h.planner.actions, 2)
    assert h.planner.status == "paused"
    assert not started(h, "home")  # the operator won: no follow-up
    assert not h.planner.book.followups and not h.planner.book.woken_for_fail
    assert not h.planner.book.escalated


def test_images_past_the_context_window_are_not_kept_in_the_conversation():
    h = make_harness([reply("", ("observe", {})) for _ in range(8)]
                     + [reply("", ("finish_task", {"summary": "ok", "success": True}))],
                     config={"max_images_in_context": 1})
    h.say("look a lot")
    assert h.run_until(lambda: h.planner.status == "succeeded", 10)
    kept = [p for m in h.planner.messages for p in m.content if isinstance(p, ImagePart)]
    # the window, plus what the last turn's reply added after its request was built
    assert len(kept) <= 2
    assert "no longer shown" in h.planner.messages[1].text()


def test_monitor_still_ends_an_action_while_the_planner_waits_for_the_user():
    h = harness([
        reply("", ("spin", {}), ("ask_user", {"question": "which bin?"})),
        reply("", ("finish_task", {"summary": "stopped", "success": False})),
    ])
    h.say("spin and ask")
    assert h.run_until(lambda: h.planner.actions and h.planner.status == "waiting_user", 5)
    aid = next(iter(h.planner.actions))
    verdict(h, aid, "spin", "fail")  # e.g. the stall tripwire: the arm is pushing on nothing
    h.runtime.run_for(0.5)
    assert aid not in h.executor.running  # stopped now, not at its 3 s limit
    assert h.planner.status == "waiting_user" and len(h.provider.calls) == 1
    h.say("the white one")
    assert h.run_until(lambda: h.planner.status == "failed", 5)
    woke = last_user_text(h.provider.calls[1].request)
    assert "The monitor failed action" in woke and "the white one" in woke


def test_a_failing_episode_log_never_escapes_the_planner_tick(tmp_path):
    h = make_harness([reply("", ("wait", {"seconds": 1})),
                      reply("", ("finish_task", {"summary": "ok", "success": True}))],
                     log_root=tmp_path)
    seen: list = []
    h.bus.subscribe(names.AGENT_EVENTS, names.T_AGENT_EVENT, callback=seen.append,
                    qos=QoS(depth=500))
    h.say("wait")
    assert h.run_until(lambda: h.planner.actions, 5)

    def disk_full(*_a, **_k):
        raise OSError(28, "No space left on device")

    h.planner.log.event = disk_full  # type: ignore[method-assign]
    h.planner.tick()  # must not raise, even though its own error handler logs too
    assert h.run_until(lambda: h.planner.status == "succeeded", 5)
    assert h.planner.journal.errors > 0
    assert any(e.kind == "harness_error" and "episode log" in e.data["error"] for e in seen)
    assert any(e.kind == "run_ended" for e in seen)  # the events still reach the bus


def test_a_task_waits_for_every_camera_to_deliver_its_first_frame():
    """A ROS graph still coming up: the task arrives before a camera's first frame.  The first
    turn waits for it (bounded) instead of letting the model observe nothing, and refusal
    after refusal, burn the turn budget."""
    from solarian_agent.core.messages import Image
    from solarian_agent.core.transport import SENSOR_DATA

    h = make_harness([reply("", ("wait", {"seconds": 0.1}))] + [reply("done")] * 5,
                     config={"cameras": ["cam", "late"]})
    late = h.bus.publisher(names.image_topic("late"), names.T_IMAGE, SENSOR_DATA)
    h.say("wait a moment")
    h.runtime.run_for(1.5)
    assert h.provider.calls == []  # still waiting for the late camera
    late.publish(Image(h.robot.frame().data, h.clock.now(), "late", 1))
    h.runtime.run_for(0.5)
    assert len(h.provider.calls) >= 1


def test_a_camera_that_never_delivers_delays_the_first_turn_only_boundedly():
    h = make_harness([reply("", ("wait", {"seconds": 0.1}))] + [reply("done")] * 5,
                     config={"cameras": ["cam", "dead"]})
    h.say("wait a moment")
    h.runtime.run_for(4.5)
    assert h.provider.calls == []
    h.runtime.run_for(1.0)
    assert len(h.provider.calls) >= 1
