"""Refused calls and failed steps, as the harness enforces them: a failure the
planner got as a refused tool result is not delivered again as news; a refusal loop ends in a
clear failure long before the turn budget, and a call refused for a stale image waits for still
frames; ``retries_per_step`` fails a plan step and refuses its retries until the plan changes."""

from __future__ import annotations

from solarian_agent.core import names
from solarian_agent.core.errors import SkillFailed
from solarian_agent.core.model_api import ModelRequest
from solarian_agent.core.skill import Skill, Tool
from solarian_agent.models.scripted import reply
from solarian_agent.testing.harness import DEFAULT_TOOLS, make_harness, record_events


class FailAtStart(Skill):
    description = "Fails as it starts (test skill)."
    resources = ()

    def start(self) -> None:
        raise SkillFailed("nothing is held: pick the object first")


def _texts(req: ModelRequest) -> str:
    return "\n".join(m.text() for m in req.messages)


def _user(req: ModelRequest) -> str:
    return [m for m in req.messages if m.role == "user"][-1].text()


def _tool_results(req: ModelRequest) -> list[str]:
    return [m.text() for m in req.messages if m.role == "tool"]


def test_a_failure_answered_as_a_refusal_is_not_delivered_again_as_news() -> None:
    tools = {**DEFAULT_TOOLS, "fail_start": Tool(FailAtStart)}
    h = make_harness([reply("", ("fail_start", {})),
                      reply("", ("wait", {"seconds": 0.5})),
                      reply("", ("finish_task", {"summary": "done", "success": True}))],
                     tools=tools)
    h.say("go")
    assert h.run_until(lambda: h.planner.status == "succeeded", 10)
    second = h.provider.calls[1].request
    said = _tool_results(second)[-1]
    assert said.startswith("refused: ") and "nothing is held" in said
    third = h.provider.calls[2].request
    # the wait's end is the news; the start failure is not told a second time
    assert "(wait) succeeded" in _user(third)
    assert _texts(third).count("nothing is held") == 1


def test_a_refusal_loop_ends_the_run_long_before_the_turn_budget() -> None:
    bad = reply("", ("point_at", {"point": [10, 10], "observation_id": "obs-999"}))
    h = make_harness([bad] * 40, config={"budgets": {"max_turns": 80,
                                                     "max_refused_in_row": 5}})
    h.say("point")
    assert h.run_until(lambda: h.planner.status == "failed", 30)
    assert h.planner.turns == 5
    assert "refused 5 times in a row" in h.planner.summary
    assert "unknown observation_id" in h.planner.summary
    last = _tool_results(h.provider.calls[-1].request)[-1]
    assert "This very call was refused just before" in last
    assert "3 turns before this one with only refused calls" in last
    assert "the run fails at 5" in last


def test_one_reply_of_many_refused_calls_counts_as_one_refused_turn() -> None:
    bad = ("point_at", {"point": [10, 10], "observation_id": "obs-999"})
    h = make_harness([reply("", *[bad] * 6),
                      reply("", ("finish_task", {"summary": "gave up", "success": False}))],
                     config={"budgets": {"max_refused_in_row": 3}})
    h.say("point")
    assert h.run_until(lambda: h.planner.status == "failed", 20)
    assert h.planner.summary == "gave up"


def test_an_action_starting_resets_the_refusal_count() -> None:
    bad = reply("", ("point_at", {"point": [10, 10], "observation_id": "obs-999"}))
    script = [bad, bad, reply("", ("wait", {"seconds": 0.1})), bad, bad,
              reply("", ("finish_task", {"summary": "ok", "success": True}))]
    h = make_harness(script, config={"budgets": {"max_refused_in_row": 3}})
    h.say("go")
    assert h.run_until(lambda: h.planner.status == "succeeded", 20), h.planner.summary


def test_a_stale_point_while_the_robot_moves_waits_for_still_frames() -> None:
    called_at: list[float] = []

    def point_newest(req: ModelRequest) -> object:
        called_at.append(h.clock.now())
        ids = [p.observation_id for m in req.messages for p in m.content
               if getattr(p, "observation_id", "")]
        return reply("", ("point_at", {"point": [400, 300], "observation_id": ids[-1]}))

    h = make_harness([point_newest] * 3
                     + [reply("", ("finish_task", {"summary": "x", "success": False}))])
    h.robot.target = 3.0  # someone moves the arm: 3 s at 1 unit/s
    h.say("point at it")
    assert h.run_until(lambda: len(h.provider.calls) >= 2, 10)
    first = _tool_results(h.provider.calls[1].request)[-1]
    assert "taken before the robot last moved" in first
    assert "The robot is still moving" in first
    # the next call waited for still frames (at most the harness's fresh-frame wait of 0.5 s)
    # instead of coming at the next control tick (0.02 s)
    assert called_at[1] - called_at[0] >= 0.45
    assert h.run_until(lambda: h.planner.status != "running", 20)


def test_retries_per_step_fails_the_step_and_refuses_its_retry_until_the_plan_changes(
) -> None:
    plan = {"steps": [{"description": "explode", "tool": "boom"}, {"description": "check"}]}
    h = make_harness(
        [reply("", ("update_plan", plan), ("boom", {})),
         reply("", ("boom", {})), reply("", ("boom", {})),
         # the step is failed: the same call is refused, and so is a rewrite that keeps it
         reply("", ("boom", {})),
         reply("", ("update_plan", plan), ("boom", {})),
         # a changed plan: another approach, the failed step skipped
         reply("", ("update_plan", {"steps": [
             {"description": "explode", "tool": "boom", "status": "skipped"},
             {"description": "explode another way", "tool": "boom"}]}), ("boom", {})),
         reply("", ("finish_task", {"summary": "gave up", "success": False}))],
        config={"budgets": {"retries_per_step": 3}})
    h.say("explode")
    assert h.run_until(lambda: h.planner.status == "failed", 20)
    calls = [c.request for c in h.provider.calls]
    woke = _user(calls[3])
    assert "has now failed 3 times in a row" in woke and "Change the plan" in woke
    assert "[failed] explode" in woke
    refused = _tool_results(calls[4])[-1]
    assert refused.startswith(
        'refused: plan step 1 (\u27e6planner: "explode"\u27e7) failed 3 times')
    refused_again = _tool_results(calls[5])[-1]
    assert "failed 3 times" in refused_again
    assert "[failed] explode" in _tool_results(calls[5])[-2]  # the rewrite kept it failed
    # the changed plan's step ran (and failed once: a fresh count)
    assert "explode another way" in _user(calls[6]) and "failed 1 times" not in _user(calls[6])
    assert "(boom) failed" in _user(calls[6])
    assert h.planner.plan.steps[1].failures == 1


def test_the_plan_queue_never_starts_a_failed_step() -> None:
    from solarian_agent.core.plan import PlanQueue

    q = PlanQueue()
    q.replace([{"description": "a", "tool": "wait", "args": {"seconds": 1}},
               {"description": "b", "tool": "wait", "args": {"seconds": 1}}])
    for i in range(2):
        assert q.claim("wait", f"act-{i}") is q.steps[0]
        q.action_ended(f"act-{i}", "failed", retries=2)
    assert q.steps[0].status == "failed"
    nxt = q.next_step(set(), {"wait"})
    assert nxt.step is None and "failed 2 times in a row" in nxt.wake_reason
    # timeouts and stops are not failures
    q.replace([{"description": "c", "tool": "wait", "args": {"seconds": 1}}])
    for i, outcome in enumerate(("timed_out", "stopped", "timed_out")):
        q.claim("wait", f"t-{i}")
        q.action_ended(f"t-{i}", outcome, retries=2)
    assert q.steps[0].status == "pending" and q.steps[0].failures == 0


# --------------------------------------------------------------------------------------------
# a failing planner model: a few calls per wake, backing off, and the operator told
# --------------------------------------------------------------------------------------------
def _failing_harness(n_errors: int = 200, **kw):
    import random

    from solarian_agent.core import names
    from solarian_agent.core.model_api import ModelError
    from solarian_agent.core.transport import QoS

    h = make_harness([ModelError("server", "HTTP 503: overloaded") for _ in range(n_errors)],
                     rng=random.Random(7), **kw)
    h.events = []
    h.bus.subscribe(names.AGENT_EVENTS, names.T_AGENT_EVENT, callback=h.events.append,
                    qos=QoS(depth=10_000))
    h.call_times = []
    inner = h.provider.complete

    def timed(request, *, timeout_s):
        h.call_times.append(h.clock.now())
        return inner(request, timeout_s=timeout_s)

    h.provider.complete = timed
    return h


def test_a_failing_planner_model_is_retried_with_backoff_then_silent_and_says_why():
    import random

    from solarian_agent.core.planner_turns import backoff_delay
    from solarian_agent.ui.event_lines import describe_event

    h = _failing_harness()
    h.say("tidy up")
    h.runtime.run_for(120.0)
    # before: called again every control tick, 80 calls in 1.6 s, then budget_exhausted
    assert len(h.call_times) == 3  # one call and budgets.model_retries_per_wake = 2 retries
    assert h.planner.status == "running" and h.planner.turn is None
    gaps = [b - a for a, b in zip(h.call_times, h.call_times[1:], strict=False)]
    rng = random.Random(7)  # the same jitter as the planner's injected RNG
    want = [backoff_delay(i, rng) for i in range(2)]
    period = h.runtime.period_s
    for got, w in zip(gaps, want, strict=True):
        assert w <= got <= w + 2 * period + 1e-9
    assert 0.5 <= want[0] <= 1.0 and 1.0 <= want[1] <= 2.0  # exponential, jittered
    retries = [e.data for e in h.events if e.kind == "planner_model_retry"]
    assert [r["attempt"] for r in retries] == [2, 3]
    silent = [e.data for e in h.events if e.kind == "planner_silent"]
    assert len(silent) == 1 and "HTTP 503" in silent[0]["error"]
    line = describe_event("planner_silent", silent[0])
    assert line.startswith("planner silent: the planner model failed 3 times in a row")
    assert "HTTP 503" in line
    # the next event wakes it: a few calls again, the failure note delivered once
    h.say("are you there?")
    h.runtime.run_for(120.0)
    assert len(h.call_times) == 6
    woke = _user(h.provider.calls[3].request)
    assert woke.count("Your previous call failed (server)") == 1


def test_the_planner_answers_again_after_a_failure_and_the_operator_sees_it():
    import random

    from solarian_agent.core.model_api import ModelError

    h = make_harness([ModelError("server", "HTTP 503"),
                      reply("", ("finish_task", {"summary": "ok", "success": True}))],
                     rng=random.Random(1))
    events = record_events(h.bus, names.AGENT_EVENTS, depth=1000)
    h.say("hi")
    h.runtime.run_for(0.3)
    assert len(h.provider.calls) == 1  # the retry waits for its backoff (>= 0.5 s)
    assert h.run_until(lambda: h.planner.status == "succeeded", 3)
    kinds = [e.kind for e in events]
    assert "planner_model_retry" in kinds and "planner_model_ok" in kinds
    assert "planner_silent" not in kinds


def test_a_backoff_ends_with_the_run():
    h = _failing_harness(n_errors=1)
    from solarian_agent.models.scripted import reply as r

    h.provider.add(r("", ("finish_task", {"summary": "ok", "success": True})))
    h.say("tidy up")
    h.runtime.run_for(0.1)
    assert len(h.call_times) == 1 and h.planner.cycle.retries.retry_at is not None
    h.say("/cancel")
    h.runtime.run_for(0.1)
    assert h.planner.status == "cancelled" and h.planner.cycle.retries.retry_at is None
    t0 = h.clock.now()
    h.say("again")
    assert h.run_until(lambda: h.planner.status == "succeeded", 2)
    assert h.call_times[-1] - t0 <= 2 * h.runtime.period_s + 1e-9  # no stale backoff
