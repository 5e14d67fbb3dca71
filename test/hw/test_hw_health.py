"""Servo health over the pseudo-terminal: a stall heats the simulated servo, the arm derates
and says why, then the servo's own protection trips and the controller latches the e-stop
naming it; the overload protection; the supply sag; the per-servo diagnostics with values
beside their limits; the current read round-robin."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hw_helpers import TIMEOUT_S, settle

from solarian_agent.core.clock import FakeClock
from solarian_agent.core.errors import ConfigError
from solarian_agent.hw.feetech import (
    ArmController,
    ArmControllerConfig,
    FeetechArm,
    FeetechArmConfig,
    default_so101,
)
from solarian_agent.hw.feetech.health import HealthConfig, HealthMonitor
from solarian_agent.hw.feetech.protocol import STS3215
from solarian_agent.hw.feetech.simbus import SimulatedBus, Thermal
from solarian_agent.ros.components import arm_diagnostics

ELBOW = 3  # elbow_flex's servo id


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _rig(clock: FakeClock, thermal: Thermal, **cfg: float
         ) -> Iterator[tuple[SimulatedBus, FeetechArm, ArmController, list]]:
    with SimulatedBus(clock=clock, thermal=thermal) as sim:
        arm = FeetechArm(FeetechArmConfig(port=sim.port_name, timeout_s=TIMEOUT_S),
                         calibration=default_so101())
        arm.connect()
        events: list[tuple[str, dict]] = []
        ctl = ArmController(arm, clock, ArmControllerConfig(rate_hz=50.0,
                                                            command_timeout_s=1e6, **cfg),
                            on_event=lambda k, d: events.append((k, d)), workspace=False,
                            health=HealthMonitor(HealthConfig(),
                                                 read_current=arm.read_current_a))
        try:
            yield sim, arm, ctl, events
        finally:
            arm.disconnect()


@pytest.fixture
def hot(clock: FakeClock) -> Iterator[tuple[SimulatedBus, FeetechArm, ArmController, list]]:
    # a servo that heats fast under load, so that the test's minute is a few dozen ticks; the
    # controller's own temperature limit above the servo's cut-out (70 °C), so that the
    # servo's own protection is what trips
    yield from _rig(clock, Thermal(heat_c_at_full_load=400.0), lead_time_s=0.1,
                    max_temperature_c=75.0)


def _push_elbow_into_the_table(sim: SimulatedBus, ctl: ArmController,
                               clock: FakeClock) -> None:
    clock.advance(0.02)
    ctl.step()  # torque on, holding
    sim.obstruct(ELBOW, above=2100)  # the table, 52 ticks past where it stands
    ctl.command({"elbow_flex": 1.0})


def test_a_stall_heats_the_servo_the_arm_derates_then_the_trip_names_the_servo(hot, clock):
    sim, arm, ctl, events = hot
    _push_elbow_into_the_table(sim, ctl, clock)
    temps, factors = [], []
    for _ in range(120):
        clock.advance(0.5)  # half a second between ticks: a minute in 120 ticks
        r = ctl.step()
        if r.state is not None:
            temps.append(r.state.servos["elbow_flex"].temperature_c)
            factors.append(r.diagnostics.speed_factor)
        if ctl.latch.tripped:
            break
    assert ctl.latch.tripped, f"never tripped; temperatures {temps}"
    assert temps[0] < 40 and max(temps) >= 60
    assert min(factors) < 1.0  # derated before the trip
    kinds = [k for k, _ in events]
    assert "derate" in kinds and kinds.index("derate") < kinds.index("estop")
    derate = next(d for k, d in events if k == "derate")
    assert derate["reason"].startswith("elbow_flex (servo 3) at ")
    assert "derating from 60 °C, limit 70 °C; arm speed" in derate["reason"]
    assert ctl.latch.reason == ("servo 3 (elbow_flex) reports overheat (status byte 0x04) "
                                "answering SYNC_READ")
    # the servo cut out by itself; the e-stop, not silence, says so
    assert not sim.torque(ELBOW)
    assert sim.register(ELBOW, STS3215.STATUS) & 0x04
    r = ctl.step()
    assert r.mode == "estop" and r.diagnostics.level == "error"
    assert any(k == "estop" and "elbow_flex" in d["reason"] for k, d in ctl_events(ctl))


def ctl_events(ctl: ArmController) -> list[tuple[str, dict]]:
    return [(k, d) for _, k, d in ctl.events]


def test_derating_slows_the_arm(clock):
    # the same move with one servo hot covers less ground per tick
    def travel(temp: float) -> float:
        rig = _rig(clock, Thermal(tau_s=1e9))  # temperatures stay where they are set
        sim, arm, ctl, _ = next(rig)
        try:
            sim.servos[5].temperature_c = temp
            clock.advance(0.02)
            ctl.step()
            start = ctl.positions()["shoulder_pan"]
            ctl.command({"shoulder_pan": 1.5})
            for _ in range(5):
                clock.advance(0.02)
                ctl.step()
            clock.advance(0.02)
            # the goal written (what the controller asks for; the servo follows a tick later)
            return ctl.step().goal["shoulder_pan"] - start
        finally:
            rig.close()

    full, hot65, hot70 = travel(40.0), travel(65.0), travel(69.4)
    assert full > 0.1
    assert hot65 == pytest.approx(full * 0.65, rel=0.1)  # halfway from 60 to 70: 65 %
    assert hot70 < hot65


def test_overload_protection_trips_a_stalled_servo_and_the_estop_names_it(clock):
    rig = _rig(clock, Thermal(tau_s=1e9))  # no heating: the overload alone
    sim, arm, ctl, events = next(rig)
    try:
        _push_elbow_into_the_table(sim, ctl, clock)
        for _ in range(30):  # above 80 % load for Protection_Time (2 s)
            clock.advance(0.25)
            ctl.step()
            if ctl.latch.tripped:
                break
        assert ctl.latch.tripped
        assert ctl.latch.reason.startswith("servo 3 (elbow_flex) reports overload")
        assert not sim.torque(ELBOW)
        assert sim.register(ELBOW, STS3215.STATUS) & 0x20
        arm.bus.write_register(ELBOW, STS3215.TORQUE_ENABLE, 1)  # as the servo: on clears it
        assert sim.register(ELBOW, STS3215.STATUS) == 0
    finally:
        rig.close()


def test_the_supply_sags_under_load_and_recovers(hot, clock):
    sim, arm, ctl, _ = hot
    clock.advance(0.02)
    v0 = ctl.step().state.servos["wrist_flex"].voltage_v
    _push_elbow_into_the_table(sim, ctl, clock)
    for _ in range(5):
        clock.advance(0.02)
        v1 = ctl.step().state.servos["wrist_flex"].voltage_v
    assert v0 == 7.4 and v1 < v0
    sim.obstruct(ELBOW)  # the obstacle gone: the elbow reaches its goal, the load drops
    for _ in range(5):
        clock.advance(0.02)
        v2 = ctl.step().state.servos["wrist_flex"].voltage_v
    assert v2 == 7.4


def test_diagnostics_show_each_servo_with_its_values_and_limits(hot, clock):
    sim, arm, ctl, _ = hot
    sim.servos[ELBOW].temperature_c = 64.0
    r = None
    for _ in range(7):  # one current reading per tick: every servo's within six
        clock.advance(0.02)
        r = ctl.step()
    d = arm_diagnostics(r, clock.now())
    by = {s["name"]: s for s in d["status"]}
    assert set(by) == {"arm", *(f"arm/{n}" for n in arm.joint_names)}
    elbow = by["arm/elbow_flex"]
    assert elbow["level"] == 1 and elbow["hardware_id"] == "servo 3"
    assert elbow["message"].startswith("hot: 64 °C; derating: speed ")
    assert "°C (derating from 60, limit 70)" in elbow["message"]
    assert elbow["values"]["temperature_limit_c"] == 70.0
    assert 0.3 < elbow["values"]["speed_factor"] < 1.0
    assert by["arm"]["values"]["speed_factor"] == elbow["values"]["speed_factor"]
    assert by["arm"]["level"] == 1
    assert by["arm"]["message"].endswith("derating: elbow_flex (servo 3) at 64 °C: derating "
                                         "from 60 °C, limit 70 °C; arm speed 72%")
    pan = by["arm/shoulder_pan"]
    assert pan["level"] == 0 and "current_a" in pan["values"]
    assert pan["values"]["current_warn_a"] == 1.5


def test_current_is_read_one_servo_per_tick(hot, clock):
    sim, arm, ctl, _ = hot
    assert ctl.health is not None
    for _ in range(6):
        clock.advance(0.02)
        ctl.step()
    assert ctl.health.current_reads == 6
    assert set(ctl.health.current_a) == set(arm.joint_names)
    settle(sim, arm.bus)
    sim.clear_frames()
    clock.advance(0.02)
    ctl.step()
    settle(sim, arm.bus)
    # one SYNC_READ, one READ of Present_Current, one SYNC_WRITE of goals (then our PING)
    assert [f[4] for f in sim.frames()] == [0x82, 0x02, 0x83, 0x01]


@pytest.mark.parametrize(("yaml", "path", "msg"), [
    ("min_speed_factor: 0", "arm.health.min_speed_factor", "must be in (0, 1]"),
    ("full_derate_temperature_c: 50", "arm.health.full_derate_temperature_c",
     "must be above derate_temperature_c (60.0)"),
    ("current_every_ticks: -1", "arm.health.current_every_ticks", "must be an integer >= 0"),
    ("warm: 1", "arm.health.warm", "unknown setting"),
])
def test_bad_health_settings_name_their_yaml_path(tmp_path: Path, yaml: str, path: str,
                                                   msg: str):
    f = tmp_path / "arm.yaml"
    f.write_text(f"arm:\n  health:\n    {yaml}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        HealthConfig.from_yaml(str(f))
    assert e.value.path == f"{f}:{path}"
    assert msg in str(e.value)


def test_the_shipped_file_has_a_health_block():
    c = HealthConfig.from_yaml()
    assert (c.derate_temperature_c, c.full_derate_temperature_c) == (60.0, 70.0)
