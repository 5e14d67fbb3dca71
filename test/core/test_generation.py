"""Generation ids: no decision made before a cancel, reset or takeover is ever executed after
it, under any interleaving (hypothesis drives random schedules)."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from solarian_agent.core import names
from solarian_agent.core.clock import FakeClock
from solarian_agent.core.executor import SkillExecutor
from solarian_agent.core.messages import OperatorEvent, SkillGoal
from solarian_agent.core.skill import Tool
from solarian_agent.core.transport import Bus, QoS
from solarian_agent.models.scripted import reply
from solarian_agent.testing.harness import DEFAULT_TOOLS, Wait, make_harness

OPS = st.lists(
    st.one_of(
        st.just(("decide",)), st.just(("tick",)), st.just(("advance",)),
        st.just(("adopt",)), st.tuples(st.just("send"), st.integers(0, 20)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_executor_never_starts_a_goal_from_an_older_generation(ops):
    clock = FakeClock()
    bus = Bus()
    ex = SkillExecutor(bus, clock, {"wait": Tool(Wait)}, {})
    started = []
    bus.subscribe(names.SKILL_EVENTS, names.T_AGENT_EVENT,
                  callback=lambda e: started.append((e.data, ex.generation))
                  if e.kind == "skill_started" else None, qos=QoS(depth=1000))
    client_gen = ex.generation
    decisions: list[int] = []  # generations that decisions were made under
    n = 0
    for op in ops:
        if op[0] == "decide":
            decisions.append(client_gen)
        elif op[0] == "send" and decisions:
            g = decisions[op[1] % len(decisions)]
            n += 1
            h = bus.send_goal("skills/wait", SkillGoal("wait", {"seconds": 0.01}, g, f"x{n}"))
            if g != ex.generation:
                assert h.done and h.result.outcome == "refused"
                assert "generation" in h.result.reason
        elif op[0] == "advance":
            ex.advance_generation("takeover", "operator")
        elif op[0] == "adopt":
            client_gen = ex.generation
        clock.advance(0.02)
        ex.tick()
    for data, gen_at_start in started:
        assert data["generation"] == gen_at_start


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(["step", "step", "step", "takeover", "cancel", "reset",
                                 "message"]), min_size=5, max_size=40))
def test_no_stale_planner_decision_starts_a_skill(schedule):
    script = [reply("", ("wait", {"seconds": 0.05})) for _ in range(200)]
    h = make_harness(script, tools=DEFAULT_TOOLS)
    starts = []
    h.bus.subscribe(names.SKILL_EVENTS, names.T_AGENT_EVENT,
                    callback=lambda e: starts.append(
                        (e.data["generation"], h.executor.generation, h.planner.status))
                    if e.kind == "skill_started" else None, qos=QoS(depth=1000))
    op_pub = h.bus.publisher(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT)
    h.say("keep waiting")
    paused_since_msg = False
    for op in schedule:
        if op == "step":
            before = len(starts)
            h.runtime.step()
            if paused_since_msg:
                assert len(starts) == before, "a skill started while the operator had control"
        elif op == "takeover":
            op_pub.publish(OperatorEvent("key", {"key": "w"}))
            h.runtime.step()
            paused_since_msg = h.planner.status == "paused"
        elif op == "cancel":
            h.planner.cancel()
        elif op == "reset":
            h.planner.reset()
        elif op == "message":
            h.say("go on")
            paused_since_msg = False
    for goal_gen, exec_gen, _ in starts:
        assert goal_gen == exec_gen
