"""ArmController's events: each command, hold and e-stop said once with its source or reason,
kept with its time, the last 200 of them."""

from __future__ import annotations

from hw_helpers import make

from solarian_agent.hw.feetech import FeetechArm
from solarian_agent.hw.feetech.simbus import SimulatedBus


def test_the_command_event_names_the_source_and_the_joints(sim: SimulatedBus,
                                                           arm: FeetechArm) -> None:
    ctl, clock, events = make(arm)
    ctl.step()
    ctl.command({"shoulder_pan": 0.1, "elbow_flex": 0.2})
    ctl.command({"gripper": 0.01}, source="teleop")
    assert [e for e in events if e[0] == "command"] == [
        ("command", {"source": "agent", "joints": ["elbow_flex", "shoulder_pan"]}),
        ("command", {"source": "teleop", "joints": ["gripper"]}),
    ]


def test_hold_and_estop_events_carry_the_reason(sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, events = make(arm)
    ctl.step()
    ctl.hold()
    ctl.estop("operator pressed stop")
    ctl.estop("pressed again")  # already latched: no second event
    assert ctl.reset_estop() is True
    assert ctl.reset_estop() is False  # nothing latched: no event
    assert events == [("hold", {"reason": "hold requested"}),
                      ("estop", {"reason": "operator pressed stop"}),
                      ("estop_reset", {})]


def test_every_event_is_kept_with_its_time_kind_and_detail(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, events = make(arm)
    ctl.step()
    clock.advance(0.5)
    ctl.hold("operator asked")
    t_hold = clock.now()
    clock.advance(0.25)
    ctl.estop("operator pressed stop")
    t_estop = clock.now()
    assert list(ctl.events) == [(t_hold, "hold", {"reason": "operator asked"}),
                                (t_estop, "estop", {"reason": "operator pressed stop"})]
    assert [(k, d) for _, k, d in ctl.events] == events


def test_the_event_log_keeps_the_last_200(sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, _, _ = make(arm)
    for i in range(205):
        ctl.hold(f"h{i}")
    assert len(ctl.events) == 200
    assert ctl.events[0][2] == {"reason": "h5"} and ctl.events[-1][2] == {"reason": "h204"}
