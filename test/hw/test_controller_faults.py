"""ArmController's faults: failed reads counted until the bus is lost, servo flags and heat,
and an unexpected error in a step: each a fault reading that trips the e-stop; a step never
raises, and a release that fails as well is reported with its own error."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hw_helpers import READ_ERR, TORQUE_ERR, SpyArm, make, settle, tick

from solarian_agent.core.errors import ConfigError
from solarian_agent.hw.feetech import ArmControllerConfig, FeetechArm
from solarian_agent.hw.feetech.arm import ArmState
from solarian_agent.hw.feetech.controller import ArmReading
from solarian_agent.hw.feetech.protocol import STS3215
from solarian_agent.hw.feetech.simbus import SimulatedBus


def test_bus_faults_trip_after_consecutive_failures(sim: SimulatedBus,
                                                    arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm, max_consecutive_faults=2)
    ctl.step()
    sim.inject(4, "no_answer", count=None)
    r = tick(ctl, clock)
    assert r.mode == "fault" and r.state is None and not ctl.latch.tripped
    assert "servo 4 did not answer" in r.faults[0]
    r = tick(ctl, clock)
    assert ctl.latch.tripped and "2 consecutive failed reads" in ctl.latch.reason
    sim.clear_faults()
    r = tick(ctl, clock)
    assert r.mode == "estop"  # the latch stays until reset, even with the bus healthy


def test_failed_reads_are_counted_in_each_fault_event_and_trip_a_hold_estop(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    """Each failed read: a fault reading stamped with its step, the error and the count so far
    in the event; the last of max_consecutive_faults trips the e-stop, and with the hold
    action the torque stays on (a limp arm would fall)."""
    spy = SpyArm(arm)
    ctl, clock, events = make(spy, max_consecutive_faults=2)  # type: ignore[arg-type]
    ctl.step()
    assert spy.torque_calls == [(True, None)]
    events.clear()
    spy.fail_read = True
    r = tick(ctl, clock)
    assert (r.stamp, r.mode, r.state, r.goal) == (clock.now(), "fault", None, {})
    assert r.faults == (f"read failed: {READ_ERR}",)
    assert events == [("fault", {"error": READ_ERR, "consecutive": 1})]
    assert not ctl.latch.tripped
    r = tick(ctl, clock)
    assert (r.stamp, r.mode, r.state, r.goal) == (clock.now(), "fault", None, {})
    assert r.faults == (f"read failed: {READ_ERR}",)
    reason = f"servo bus: 2 consecutive failed reads; last: {READ_ERR}"
    assert events == [("fault", {"error": READ_ERR, "consecutive": 1}),
                      ("fault", {"error": READ_ERR, "consecutive": 2}),
                      ("estop", {"reason": reason})]
    assert ctl.latch.reason == reason
    assert spy.torque_calls == [(True, None)]  # hold: no torque write
    settle(sim, arm.bus)
    assert all(sim.torque(i) for i in range(1, 7))


def test_a_bus_loss_with_torque_off_releases_the_joints_at_once(sim: SimulatedBus,
                                                                arm: FeetechArm) -> None:
    spy = SpyArm(arm)
    ctl, clock, events = make(spy, max_consecutive_faults=2,  # type: ignore[arg-type]
                              estop_action="torque_off")
    ctl.step()
    spy.fail_read = True
    r = tick(ctl, clock)
    assert spy.torque_calls == [(True, None)] and r.faults == (f"read failed: {READ_ERR}",)
    r = tick(ctl, clock)
    assert spy.torque_calls == [(True, None), (False, None)]
    assert (r.stamp, r.mode, r.state) == (clock.now(), "fault", None)
    assert r.faults == (f"read failed: {READ_ERR}",) and ctl.latch.tripped
    settle(sim, arm.bus)
    assert not any(sim.torque(i) for i in range(1, 7))
    # the torque write failing too: both are said, the step does not fail
    ctl2, clock2, events2 = make(spy, max_consecutive_faults=1,  # type: ignore[arg-type]
                                 estop_action="torque_off")
    spy.fail_torque = True
    r = tick(ctl2, clock2)
    assert r.faults == (f"read failed: {READ_ERR}", f"torque off failed: {TORQUE_ERR}")
    assert spy.torque_calls[-1] == (False, None)
    assert events2 == [("fault", {"error": READ_ERR, "consecutive": 1}),
                       ("estop", {"reason": f"servo bus: 1 consecutive failed reads; "
                                            f"last: {READ_ERR}"}),
                       ("fault", {"error": TORQUE_ERR})]


def test_servo_flags_and_heat_trip_the_estop(sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm)
    ctl.step()
    sim.set_error_flags(3, 0x01)
    r = tick(ctl, clock)
    assert r.estop and "elbow_flex" in ctl.latch.reason and "voltage" in ctl.latch.reason
    sv = {s.joint: s for s in r.diagnostics.servos}
    assert sv["elbow_flex"].level == "error"
    sim.set_error_flags(3, 0)
    ctl.reset_estop()
    # the servo's own cut-out set above the controller's limit: the controller's acts alone
    sim.servos[5].mem[STS3215.MAX_TEMPERATURE.address] = 80
    sim.servos[5].temperature_c = 60
    r = tick(ctl, clock)
    assert not r.estop and {s.joint: s for s in r.diagnostics.servos}["wrist_roll"].level \
        == "warn" and r.diagnostics.level == "warn"
    sim.servos[5].temperature_c = 75
    r = tick(ctl, clock)
    assert r.estop and "wrist_roll (servo 5) at 75" in ctl.latch.reason


def test_a_servo_flag_trip_reports_the_flag_itself_as_the_fault(sim: SimulatedBus,
                                                                arm: FeetechArm) -> None:
    ctl, clock, events = make(arm)
    ctl.step()
    sim.set_error_flags(3, 0x01)
    r = tick(ctl, clock)
    assert r.mode == "estop" and len(r.faults) == 1
    assert r.faults == (ctl.latch.reason,)
    assert "elbow_flex" in r.faults[0] and "voltage" in r.faults[0]
    assert [e for e in events if e[0] == "estop"] == [("estop", {"reason": r.faults[0]})]


def test_a_servo_exactly_at_the_temperature_limit_trips_the_estop(sim: SimulatedBus,
                                                                  arm: FeetechArm) -> None:
    ctl, clock, events = make(arm)
    ctl.step()
    # the servo's own cut-out set above the controller's limit: the controller's acts alone
    sim.servos[5].mem[STS3215.MAX_TEMPERATURE.address] = 80
    sim.servos[5].temperature_c = 69
    r = tick(ctl, clock)
    assert r.mode == "holding" and not r.estop and r.faults == ()
    sim.servos[5].temperature_c = 70  # max_temperature_c: at it is too hot
    r = tick(ctl, clock)
    msg = "wrist_roll (servo 5) at 70 °C, above 70 °C"
    assert r.mode == "estop" and r.faults == (msg,) and ctl.latch.reason == msg
    assert [e for e in events if e[0] == "estop"] == [("estop", {"reason": msg})]


def test_a_step_on_a_disconnected_bus_is_a_fault_reading_never_an_exception(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm)
    ctl.step()
    arm.bus.disconnect()  # used while disconnected: a fault, not an exception
    r = tick(ctl, clock)
    assert r.mode == "fault" and "not connected" in r.faults[0]
    with pytest.raises(ConfigError, match="estop_action"):
        ArmControllerConfig(estop_action="explode")


class _RaisingArm(SpyArm):
    """A stand-in whose read raises ``error`` (not a HardwareError: a bug below the loop)."""

    error: Exception | None = None

    def read_state(self) -> ArmState:
        if self.error is not None:
            raise self.error
        return super().read_state()


def test_an_unexpected_error_in_a_step_is_a_fault_reading_and_trips_the_estop(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    spy = _RaisingArm(arm)
    ctl, clock, events = make(spy)  # type: ignore[arg-type]
    ctl.step()
    spy.error = RuntimeError("state block garbled")
    r = tick(ctl, clock)  # does not raise
    msg = "control step failed: RuntimeError: state block garbled"
    assert isinstance(r, ArmReading) and ctl.latest is r
    assert r.stamp == clock.now()
    assert (r.mode, r.state, r.goal, r.target, r.faults) == ("fault", None, {}, None, (msg,))
    assert r.estop and ctl.latch.reason == msg
    d = r.diagnostics
    assert (d.level, d.estop, d.estop_reason, d.servos) == ("error", True, msg, ())
    assert d.message == f"e-stop latched: {msg}; {msg}"
    assert [e for e in events if e[0] == "estop"] == [("estop", {"reason": msg})]
    spy.error = None  # readable again: the latch holds the arm where it is until reset
    r = tick(ctl, clock)
    assert r.mode == "estop" and r.goal == r.state.positions and r.faults == ()


def test_a_step_that_keeps_failing_unexpectedly_releases_the_joints_when_so_configured(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    """A bug below the loop raising every tick never reaches _step's e-stop branch again: with
    estop_action torque_off the joints are released at once all the same."""
    spy = _RaisingArm(arm)
    ctl, clock, _ = make(spy, estop_action="torque_off")  # type: ignore[arg-type]
    ctl.step()
    settle(sim, arm.bus)
    assert all(sim.torque(i) for i in range(1, 7))
    spy.error = RuntimeError("state block garbled")
    r = tick(ctl, clock, 3)
    settle(sim, arm.bus)
    assert r.estop and not any(sim.torque(i) for i in range(1, 7))
    assert spy.torque_calls[-1][0] is False
    # a torque write that fails too is reported, and step() still does not raise
    spy.fail_torque = True
    r = tick(ctl, clock)
    assert r.faults[0] == "control step failed: RuntimeError: state block garbled"
    assert r.faults[1].startswith("torque off failed: ")


def test_a_release_failing_after_an_unexpected_step_error_is_reported_with_its_error(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    spy = _RaisingArm(arm)
    ctl, clock, _ = make(spy, estop_action="torque_off")  # type: ignore[arg-type]
    ctl.step()
    spy.error = RuntimeError("garbled")
    spy.fail_torque = True
    r = tick(ctl, clock)
    assert r.faults == ("control step failed: RuntimeError: garbled",
                        f"torque off failed: {TORQUE_ERR}")

    class _BadTorque(_RaisingArm):
        def set_torque(self, enabled: bool, joints: Sequence[str] | None = None) -> None:
            if self.fail_torque:
                raise ValueError("torque register out of range")
            super().set_torque(enabled, joints)

    spy2 = _BadTorque(arm)
    ctl2, clock2, _ = make(spy2, estop_action="torque_off")  # type: ignore[arg-type]
    ctl2.step()
    spy2.error = RuntimeError("garbled")
    spy2.fail_torque = True
    r = tick(ctl2, clock2)
    assert r.faults == ("control step failed: RuntimeError: garbled",
                        "torque off failed: ValueError: torque register out of range")
