"""The monitor's model calls and flags: a tick waits for the previous call, a failing or late
model answers nothing, watch_for from 6 s, check_agent_action tripwires, what is logged, and a
finish rule with ``then`` driving a planner run on the toy harness."""

import json

from monitor_helpers import PROGRESS, FakeBackend, ManualCaller, Rig, choice, config, model_error

from solarian_agent.core.clock import FakeClock
from solarian_agent.core.config import MonitorConfig
from solarian_agent.core.episode_log import EpisodeLog, read_events
from solarian_agent.core.monitor import MonitorEngine
from solarian_agent.core.planner import InlineCaller, ThreadCaller
from solarian_agent.core.skill import Skill, Tool
from solarian_agent.models.scripted import reply
from solarian_agent.perception.vision import ModelVisionBackend
from solarian_agent.testing.harness import DEFAULT_TOOLS, make_harness

Q = [{**PROGRESS, "when": [{"do": "finish", "value": "holding", "threshold": 0.8}]}]


def test_a_tick_waits_for_the_previous_call():
    caller = ManualCaller()
    rig = Rig(Q, caller=caller)
    rig.backend.default = {"progress": choice("approaching", 0.9)}
    rig.start()
    rig.tick()  # kept
    rig.tick()  # sent
    assert caller.submitted == 1
    for _ in range(3):  # three periods pass while the call is in flight
        rig.tick()
    assert caller.submitted == 1 and len(rig.events("monitor_skip")) == 3
    assert rig.engine.skipped == 3
    caller.run_all()
    rig.engine.tick()  # the answer is handled on the tick thread
    assert [v.value for v in rig.verdicts()] == ["approaching"]
    rig.tick()
    assert caller.submitted == 2
    # the next call compares the frame it was sent last with a new one
    caller.run_all()
    rig.engine.tick()
    assert rig.backend.requests[-1].images[0].stamp == rig.backend.requests[0].images[1].stamp


def test_tick_does_not_wait_on_a_threaded_model():
    import threading

    gate = threading.Event()

    class Slow(FakeBackend):
        def answer_tick(self, request, *, timeout_s):
            gate.wait(5)
            return super().answer_tick(request, timeout_s=timeout_s)

    rig = Rig(Q, backend=Slow(default={"progress": choice("holding", 0.9)}),
              caller=ThreadCaller())
    rig.start()
    rig.tick()
    rig.tick()  # submits and returns at once although the model is blocked
    assert rig.engine.calls == 1 and rig.verdicts() == []
    gate.set()
    rig.engine.tick_calls.in_flight("a1").future.result(5)
    rig.engine.tick()
    assert [v.decision for v in rig.verdicts()] == ["finish"]
    rig.engine.shutdown()


def test_a_failing_model_answers_nothing():
    rig = Rig(Q)
    rig.backend.script = [model_error("server"), {"progress": choice("holding", 0.9)}]
    rig.start()
    rig.tick()
    rig.tick()
    assert rig.verdicts() == []
    (ev,) = rig.events("monitor_tick")
    assert ev["error"]["kind"] == "server" and ev["answers"] == {} and ev["verdicts"] == []
    rig.tick()  # the next tick asks again
    assert [v.decision for v in rig.verdicts()] == ["finish"]


def test_a_malformed_reply_is_never_replaced_by_a_made_up_answer():
    from solarian_agent.models.scripted import ScriptedProvider

    prov = ScriptedProvider([reply("I think it is holding"),
                             reply('{"progress": {"value": "dancing", "probability": 0.9, '
                                   '"reason": ""}}')])
    rig = Rig(Q, backend=ModelVisionBackend(prov), caller=InlineCaller())
    rig.start()
    rig.tick()
    rig.tick()
    rig.tick()
    assert rig.verdicts() == []
    t1, t2 = rig.events("monitor_tick")
    assert t1["error"]["kind"] == "malformed"
    assert t2["error"] is None and t2["answers"] == {} and "dancing" in t2["problems"][0]


def test_a_call_past_its_timeout_answers_nothing_and_frees_the_slot():
    caller = ManualCaller()
    rig = Rig(Q, caller=caller, config=config(timeout_s=3.0))
    rig.backend.default = {"progress": choice("holding", 0.95)}
    rig.start()
    rig.tick()
    rig.tick()  # sent at t
    rig.tick()
    rig.tick()  # t + 3.0: still waiting
    assert caller.submitted == 1
    rig.tick()  # t + 4.5 > 3 s + 1 s grace: abandoned, and a fresh call goes out
    (ev,) = rig.events("monitor_tick")
    assert ev["error"]["kind"] == "timeout"
    assert caller.submitted == 2
    caller.run_all()  # the late answer arrives too: discarded, logged, no verdict from it
    rig.engine.tick()
    vs = rig.verdicts()
    assert [v.decision for v in vs] == ["finish"]  # only the fresh call's
    assert any(e.get("discarded") for e in rig.events("monitor_tick"))


def test_answers_after_the_action_ended_are_discarded():
    caller = ManualCaller()
    rig = Rig(Q, caller=caller)
    rig.backend.default = {"progress": choice("holding", 0.95)}
    rig.start()
    rig.tick()
    rig.tick()
    rig.end()
    caller.run_all()
    rig.tick()
    assert rig.verdicts() == []
    assert rig.events("monitor_tick")[-1]["discarded"]


def test_no_exception_escapes_a_tick():
    def boom(*a):
        raise RuntimeError("tracker crashed")

    rig = Rig(Q, config=config(mark_target=True), target_box=boom,
              check_agent_action=boom)
    rig.backend.script = [RuntimeError("backend bug")]
    rig.start()
    rig.tick()
    rig.tick()
    errors = [e["error"] for e in rig.events("monitor_error")]
    assert any("check_agent_action raised RuntimeError" in e for e in errors)
    assert any("target_box raised" in e for e in errors)
    assert rig.events("monitor_tick")[-1]["error"]["message"] == "backend bug"


def test_watch_for_is_asked_from_6_s_and_escalates():
    rig = Rig(Q)
    seen = []

    def answer(req):
        seen.append((req.elapsed_s, [q.name for q in req.questions]))
        return {"progress": choice("approaching", 0.9), "watch_for_1": 0.95}

    rig.backend.default = answer
    rig.start(watch_for=["the cup tips over"])
    for _ in range(6):  # ticks at 1.5 (kept), 3, 4.5, 6, 7.5, 9 s
        rig.tick()
    assert seen[0] == (3.0, ["progress"]) and seen[1] == (4.5, ["progress"])
    assert seen[2] == (6.0, ["progress", "watch_for_1"])
    q = rig.backend.requests[-1].questions[1]
    assert q.type == "predicate" and "the cup tips over" in q.instructions
    esc = [v for v in rig.engine.recent if v["kind"] == "monitor_tick"]
    flags = [vv for e in esc for vv in e["verdicts"] if vv["decision"]]
    # like a failure rule: after_s 6, two confident ticks in a row, escalate once
    assert [(f["question"], f["decision"]) for f in flags] == [("watch_for_1", "escalate")]
    assert "the cup tips over" in flags[0]["reason"]
    assert esc[3]["elapsed_s"] == 7.5 and esc[3]["verdicts"][1]["decision"] == "escalate"


def test_watch_for_alone_asks_nothing_before_6_s():
    rig = Rig([])
    rig.backend.default = {"watch_for_1": 0.1}
    rig.start(watch_for=["the gripper opens"])
    rig.tick()
    rig.tick()
    rig.tick()
    assert rig.backend.requests == []
    rig.tick()  # 6 s
    assert [q.name for q in rig.backend.requests[0].questions] == ["watch_for_1"]


def test_tripwires_are_polled_with_the_monitor_and_trusted_as_controller_checks():
    calls = []

    def check(action_id, tool, elapsed_s):
        calls.append((action_id, tool, elapsed_s))
        if elapsed_s >= 4.5:
            return ("fail", "arm stalled for 5 s", "home_holding")
        if elapsed_s >= 3.0:
            return ("escalate", "gripper current high")
        return None

    rig = Rig(Q, backend=None, check_agent_action=check)  # no monitor model at all
    rig.start("a7", generation=3)
    for _ in range(4):
        rig.tick()
    assert calls[:3] == [("a7", "grip", 1.5), ("a7", "grip", 3.0), ("a7", "grip", 4.5)]
    vs = rig.verdicts()
    assert [(v.decision, v.source, v.then, v.question, v.generation) for v in vs] == [
        ("escalate", "controller", "", "check_agent_action", 3),
        ("fail", "controller", "home_holding", "check_agent_action", 3)]
    assert len(calls) == 3  # a concluded action is no longer polled


def test_tripwire_escalates_once_and_bad_results_are_reported():
    results = iter([("escalate", "x"), ("escalate", "y"), ("stop", "z"),
                    ("finish", "done", "no_such_tool")])
    rig = Rig([], backend=None, check_agent_action=lambda *a: next(results))
    rig.start()
    for _ in range(4):
        rig.tick()
    vs = rig.verdicts()
    assert [(v.decision, v.then) for v in vs] == [("escalate", ""), ("finish", "")]
    errors = " ".join(e["error"] for e in rig.events("monitor_error"))
    assert "('stop', 'z')" in errors and "no_such_tool" in errors


def test_operator_actions_are_not_watched_by_default():
    rig = Rig(Q)
    rig.start("op1", by="operator")
    rig.tick()
    rig.tick()
    assert rig.backend.requests == [] and not rig.engine.actions


def test_ticks_are_logged_for_replay(tmp_path):
    clock = FakeClock()
    log = EpisodeLog(tmp_path, clock)
    rig = Rig(Q, log=lambda: log)
    rig.backend.script = [{"progress": choice("holding", 0.9)}]
    rig.start()
    rig.tick()
    rig.tick()
    log.close()
    evs = read_events(tmp_path / "events.jsonl")
    frame, tick = [e for e in evs if e["kind"].startswith("monitor_")]
    assert frame["kind"] == "monitor_frame"
    assert tick["kind"] == "monitor_tick" and tick["questions"] == ["progress"]
    assert tick["answers"]["progress"]["value"] == "holding"
    assert tick["latency_s"] == 0.25 and tick["usage"]["input_tokens"] == 0
    assert tick["model"] == "fake-vision"
    assert tick["verdicts"][0]["decision"] == "finish"
    assert [i["label"] for i in tick["images"]] == ["previous", "current"]
    for i in tick["images"]:  # unmarked frames saved, named by the events
        assert (tmp_path / i["file"]).exists()
    assert tick["images"][0]["file"] == frame["images"][0]["file"]
    assert json.dumps(tick)  # plain JSON


def test_the_eval_loader_reads_ticks_back_from_an_episode_log(tmp_path):
    from solarian_agent.tick_sets import load_ticks

    log = EpisodeLog(tmp_path / "ep", FakeClock())
    rig = Rig(Q, log=log)
    rig.backend.default = {"progress": choice("approaching", 0.6)}
    rig.start()
    for _ in range(4):
        rig.tick()
    log.close()
    ts = load_ticks(tmp_path)
    assert [t.tick for t in ts.ticks] == [2, 3, 4]
    assert ts.ticks[0].pick == "ep/a1" and ts.ticks[0].questions == ["progress"]
    assert all(t.image_path(i).exists() for t in ts.ticks for i in t.images)


# -- the planner acting on monitor verdicts ----------------------------------------------------

class Grip(Skill):
    description = "Close the gripper until the monitor says it holds (test skill)."
    ends_by_itself = False
    max_duration_s = 20.0
    monitor = ({**PROGRESS, "when": [{"do": "finish", "value": "holding", "threshold": 0.8,
                                      "then": "carry"}]},)


class Carry(Skill):
    description = "Carry the held thing home (test skill)."

    def start(self) -> None:
        self.end = self.ctx.clock.now() + 1.0

    def tick(self) -> None:
        if self.ctx.clock.now() >= self.end:
            self.finish(reason="carried")


def test_finish_rule_with_then_drives_a_planner_run():
    tools = {**DEFAULT_TOOLS, "grip": Tool(Grip), "carry": Tool(Carry)}
    h = make_harness([
        reply("", ("update_plan", {"steps": [{"description": "grip it", "tool": "grip",
                                              "args": {}},
                                             {"description": "carry it", "tool": "carry",
                                              "args": {}}]}),
              ("grip", {})),
        reply("", ("finish_task", {"summary": "carried", "success": True})),
    ], tools=tools)
    answers = iter([choice("approaching", 0.9), choice("grasping", 0.9),
                    choice("holding", 0.9)])
    backend = FakeBackend(default=lambda req: {"progress": next(answers)})
    eng = MonitorEngine(h.bus, h.clock, MonitorConfig(period_s=1.0, history=2,
                                                      reference=False),
                        backend, cameras=["cam"])
    eng.start()
    h.runtime.add("monitor", lambda dt: eng.tick())
    h.say("grip the thing and carry it")
    assert h.run_until(lambda: h.planner.status == "succeeded", 20)
    kinds = [(e["kind"], e.get("tool")) for e in eng.recent]
    assert ("monitor_frame", "grip") in kinds
    # two planner turns: plan + start, then the check after the follow-up ended; the monitor's
    # finish and the follow-up did not wake it
    assert len(h.provider.calls) == 2
    wake = [m for m in h.provider.calls[1].request.messages if m.role == "user"][-1].text()
    assert "finished by the monitor" in wake and "carry started as its follow-up" in wake
    assert "carry" in wake and "succeeded" in wake
    step_states = [s.status for s in h.planner.plan.steps]
    assert step_states[0] == "done"
