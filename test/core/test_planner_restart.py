"""A restarted planner never reuses a generation: its first run claims one from the executor
above anything the executor has seen, so a goal the dead planner still had on the way is
refused whatever the timing, even when its last skill ended long before (no running skill
when it died: nothing else would have advanced the generation)."""

from __future__ import annotations

from solarian_agent.core import names
from solarian_agent.core.config import AgentConfig
from solarian_agent.core.messages import SkillGoal
from solarian_agent.core.planner import InlineCaller, Planner
from solarian_agent.models.scripted import ScriptedProvider, reply
from solarian_agent.testing.harness import make_harness


def finish(summary: str) -> object:
    return reply("", ("finish_task", {"summary": summary, "success": True}))


def test_a_restarted_planner_refuses_the_dead_ones_late_goal_after_a_fast_skill() -> None:
    h = make_harness([reply("", ("wait", {"seconds": 0.05})), finish("done")])
    h.say("a fast one")
    assert h.run_until(lambda: h.planner.status == "succeeded", 5)
    dead_gen = h.planner.generation
    assert not h.executor.running  # the skill ended: no stop advanced the generation
    # the planner dies (it is no longer ticked); a new one starts on the same graph
    h.runtime.components = [c for c in h.runtime.components if c.name != "planner"]
    for srv in (names.AGENT_MESSAGE, names.AGENT_CANCEL, names.AGENT_RESET,
                names.OBSERVE_SCENE):  # its services went with its process
        h.bus._services.pop(srv, None)
    fresh = Planner(h.bus, h.clock, AgentConfig(cameras=["cam"], planner_heartbeat_s=None,
                                                 monitor=None),
                    ScriptedProvider([reply("", ("wait", {"seconds": 0.05})), finish("again")]),
                    caller=InlineCaller())
    h.runtime.add("planner2", lambda dt: fresh.tick())
    fresh.message("and again")
    assert h.run_until(lambda: fresh.status == "succeeded", 5)
    assert fresh.generation > dead_gen and h.executor.generation == fresh.generation
    # the dead planner's goal, late on the wire: refused, never executed
    results: list[object] = []
    h.bus.send_goal(names.skill_action("wait"), SkillGoal("wait", {"seconds": 0.05}, dead_gen,
                                                          "late-1"),
                    done_cb=lambda handle: results.append(handle.result))
    assert h.run_until(lambda: bool(results), 2)
    assert getattr(results[0], "outcome", None) == "refused", results
