"""The planner harness on the toy robot (solarian_agent.testing.harness), driven by a
scripted model and a fake clock."""

import json
import threading

from solarian_agent.core.episode_log import read_events
from solarian_agent.core.model_api import ModelError, ModelRequest
from solarian_agent.models.scripted import reply
from solarian_agent.testing.harness import PointAt, last_user_text, make_harness, record_events


def last_result(req: ModelRequest) -> str:
    return [m for m in req.messages if m.role == "tool"][-1].text()


def test_skill_tool_ends_turn_when_started_and_result_says_started():
    h = make_harness([reply("go", ("wait", {"seconds": 2})),
                      reply("", ("finish_task", {"summary": "done", "success": True}))])
    h.say("wait a bit")
    assert h.run_until(lambda: h.planner.actions, 5)
    # the turn ended with the start: no second call while the skill runs
    h.runtime.run_for(1.0)
    assert len(h.provider.calls) == 1
    assert h.run_until(lambda: h.planner.status == "succeeded", 10)
    second = h.provider.calls[1].request
    assert "started action a" in last_result(second)
    assert "succeeded" in last_user_text(second)


def test_refused_call_is_answered_at_once_and_model_called_again():
    h = make_harness([
        reply("", ("wait", {"seconds": "long"})),
        reply("", ("no_such_tool", {})),
        reply("", ("finish_task", {"summary": "gave up", "success": False})),
    ])
    h.say("wait")
    assert h.run_until(lambda: h.planner.status == "failed", 5)
    r1 = last_result(h.provider.calls[1].request)
    assert r1.startswith("refused") and "seconds" in r1 and "number" in r1
    r2 = last_result(h.provider.calls[2].request)
    assert 'unknown tool "no_such_tool"' in r2 and "wait" in r2
    # no clock time had to pass between the refusal and the retry
    assert h.planner.turns == 3


def test_observe_is_answered_at_once_with_fresh_ids():
    h = make_harness([reply("", ("observe", {})),
                      reply("", ("finish_task", {"summary": "saw", "success": True}))])
    h.say("look")
    assert h.run_until(lambda: h.planner.status == "succeeded", 5)
    req = h.provider.calls[1].request
    tool_msg = [m for m in req.messages if m.role == "tool"][-1]
    images = [p for p in tool_msg.content if hasattr(p, "observation_id")]
    assert images and images[0].observation_id.startswith("obs-")
    first_ids = {p.observation_id for m in h.provider.calls[0].request.messages
                 for p in m.content if hasattr(p, "observation_id")}
    assert images[0].observation_id not in first_ids


def test_bound_params_and_undescribed_skills_never_reach_the_model(caplog):
    h = make_harness([reply("", ("finish_task", {"summary": "x", "success": True}))])
    h.say("hi")
    h.run_until(lambda: h.planner.status == "succeeded", 5)
    req = h.provider.calls[0].request
    names = {t.name for t in req.tools}
    assert "hidden" not in names and {"wait", "point_at", "update_plan"} <= names
    blob = json.dumps([t.__dict__ for t in req.tools])
    assert "secret_binding" not in blob and "policy.yaml" not in blob
    point = next(t for t in req.tools if t.name == "point_at")
    assert "observation_id" in point.parameters["required"]


def test_plan_queue_advances_without_planner_and_wakes_for_point_and_check():
    h = make_harness([
        reply("plan", ("update_plan", {"steps": [
            {"description": "move", "tool": "move_joint", "args": {"to": 0.5}},
            {"description": "wait", "tool": "wait", "args": {"seconds": 0.2}},
            {"description": "touch the red square", "tool": "point_at"},
            {"description": "check"}]}), ("move_joint", {"to": 0.5})),
        lambda req: reply("", ("point_at", {"point": [200, 150], "observation_id":
                                            _newest_obs(req)})),
        reply("", ("finish_task", {"summary": "ok", "success": True})),
    ], log_root=None)
    h.say("do it")
    assert h.run_until(lambda: h.planner.status == "succeeded", 20)
    assert h.planner.turns == 3
    woke = last_user_text(h.provider.calls[1].request)
    assert "needs a point in a fresh image" in woke
    assert "[done] wait" in woke
    assert "has no tool" in last_user_text(h.provider.calls[2].request)
    assert [s.status for s in h.planner.plan.steps] == ["done", "done", "done", "pending"]


def _newest_obs(req: ModelRequest) -> str:
    ids = [p.observation_id for m in req.messages for p in m.content
           if getattr(p, "observation_id", "")]
    return ids[-1]


def test_points_map_back_to_capture_pixels_with_aspect_ratio():
    PointAt.seen_points.clear()
    h = make_harness([
        lambda req: reply("", ("point_at", {"point": [100, 75],
                                            "observation_id": _newest_obs(req)})),
        reply("", ("finish_task", {"summary": "ok", "success": True})),
    ], max_image_side=320)
    h.say("touch")
    assert h.run_until(lambda: h.planner.status == "succeeded", 10)
    img = [p for p in h.provider.calls[0].request.messages[-1].content
           if hasattr(p, "width")][0]
    assert (img.width, img.height) == (320, 240)
    (x, y), = PointAt.seen_points
    assert abs(x - 200.5) < 1e-6 and abs(y - 150.5) < 1e-6


def test_point_on_image_taken_before_robot_moved_is_refused():
    PointAt.seen_points.clear()
    seen = {}

    def first(req):
        seen["obs"] = _newest_obs(req)
        return reply("", ("move_joint", {"to": 1.0}))

    h = make_harness([
        first,
        lambda req: reply("", ("point_at", {"point": [10, 10], "observation_id": seen["obs"]})),
        reply("", ("finish_task", {"summary": "x", "success": False})),
    ])
    h.say("move then touch")
    assert h.run_until(lambda: h.planner.status == "failed", 20)
    res = last_result(h.provider.calls[2].request)
    assert "taken before the robot last moved" in res
    assert PointAt.seen_points == []


def test_point_too_old_or_outside_image_is_refused():
    h = make_harness([
        lambda req: reply("", ("point_at", {"point": [5000, 10],
                                            "observation_id": _newest_obs(req)})),
        reply("", ("wait", {"seconds": 1.0})),
        lambda req: reply("", ("point_at", {"point": [10, 10], "observation_id": "obs-1"})),
        reply("", ("finish_task", {"summary": "x", "success": False})),
    ], config={"max_point_age_s": 0.5})
    h.say("touch")
    assert h.run_until(lambda: h.planner.status == "failed", 20)
    assert "outside obs-" in last_result(h.provider.calls[1].request)
    assert "max_point_age_s" in last_result(h.provider.calls[3].request)


def test_old_images_become_text_stubs():
    script = [reply("", ("observe", {})) for _ in range(4)]
    script.append(reply("", ("finish_task", {"summary": "x", "success": True})))
    h = make_harness(script, config={"max_images_in_context": 2})
    h.say("look a lot")
    assert h.run_until(lambda: h.planner.status == "succeeded", 5)
    req = h.provider.calls[-1].request
    images = [p for m in req.messages for p in m.content if hasattr(p, "observation_id")
              and hasattr(p, "data")]
    stubs = [p.text for m in req.messages for p in m.content
             if hasattr(p, "text") and "no longer shown" in p.text]
    assert len(images) == 2 and len(stubs) == 3


def test_timeout_at_deadline_and_worded_as_seed_says():
    h = make_harness([reply("", ("spin", {})),
                      reply("", ("finish_task", {"summary": "x", "success": True}))])
    events = record_events(h.bus, depth=50)
    h.say("spin")
    assert h.run_until(lambda: h.planner.actions, 2)
    assert h.run_until(lambda: not h.planner.actions, 10)
    ended = next(e for e in events if e.kind == "skill_ended")
    assert ended.data["outcome"] == "timed_out"
    # stopped at the deadline, not at some later period
    assert 3.0 <= ended.data["duration_s"] <= 3.0 + h.runtime.period_s + 1e-9
    woke = last_user_text(h.provider.calls[1].request)
    assert "ran its limit; judge from the newest image whether it succeeded" in woke
    assert "failed" not in woke


def test_failure_wakes_planner_and_repeated_failures_say_change_approach():
    h = make_harness(
        [reply("", ("boom", {})) for _ in range(3)]
        + [reply("", ("finish_task", {"summary": "x", "success": False}))],
        config={"budgets": {"retries_per_step": 3}})
    h.say("explode")
    assert h.run_until(lambda: h.planner.status == "failed", 10)
    w1 = last_user_text(h.provider.calls[1].request)
    assert 'failed: ⟦skill: "skill boom raised RuntimeError: kaboom"⟧' in w1
    assert "change your approach" not in w1
    assert "change your approach" in last_user_text(h.provider.calls[3].request)


def test_operator_takeover_pauses_refuses_stale_reply_and_resumes_with_news():
    gate = threading.Event()
    from solarian_agent.core.planner import ThreadCaller
    h = make_harness([reply("", ("move_joint", {"to": 3.0})),
                      lambda req: (gate.wait(5), reply("", ("wait", {"seconds": 1})))[1],
                      reply("", ("finish_task", {"summary": "ok", "success": True}))],
                     caller=ThreadCaller())
    h.say("move far")
    assert h.run_until(lambda: h.planner.actions, 5)
    # operator takes over while the arm moves
    from solarian_agent.core import names
    from solarian_agent.core.messages import OperatorEvent
    pub = h.bus.publisher(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT)
    pub.publish(OperatorEvent("key", {"key": "j"}))
    assert h.run_until(lambda: h.planner.status == "paused", 1)
    assert h.run_until(lambda: not h.executor.running, 1)
    # 2: claimed by the planner's first run (a new planner refuses its predecessor's goals);
    # 3: the takeover
    assert h.planner.generation == h.executor.generation == 3
    # resume: the planner is told what the operator did
    h.say("carry on")
    assert h.run_until(lambda: len(h.provider.calls) == 2, 5)
    # while the model thinks, the operator takes over again; its reply must be discarded
    pub.publish(OperatorEvent("click", {"button": "stop"}))
    assert h.run_until(lambda: h.planner.status == "paused", 1)
    gate.set()
    h.runtime.run_for(0.5)
    import time
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and h.planner.turn is not None:
        h.runtime.step()
    assert not h.executor.running and not h.planner.actions
    woke = last_user_text(h.provider.calls[1].request)
    assert "operator" in woke and "key" in woke
    h.say("now finish")
    assert h.run_until(lambda: h.planner.status == "succeeded", 5)


def test_cancel_and_reset_end_the_run_and_call_on_agent_idle():
    h = make_harness([reply("", ("wait", {"seconds": 30}))])
    h.say("wait long")
    assert h.run_until(lambda: h.planner.actions, 2)
    h.say("/cancel")
    assert h.run_until(lambda: h.planner.status == "cancelled", 1)
    assert h.run_until(lambda: not h.executor.running, 1)
    assert len(h.idle_calls) == 1
    assert h.planner.messages  # cancel keeps the conversation
    h.planner.reset()
    h.runtime.step()
    assert h.planner.messages == [] and h.planner.conversation == []


def test_model_error_goes_back_to_planner_and_run_continues():
    h = make_harness([ModelError("rate_limited", "slow down"),
                      reply("", ("finish_task", {"summary": "ok", "success": True}))])
    h.say("hi")
    assert h.run_until(lambda: h.planner.status == "succeeded", 5)
    assert "previous call failed (rate_limited)" in last_user_text(h.provider.calls[1].request)


def test_max_turns_budget_and_dry_run():
    h = make_harness([reply("", ("observe", {})) for _ in range(10)],
                     config={"budgets": {"max_turns": 3}})
    h.say("loop")
    assert h.run_until(lambda: h.planner.status == "budget_exhausted", 5)
    assert len(h.provider.calls) == 3

    d = make_harness([reply("", ("wait", {"seconds": 1})),
                      reply("", ("finish_task", {"summary": "dry", "success": True}))],
                     config={"dry_run": True})
    d.say("wait")
    assert d.run_until(lambda: d.planner.status == "succeeded", 5)
    assert d.executor.ticks > 0 and not d.executor.running
    assert "dry run" in last_result(d.provider.calls[1].request)


def test_heartbeat_wakes_while_actions_run():
    h = make_harness([reply("", ("wait", {"seconds": 10})),
                      reply("", ("stop_action", {"action_id": "a999"})),
                      reply("", ("finish_task", {"summary": "x", "success": True}))],
                     config={"planner_heartbeat_s": 2.0})
    h.say("wait")
    assert h.run_until(lambda: len(h.provider.calls) == 2, 5)
    assert "[woken: heartbeat]" in last_user_text(h.provider.calls[1].request)


def test_episode_log_layout(tmp_path):
    h = make_harness([reply("plan", ("wait", {"seconds": 0.1})),
                      reply("", ("finish_task", {"summary": "ok", "success": True}))],
                     log_root=tmp_path)
    h.say("wait")
    assert h.run_until(lambda: h.planner.status == "succeeded", 5)
    logs = tmp_path / "0001_test" / "episodes" / "000001" / "logs"
    events = read_events(logs / "events.jsonl")
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "episode_started" and events[0]["task"] == "wait"
    events = events[1:]
    kinds = kinds[1:]
    assert kinds[0] == "run_started" and kinds[-1] == "run_ended"
    assert all("t" in e and e["t"].endswith("Z") for e in events)
    assert {"planner_turn", "skill_started", "skill_ended", "action_started"} <= set(kinds)
    started = next(e for e in events if e["kind"] == "skill_started")
    assert started["by"] == "agent"
    turn_ev = next(e for e in events if e["kind"] == "planner_turn")
    turn = json.loads((logs / turn_ev["turn"]).read_text())
    assert turn_ev["turn"] == "turns/0001.json"
    assert turn["output"]["tool_calls"][0]["name"] == "wait"
    img = [c for m in turn["input"]["messages"] for c in m["content"] if c["type"] == "image"]
    assert img and (logs / img[0]["file"]).exists()
    run_started = events[0]
    assert run_started["run_id"] == "0001_test/000001" and run_started["task"] == "wait"
    assert "tools" in run_started and "system_prompt" in run_started
    assert events[-1]["status"] == "succeeded" and "usage" in events[-1]


def test_run_continued_in_next_episode(tmp_path):
    h = make_harness([reply("", ("wait", {"seconds": 1.0})),
                      reply("", ("finish_task", {"summary": "ok", "success": True}))],
                     log_root=tmp_path)
    h.say("wait")
    assert h.run_until(lambda: h.planner.actions, 5)
    first = h.planner.log
    h.planner.continue_in(h.recorder.open_episode())
    assert h.run_until(lambda: h.planner.status == "succeeded", 10)
    logs2 = tmp_path / "0001_test" / "episodes" / "000002" / "logs"
    events = read_events(logs2 / "events.jsonl")
    assert events[0]["kind"] == "episode_started"
    events = events[1:]  # the run's first write there
    assert events[0]["kind"] == "run_continued"
    assert events[0]["continues_from"] == first.run_id
    assert events[0]["plan"] == [] and events[0]["status"] == "running"
    turn = json.loads((logs2 / "turns" / "0001.json").read_text())
    assert turn["input"]["messages_from"] > 0  # only the messages since the previous turn
    for m in turn["input"]["messages"]:
        for c in m["content"]:
            if c["type"] == "image":
                assert (logs2 / c["file"]).exists()
