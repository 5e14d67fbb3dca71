"""The planner and its graph's nodes: a node silent for ``node_lost_after_s`` is lost, its
actions in flight end as lost with the reason, the run is told and the model decides; a node
that beats again is back and the planner goes on at once; a lost monitor stops the actions
only it would end; a skills node gone for ``node_wait_s`` fails the run naming it."""

from __future__ import annotations

from typing import Any

from solarian_agent.core.clock import FakeClock
from solarian_agent.core.liveness import NodeBeat, NodeState, NodeWatch
from solarian_agent.core.transport import Bus
from solarian_agent.models.scripted import reply
from solarian_agent.testing.harness import (
    Harness,
    last_user_text,
    make_harness,
    record_events,
)


class Beating:
    """A node's beat on the harness's bus; ``alive`` off is a killed process."""

    def __init__(self, h: Harness, node: str) -> None:
        self.h, self.node = h, node
        self.beat = NodeBeat(h.bus, h.clock, node)
        self.alive = True
        h.runtime.add(f"beat-{node}", lambda dt: self.beat.tick() if self.alive else None)

    def restart(self) -> None:
        self.beat = NodeBeat(self.h.bus, self.h.clock, self.node)  # a new instance
        self.alive = True


def kill_executor(h: Harness) -> None:
    h.runtime.components = [c for c in h.runtime.components if c.name != "executor"]


def test_the_watch_says_up_lost_and_back_within_the_limit() -> None:
    clock, bus = FakeClock(), Bus()
    watch = NodeWatch(bus, clock, 1.5)
    beat = NodeBeat(bus, clock, "skills")
    changes: list[Any] = []
    beats: list[float] = []
    bus.subscribe("nodes/heartbeat", "solarian_agent/msg/Heartbeat",
                  lambda b: beats.append(clock.now()))
    for i in range(200):  # 4 s of 20 ms steps: beats for 1 s, silent 2 s, a new one for 1 s
        clock.advance(0.02)
        if i < 50 or i >= 150:
            if i == 150:
                beat = NodeBeat(bus, clock, "skills")
            beat.tick()
        changes += [(round(clock.now(), 2), c) for c in watch.tick()]
    assert [(c.node, c.state) for _, c in changes] == [("skills", NodeState.LOST),
                                                        ("skills", NodeState.BACK)]
    (t_lost, lost), (t_back, back) = changes
    last_beat = max(b for b in beats if b < t_lost)
    assert t_lost - last_beat <= 2.0 and lost.silent_s > 1.5  # told within 2 s
    first_new = min(b for b in beats if b > t_lost)
    assert back.restarted and t_back - first_new <= 0.02
    assert watch.statuses()[0]["state"] == "back"


def test_a_lost_skills_node_ends_its_action_as_lost_and_a_return_resumes_the_run() -> None:
    h = make_harness([reply("", ("move_joint", {"to": 3.0})),
                      reply("I will wait for the skills node to come back."),
                      reply("", ("finish_task", {"summary": "done after the restart",
                                                 "success": True}))])
    skills = Beating(h, "skills")
    h.say("move far")
    assert h.run_until(lambda: bool(h.planner.actions), 5)
    t_kill = h.clock.now()
    skills.alive = False
    kill_executor(h)
    assert h.run_until(lambda: len(h.provider.calls) == 2, 5)
    told = h.planner.nodes.changes[0]
    assert told[1].state == NodeState.LOST and told[0] - t_kill <= 2.0
    woke = last_user_text(h.provider.calls[1].request)
    assert "skills node is gone" in woke and "lost" in woke
    assert not h.planner.actions
    assert h.planner.state.nodes()[0]["state"] == "lost"
    h.runtime.run_for(1.0)
    assert len(h.provider.calls) == 2  # no call while it is gone, the model was told
    skills.restart()
    assert h.run_until(lambda: h.planner.status == "succeeded", 5)
    assert "skills node is back" in last_user_text(h.provider.calls[2].request)


def test_a_skills_node_gone_past_node_wait_s_fails_the_run_naming_it() -> None:
    h = make_harness([reply("", ("move_joint", {"to": 3.0})),
                      reply("I will wait for the skills node to come back.")],
                     config={"node_wait_s": 3.0})
    skills = Beating(h, "skills")
    h.say("move far")
    assert h.run_until(lambda: bool(h.planner.actions), 5)
    skills.alive = False
    kill_executor(h)
    assert h.run_until(lambda: h.planner.status == "failed", 10)
    assert "skills node has been gone" in h.planner.run.summary


def test_a_lost_monitor_stops_the_actions_only_it_would_end() -> None:
    h = make_harness([reply("", ("spin", {})),
                      reply("", ("finish_task", {"summary": "monitor gone", "success": False}))])
    monitor = Beating(h, "monitor")
    events = record_events(h.bus)
    h.say("spin until the monitor says so")
    assert h.run_until(lambda: bool(h.executor.running), 5)
    t_kill = h.clock.now()
    monitor.alive = False
    assert h.run_until(lambda: not h.executor.running, 5)
    stopped_at = h.clock.now()
    assert stopped_at - t_kill <= 2.0 + 0.1  # told within 2 s, stopped at the next tick
    assert h.run_until(lambda: len(h.provider.calls) == 2, 5)
    woke = last_user_text(h.provider.calls[1].request)
    assert "monitor node is gone" in woke
    ends = [e.data for e in events if e.kind == "skill_ended"]
    assert [(d["skill"], d["outcome"]) for d in ends] == [("spin", "stopped")]
    assert "the monitor node is gone" in ends[0]["reason"]
    assert h.run_until(lambda: h.planner.status == "failed", 5)


def test_a_node_that_joins_is_published_up_at_once():
    """A node's first beat is no change, but agent/state must list it (the panel shows it up)
    without waiting for another reason to publish."""
    from solarian_agent.core.planner_nodes import NodeReactions

    class _Journal:
        def event(self, _e: Any) -> None:
            pass

    clock = FakeClock()
    bus = Bus()
    published: list[int] = []

    class _State:
        def publish(self) -> None:
            published.append(watch.watched())

    watch = NodeWatch(bus, clock)
    reactions = NodeReactions(clock, watch, None, None, None, None, None, _Journal(), None,
                              _State())
    reactions.tick()
    assert published == []
    NodeBeat(bus, clock, "arm").tick()
    reactions.tick()
    assert published == [1] and watch.statuses()[0]["state"] == "up"
    reactions.tick()
    assert published == [1]  # nothing new: not published again
