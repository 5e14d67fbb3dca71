import pytest

from solarian_agent.core import names
from solarian_agent.core.clock import FakeClock
from solarian_agent.core.errors import SkillFailed
from solarian_agent.core.executor import SkillExecutor, TrackerResult, validate_params
from solarian_agent.core.messages import SkillGoal
from solarian_agent.core.skill import Arrival, Skill, Tool, TrackerRequest, usable_tools
from solarian_agent.core.transport import Bus, GoalStatus
from solarian_agent.testing.harness import record_events


def test_arrival_within_tolerance_ends_on_first_check():
    a = Arrival({"j": (1.0, 0.02)}, sent_at=0.0)
    assert a.check({"j": 1.01}, 0.0) and a.reason == "arrived"


def test_arrival_stall_counted_from_grace_period():
    a = Arrival({"gripper_mm": (0.0, 2.0)}, sent_at=10.0)
    # closed on an object at 20 mm: never within tolerance, stops moving at once
    assert not a.check({"gripper_mm": 20.0}, 10.0)
    assert not a.check({"gripper_mm": 20.0}, 10.5)
    assert not a.check({"gripper_mm": 20.0}, 10.79)
    assert a.check({"gripper_mm": 20.0}, 10.8) and a.reason == "stopped moving"


def test_arrival_keeps_going_while_moving():
    a = Arrival({"j": (1.0, 0.02)}, sent_at=0.0)
    v = 0.0
    for i in range(100):
        v += 0.005
        assert not a.check({"j": v}, i * 0.02)
    with pytest.raises(SkillFailed, match="no reading for j"):
        a.check({}, 3.0)


class Picky(Skill):
    description = "Pick at a point."
    parameters = {"type": "object", "properties": {"point": {"type": "array"}},
                  "required": ["point"]}
    image_points = ("point",)
    max_target_area = 0.05
    camera = "cam"

    @classmethod
    def services_for(cls, params):
        return [TrackerRequest("cam.target", "cam", "point")]

    def tick(self):
        self.finish()


class FakeTracker:
    def __init__(self, area):
        self.area = area
        self.started, self.stopped = [], []

    def start(self, req, point):
        self.started.append((req.field, point))
        return TrackerResult(self.area, (1, 2, 3, 4))

    def stop(self, field):
        self.stopped.append(field)


@pytest.mark.parametrize("area, outcome", [(0.01, "succeeded"), (0.3, "refused"),
                                           (None, "refused")])
def test_max_target_area_refuses_before_start_and_stops_tracker(area, outcome):
    clock, bus = FakeClock(), Bus()
    tr = FakeTracker(area)
    ex = SkillExecutor(bus, clock, {"pick": Tool(Picky)}, {}, trackers=tr)
    events = record_events(bus, depth=100)
    h = bus.send_goal("skills/pick", SkillGoal("pick", {"point": [5, 6]}, 1, "a1"))
    ex.tick()
    ex.tick()
    assert h.result.outcome == outcome
    assert tr.started == [("cam.target", (5.0, 6.0))]
    assert tr.stopped == ["cam.target"]  # stopped after the refusal or when the action ended
    kinds = [e.kind for e in events]
    if outcome == "refused":
        assert "target_rejected" in kinds and "skill_started" not in kinds
        assert "point again" in h.result.reason
    else:
        started = next(e for e in events if e.kind == "skill_started")
        assert started.data["target_area"] == 0.01


def test_resource_conflict_and_schema_refusal():
    clock, bus = FakeClock(), Bus()

    class Hold(Skill):
        description = "hold"

    ex = SkillExecutor(bus, clock, {"hold": Tool(Hold), "pick": Tool(Picky)}, {})
    h1 = bus.send_goal("skills/hold", SkillGoal("hold", {}, 1, "a1"))
    ex.tick()
    assert h1.status == GoalStatus.EXECUTING
    h2 = bus.send_goal("skills/hold", SkillGoal("hold", {}, 1, "a2"))
    assert h2.result.outcome == "refused" and "busy with a1 (hold)" in h2.result.reason
    h3 = bus.send_goal("skills/pick", SkillGoal("pick", {"point": "here"}, 1, "a3"))
    assert "at point" in h3.result.reason and "array" in h3.result.reason


def test_conclude_service_and_stale_conclude():
    clock, bus = FakeClock(), Bus()

    class Forever(Skill):
        description = "forever"
        ends_by_itself = False

    ex = SkillExecutor(bus, clock, {"f": Tool(Forever)}, {})
    h = bus.send_goal("skills/f", SkillGoal("f", {}, 1, "a1"))
    ex.tick()
    r = bus.call(names.SKILL_CONCLUDE, {"action_id": "a1", "outcome": "succeeded",
                                        "generation": 0, "reason": "x"})
    assert not r["ok"] and "stale" in r["reason"]
    r = bus.call(names.SKILL_CONCLUDE, {"action_id": "a1", "outcome": "succeeded",
                                        "generation": 1, "reason": "monitor: holding"})
    assert r["ok"]
    ex.tick()
    assert h.status == GoalStatus.SUCCEEDED and h.result.reason == "monitor: holding"


def test_usable_tools_warns_and_validate_params():
    class NoDesc(Skill):
        pass

    specs = usable_tools({"a": Tool(NoDesc), "b": Tool(Picky)})
    assert list(specs) == ["b"]
    assert validate_params(specs["b"], {"point": [1, 2]}) == ""
    assert "observation_id" in validate_params(specs["b"], {"point": [1, 2]},
                                               model_facing=True)
