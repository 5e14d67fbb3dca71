"""ArmController's diagnostics: each servo's telemetry and its level (heat, supply, load,
flags), the e-stop and the watchdog in the summary, the bus stats when the bus has them."""

from __future__ import annotations

from hw_helpers import SpyArm, make, tick

from solarian_agent.hw.feetech import ArmController, FeetechArm
from solarian_agent.hw.feetech.arm import ArmState
from solarian_agent.hw.feetech.controller import ArmReading
from solarian_agent.hw.feetech.simbus import SimulatedBus


class _NoTelemetryArm(SpyArm):
    """A stand-in (a simulator's arm) that reports positions but no servo telemetry."""

    def read_state(self) -> ArmState:
        s = super().read_state()
        return ArmState(s.stamp, s.positions, s.velocities, {}, s.faults)


def test_an_arm_without_servo_telemetry_reads_ok_until_something_is_wrong(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    spy = _NoTelemetryArm(arm)
    ctl, clock, _ = make(spy)  # type: ignore[arg-type]
    r = ctl.step()
    assert r.mode == "holding" and r.faults == ()
    d = r.diagnostics
    assert (d.level, d.message, d.servos, d.estop) == ("ok", "ok", (), False)
    ctl.estop("operator pressed stop")
    r = tick(ctl, clock)
    assert r.diagnostics.level == "error"
    assert r.diagnostics.message == "e-stop latched: operator pressed stop"
    assert ctl.reset_estop() is True
    r = tick(ctl, clock)
    assert r.mode == "holding" and r.diagnostics.level == "ok"


class _TelemetryArm(SpyArm):
    """The sim's arm with chosen servo telemetry (per joint: field overrides of the reading),
    and ``bus`` as given (the real bus, one without stats, or none at all)."""

    def __init__(self, arm: FeetechArm, bus: object = None) -> None:
        super().__init__(arm)
        self.overrides: dict[str, dict[str, object]] = {}
        if bus is not None:
            self.bus = bus

    def read_state(self) -> ArmState:
        import dataclasses
        s = super().read_state()
        servos = {n: dataclasses.replace(r, **self.overrides.get(n, {}))
                  for n, r in s.servos.items()}
        return ArmState(s.stamp, s.positions, s.velocities, servos, s.faults)


_CALM = {"voltage_v": 7.4, "temperature_c": 30.0, "load": 0.0, "moving": False,
         "error_flags": ()}


def _diag_after(arm: FeetechArm, overrides: dict[str, dict[str, object]]
                ) -> tuple[ArmReading, ArmController]:
    spy = _TelemetryArm(arm)
    spy.overrides = {n: {**_CALM, **overrides.get(n, {})} for n in arm.joint_names}
    ctl, clock, _ = make(spy)  # type: ignore[arg-type]
    ctl.step()
    return tick(ctl, clock), ctl


def test_diagnostics_of_healthy_servos_are_ok_with_each_servos_telemetry(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    from solarian_agent.hw.feetech.controller import ServoDiagnostic
    r, _ = _diag_after(arm, {"elbow_flex": {"voltage_v": 6.0, "temperature_c": 54.0,
                                            "load": -0.79, "moving": True},
                             "wrist_flex": {"voltage_v": 13.0}})
    d = r.diagnostics
    assert (d.level, d.message, d.estop, d.estop_reason) == ("ok", "ok", False, "")
    ids = {n: s.servo_id for n, s in r.state.servos.items()}
    assert ids["elbow_flex"] == 3 and ids["wrist_roll"] == 5
    want = []
    for n in arm.joint_names:
        v, t, ld, mv = 7.4, 30.0, 0.0, False
        if n == "elbow_flex":
            v, t, ld, mv = 6.0, 54.0, -0.79, True
        if n == "wrist_flex":
            v = 13.0
        want.append(ServoDiagnostic(n, ids[n], "ok", "ok", v, t, ld, mv))
    assert d.servos == tuple(want)


def test_diagnostics_of_a_warm_servo_warn_with_the_temperature(sim: SimulatedBus,
                                                               arm: FeetechArm) -> None:
    r, _ = _diag_after(arm, {"wrist_roll": {"temperature_c": 55.0}})
    d = r.diagnostics
    sv = {s.joint: s for s in d.servos}
    assert (sv["wrist_roll"].level, sv["wrist_roll"].message) == ("warn", "hot: 55 °C")
    assert all((s.level, s.message) == ("ok", "ok") for s in d.servos if s.joint != "wrist_roll")
    assert (d.level, d.message) == ("warn", "wrist_roll: hot: 55 °C")
    assert not d.estop and r.faults == ()


def test_diagnostics_of_a_hot_servo_at_the_limit_are_an_error(sim: SimulatedBus,
                                                              arm: FeetechArm) -> None:
    r, ctl = _diag_after(arm, {"wrist_roll": {"temperature_c": 70.0}})
    d = r.diagnostics
    sv = {s.joint: s for s in d.servos}
    assert (sv["wrist_roll"].level, sv["wrist_roll"].message) == ("error", "70 °C")
    trip = "wrist_roll (servo 5) at 70 °C, above 70 °C"
    assert d.estop and d.estop_reason == trip == ctl.latch.reason
    assert (d.level, d.message) == (
        "error", f"e-stop latched: {trip}; {trip}; wrist_roll: 70 °C")


def test_diagnostics_of_a_low_or_high_supply_and_a_heavy_load_warn(sim: SimulatedBus,
                                                                   arm: FeetechArm) -> None:
    r, _ = _diag_after(arm, {"shoulder_pan": {"voltage_v": 5.94},
                             "shoulder_lift": {"voltage_v": 13.06},
                             "elbow_flex": {"load": 0.8},
                             "wrist_flex": {"load": -0.9, "temperature_c": 60.0,
                                            "voltage_v": 5.0}})
    d = r.diagnostics
    sv = {s.joint: (s.level, s.message) for s in d.servos}
    assert sv["shoulder_pan"] == ("warn", "supply 5.9 V")
    assert sv["shoulder_lift"] == ("warn", "supply 13.1 V")
    assert sv["elbow_flex"] == ("warn", "load 80%")
    assert sv["wrist_flex"] == ("warn", "hot: 60 °C; supply 5.0 V; load 90%")
    assert sv["wrist_roll"] == ("ok", "ok")
    assert d.level == "warn"
    assert d.message == ("shoulder_pan: supply 5.9 V; shoulder_lift: supply 13.1 V; "
                         "elbow_flex: load 80%; wrist_flex: hot: 60 °C; supply 5.0 V; load 90%")


def test_diagnostics_of_servo_flags_name_every_flag(sim: SimulatedBus, arm: FeetechArm) -> None:
    r, _ = _diag_after(arm, {"elbow_flex": {"error_flags": ("voltage", "overheat"),
                                            "load": 0.85}})
    d = r.diagnostics
    sv = {s.joint: (s.level, s.message) for s in d.servos}
    assert sv["elbow_flex"] == ("error", "voltage, overheat; load 85%")
    assert (d.level, d.message) == ("error", "elbow_flex: voltage, overheat; load 85%")


def test_diagnostics_of_an_estop_and_a_stale_command_stream(sim: SimulatedBus,
                                                            arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm, command_timeout_s=0.1)
    ctl.step()
    ctl.command({"elbow_flex": 0.2})
    d = tick(ctl, clock).diagnostics
    assert d.watchdog_expired is False and (d.level, d.message) == ("ok", "ok")
    d = tick(ctl, clock, 6).diagnostics
    assert d.watchdog_expired is True
    ctl.estop("operator pressed stop")
    d = tick(ctl, clock).diagnostics
    assert (d.level, d.message, d.estop, d.estop_reason) == (
        "error", "e-stop latched: operator pressed stop", True, "operator pressed stop")
    assert d.consecutive_faults == 0


def test_diagnostics_carry_the_bus_stats_only_when_the_bus_has_them(sim: SimulatedBus,
                                                                    arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm)
    ctl.step()
    d = tick(ctl, clock).diagnostics
    assert d.bus == dict(vars(arm.bus.stats)) and d.bus["tx_frames"] > 0
    spy = _TelemetryArm(arm, bus=object())  # a bus without stats
    ctl, clock, _ = make(spy)  # type: ignore[arg-type]
    ctl.step()
    r = tick(ctl, clock)
    assert r.faults == () and (r.diagnostics.level, r.diagnostics.bus) == ("ok", {})
