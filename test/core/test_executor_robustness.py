"""The control loop under concurrency and faults: a takeover that lands while a skill is being
started still stops it, and nothing a skill, a tracker or a subscriber does escapes
``SkillExecutor.tick``."""

from collections.abc import Mapping
from typing import Any

from solarian_agent.core import names
from solarian_agent.core.clock import FakeClock
from solarian_agent.core.executor import SkillExecutor, TrackerResult
from solarian_agent.core.messages import SkillGoal
from solarian_agent.core.skill import Skill, Tool, TrackerRequest
from solarian_agent.core.transport import Bus, GoalStatus, QoS


class Log:
    def __init__(self) -> None:
        self.started: list[str] = []
        self.stopped: list[str] = []


LOG = Log()


class Touch(Skill):
    description = "Touch a point (test)."
    parameters = {"type": "object", "properties": {"point": {"type": "array"}},
                  "required": ["point"], "additionalProperties": False}
    image_points = ("point",)

    @classmethod
    def services_for(cls, params: Mapping[str, Any]) -> list[TrackerRequest]:
        return [TrackerRequest("cam.target", "cam", "point")]

    def start(self) -> None:
        LOG.started.append(self.ctx.action_id)

    def on_stop(self, reason: str) -> None:
        LOG.stopped.append(self.ctx.action_id)


class Move(Skill):
    description = "Move (test); start() may be told to do something nasty."
    nasty: Any = None

    def start(self) -> None:
        LOG.started.append(self.ctx.action_id)
        if Move.nasty is not None:
            Move.nasty()

    def on_stop(self, reason: str) -> None:
        LOG.stopped.append(self.ctx.action_id)


class BadServices(Skill):
    description = "Its services_for raises (test)."
    resources = ("other",)

    @classmethod
    def services_for(cls, params: Mapping[str, Any]) -> list[TrackerRequest]:
        raise KeyError("camera")


class BadResult(Skill):
    description = "Ends with a result that is not a mapping (test)."
    resources = ("other",)

    def tick(self) -> None:
        self.result = None  # type: ignore[assignment]
        self.done = True

    def on_stop(self, reason: str) -> None:
        LOG.stopped.append(self.ctx.action_id)


class Trackers:
    def __init__(self) -> None:
        self.on_start: Any = None
        self.stopped: list[str] = []

    def start(self, request: TrackerRequest, point: tuple[float, float]) -> TrackerResult:
        if self.on_start is not None:
            self.on_start()
        return TrackerResult(0.01)

    def stop(self, field: str) -> None:
        self.stopped.append(field)


TOOLS = {"touch": Tool(Touch), "move": Tool(Move), "bad_services": Tool(BadServices),
         "bad_result": Tool(BadResult)}


def setup():
    LOG.started.clear()
    LOG.stopped.clear()
    Move.nasty = None
    bus = Bus()
    trackers = Trackers()
    ex = SkillExecutor(bus, FakeClock(), TOOLS, {}, trackers=trackers)
    return bus, ex, trackers


def send(bus: Bus, ex: SkillExecutor, tool: str, params: dict, aid: str):
    return bus.send_goal(names.skill_action(tool), SkillGoal(tool, params, ex.generation, aid))


def test_takeover_while_the_tracker_is_seeded_refuses_the_start():
    bus, ex, trackers = setup()
    # the operator's takeover arrives on another thread while the tracker seeds (which waits
    # for the tracker's first result)
    trackers.on_start = lambda: ex.advance_generation("operator key", "operator")
    h = send(bus, ex, "touch", {"point": [10, 20]}, "a1")
    ex.tick()
    assert LOG.started == []  # the stale decision never reached the robot
    assert h.status == GoalStatus.ABORTED and "stale generation" in h.result.reason
    assert trackers.stopped == ["cam.target"] and not ex.running


def test_takeover_while_start_runs_stops_the_skill_in_the_same_tick():
    bus, ex, _ = setup()
    Move.nasty = lambda: ex.advance_generation("operator key", "operator")
    h = send(bus, ex, "move", {}, "a1")
    ex.tick()
    assert LOG.started == ["a1"] and LOG.stopped == ["a1"]  # held still at once
    assert not ex.running
    assert h.status == GoalStatus.CANCELED and "while it was starting" in h.result.reason
    # and the arm is free for what the operator does next
    h2 = send(bus, ex, "move", {}, "op2")
    assert h2.status != GoalStatus.ABORTED, h2.result


def test_a_start_that_raises_after_commanding_is_stopped_like_any_skill():
    bus, ex, _ = setup()

    def boom() -> None:
        raise RuntimeError("lost the camera after sending the first waypoint")

    Move.nasty = boom
    h = send(bus, ex, "move", {}, "a1")
    ex.tick()
    assert LOG.stopped == ["a1"]
    assert h.status == GoalStatus.ABORTED and "could not start" in h.result.reason


def test_services_for_raising_refuses_that_goal_only():
    bus, ex, _ = setup()
    bad = send(bus, ex, "bad_services", {}, "a1")
    good = send(bus, ex, "move", {}, "a2")
    ex.tick()  # must not raise
    assert bad.status == GoalStatus.ABORTED and "could not name its services" in bad.result.reason
    assert "a2" in ex.running and good.status == GoalStatus.EXECUTING


def test_a_broken_skill_result_ends_that_action_and_the_loop_goes_on():
    bus, ex, _ = setup()
    bad = send(bus, ex, "bad_result", {}, "a1")
    good = send(bus, ex, "move", {}, "a2")
    ex.tick()
    ex.tick()  # BadResult ends with a non-mapping result: must not raise
    assert bad.status == GoalStatus.ABORTED and "harness error" in bad.result.reason
    assert "a1" not in ex.running and LOG.stopped == ["a1"]
    assert "a2" in ex.running and good.status == GoalStatus.EXECUTING


def test_a_subscriber_that_raises_never_breaks_the_publisher():
    bus, ex, _ = setup()

    def broken_sink(ev: Any) -> None:
        raise OSError(28, "No space left on device")  # e.g. the episode log's disk is full

    sub = bus.subscribe(names.SKILL_EVENTS, names.T_AGENT_EVENT, callback=broken_sink,
                        qos=QoS(depth=10))
    got: list[Any] = []
    bus.subscribe(names.SKILL_EVENTS, names.T_AGENT_EVENT, callback=got.append,
                  qos=QoS(depth=10))
    h = send(bus, ex, "move", {}, "a1")
    ex.tick()  # publishes skill_started through the broken subscriber: must not raise
    assert "a1" in ex.running and h.status == GoalStatus.EXECUTING
    assert any(e.kind == "skill_started" for e in got)  # the others still get it
    assert sub.callback_errors >= 1
    done: list[Any] = []

    def bad_done(handle: Any) -> None:
        done.append(handle)
        raise RuntimeError("client bug")

    h.add_done_callback(bad_done)  # a client's result callback that raises, too
    assert h.cancel()
    ex.tick()  # must not raise
    assert h.status == GoalStatus.CANCELED and done and not ex.running
    h2 = send(bus, ex, "move", {}, "a2")
    ex.tick()
    assert h2.status == GoalStatus.EXECUTING


def test_a_goal_arriving_while_another_is_being_started_sees_the_arm_busy():
    bus, ex, trackers = setup()
    late: dict[str, Any] = {}
    # another thread's goal lands while tick() seeds the first goal's tracker
    trackers.on_start = lambda: late.setdefault("h", send(bus, ex, "move", {}, "a2"))
    h1 = send(bus, ex, "touch", {"point": [10, 20]}, "a1")
    ex.tick()
    ex.tick()
    assert h1.status == GoalStatus.EXECUTING
    assert late["h"].status == GoalStatus.ABORTED and "busy" in late["h"].result.reason
    assert list(ex.running) == ["a1"]  # never two skills on the arm


def test_a_cancel_arriving_while_the_goal_is_being_started_is_honoured():
    bus, ex, trackers = setup()
    accepted: list[bool] = []
    h1 = send(bus, ex, "touch", {"point": [10, 20]}, "a1")
    trackers.on_start = lambda: accepted.append(h1.cancel())
    ex.tick()
    assert accepted == [True]
    assert LOG.started == [] and not ex.running
    assert h1.status == GoalStatus.CANCELED and "before it started" in h1.result.reason
    assert trackers.stopped == ["cam.target"]


def test_a_done_callback_may_call_back_into_the_executor():
    import threading

    bus, ex, _ = setup()
    h1 = send(bus, ex, "move", {}, "a1")  # pending: not started yet
    again: list[Any] = []
    h1.add_done_callback(lambda h: again.append(send(bus, ex, "move", {}, "a2")))
    t = threading.Thread(target=h1.cancel, daemon=True)
    t.start()
    t.join(timeout=2.0)
    assert not t.is_alive(), "cancel deadlocked on the executor's lock"
    assert h1.status == GoalStatus.CANCELED and again
