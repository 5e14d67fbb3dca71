"""The servos set up as on a real SO-101: what connect writes and verifies, the simulated
STS3215's own strictness (position limits, Lock, return delay, 0..4095), and the set-up
tools' dry runs.  All over the pseudo-terminal against the simulated bus."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hw_helpers import TIMEOUT_S, settle

from solarian_agent.core.errors import ConfigError
from solarian_agent.hw.feetech import FeetechArm, FeetechArmConfig, FeetechBus, default_so101
from solarian_agent.hw.feetech import protocol as P
from solarian_agent.hw.feetech.arm import default_arm_config
from solarian_agent.hw.feetech.calibration import ArmCalibration
from solarian_agent.hw.feetech.cli import main
from solarian_agent.hw.feetech.protocol import STS3215
from solarian_agent.hw.feetech.servo_config import (
    ServoConfigError,
    ServoSettings,
    configure,
    plan,
)
from solarian_agent.hw.feetech.simbus import SimulatedBus

CAL = default_so101()


def _arm(sim: SimulatedBus, **kw: object) -> FeetechArm:
    return FeetechArm(FeetechArmConfig(port=sim.port_name, timeout_s=TIMEOUT_S, **kw),  # type: ignore[arg-type]
                      calibration=CAL)


# ------------------------------------------------------------------ configure on connect


def test_connect_writes_and_verifies_every_setting_and_locks_the_eeprom(sim: SimulatedBus):
    factory = {r: sim.register(1, r) for r in (STS3215.RETURN_DELAY, STS3215.P_COEFFICIENT,
                                               STS3215.ACCELERATION)}
    assert factory == {STS3215.RETURN_DELAY: 250, STS3215.P_COEFFICIENT: 32,
                       STS3215.ACCELERATION: 0}
    arm = _arm(sim)
    arm.connect()
    try:
        writes = plan(CAL, ServoSettings())
        for w in writes:
            assert sim.register(w.servo_id, w.register) == w.value, (w.joint, w.register)
        pan = {w.register: w.value for w in writes if w.joint == "shoulder_pan"}
        assert pan == {STS3215.RETURN_DELAY: 0, STS3215.OPERATING_MODE: 0,
                       STS3215.P_COEFFICIENT: 16, STS3215.I_COEFFICIENT: 0,
                       STS3215.D_COEFFICIENT: 32, STS3215.MIN_POSITION_LIMIT: 794,
                       STS3215.MAX_POSITION_LIMIT: 3302, STS3215.ACCELERATION: 254}
        grip = {w.register: w.value for w in writes if w.joint == "gripper"}
        assert (grip[STS3215.MAX_TORQUE_LIMIT], grip[STS3215.TORQUE_LIMIT],
                grip[STS3215.PROTECTION_CURRENT], grip[STS3215.OVERLOAD_TORQUE]) == (
            500, 500, 250, 25)
        # the arm joints keep their full torque: only the gripper is limited
        assert sim.register(1, STS3215.TORQUE_LIMIT) == 1000
        for i in range(1, 7):
            assert sim.register(i, STS3215.LOCK) == 1
            assert not sim.torque(i)
        assert not arm.torque_enabled
    finally:
        arm.disconnect()


def test_a_servo_already_set_up_is_left_alone(sim: SimulatedBus):
    arm = _arm(sim)
    arm.connect()
    arm.set_torque(True)  # holding a pose
    arm.disconnect()
    sim.clear_frames()
    sim.servos[5].mem[STS3215.ACCELERATION.address] = 10  # one value drifted on one servo
    arm = _arm(sim)
    arm.connect()
    try:
        writes = [P.parse_packet(f) for f in sim.frames() if f[4] == P.Instruction.WRITE]
        # only wrist_roll: torque off, unlock, its one value, lock; the others keep holding
        assert [(p.servo_id, p.params[0]) for p in writes] == [
            (5, 40), (5, 55), (5, STS3215.ACCELERATION.address), (5, 55)]
        assert sim.torque(1) and not sim.torque(5)
        assert sim.register(5, STS3215.ACCELERATION) == 254
    finally:
        arm.disconnect()


def test_a_servo_that_refuses_a_write_is_named_and_the_port_closes(sim: SimulatedBus):
    sim.refuse(3, STS3215.P_COEFFICIENT.address)
    arm = _arm(sim)
    with pytest.raises(ServoConfigError) as e:
        arm.connect()
    assert str(e.value) == ("elbow_flex (servo 3) register p_coefficient (21): wrote 16, the "
                            "servo holds 32")
    assert (e.value.joint, e.value.servo_id) == ("elbow_flex", 3)
    assert not arm.is_connected


def test_a_silent_servo_during_configuration_is_named(sim: SimulatedBus):
    bus = FeetechBus(sim.port_name, timeout_s=0.05, retries=0)
    bus.connect()
    try:
        sim.inject(2, "no_answer", count=None)
        with pytest.raises(ServoConfigError, match=r"^shoulder_lift \(servo 2\) register "
                           r"return_delay \(7\): reading it failed: servo 2 did not answer"):
            configure(bus, CAL, ServoSettings())
    finally:
        bus.disconnect()


def test_configure_can_be_turned_off(sim: SimulatedBus):
    arm = _arm(sim, configure_on_connect=False)
    arm.connect()
    try:
        assert sim.register(1, STS3215.RETURN_DELAY) == 250
        assert sim.register(1, STS3215.MAX_POSITION_LIMIT) == 4095
    finally:
        arm.disconnect()


@pytest.mark.parametrize(("yaml", "path", "msg"), [
    ("p_coefficient: 300", "arm.servo_settings.p_coefficient",
     "must be an integer in 0..254, got 300"),
    ("gripper_max_torque: 0", "arm.servo_settings.gripper_max_torque",
     "must be an integer in 1..1000, got 0"),
    ("return_delay: 1.5", "arm.servo_settings.return_delay",
     "must be an integer in 0..254, got 1.5"),
    ("position_limits: 1", "arm.servo_settings.position_limits", "must be true or false"),
    ("p_gain: 16", "arm.servo_settings.p_gain", "unknown setting"),
])
def test_bad_servo_settings_name_their_yaml_path(tmp_path: Path, yaml: str, path: str,
                                                  msg: str):
    f = tmp_path / "arm.yaml"
    f.write_text(f"arm:\n  port: /dev/null\n  servo_settings:\n    {yaml}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        FeetechArmConfig.from_yaml(f)
    assert e.value.path == f"{f}:{path}"
    assert msg in str(e.value)


def test_the_shipped_file_carries_the_so101_settings():
    s = FeetechArmConfig.from_yaml().servo_settings
    assert (s.return_delay, s.acceleration, s.p_coefficient, s.i_coefficient,
            s.d_coefficient, s.gripper_max_torque) == (0, 254, 16, 0, 32, 500)


# ------------------------------------------------------------------ the servo's own limits


def test_a_goal_beyond_the_eeprom_limit_stops_at_the_limit(sim: SimulatedBus, arm: FeetechArm):
    # below the software's own check: a raw WRITE straight onto the bus
    arm.bus.write_register(1, STS3215.TORQUE_ENABLE, 1)
    arm.bus.write_register(1, STS3215.GOAL_POSITION, 4000)
    settle(sim, arm.bus)
    settle(sim, arm.bus)
    assert sim.position(1) == 3302.0  # Max_Position_Limit, not 4000
    arm.bus.write_register(1, STS3215.GOAL_POSITION, 10)
    settle(sim, arm.bus)
    settle(sim, arm.bus)
    assert sim.position(1) == 794.0


def test_a_write_under_lock_changes_nothing(sim: SimulatedBus, bus: FeetechBus):
    assert bus.read_register(4, STS3215.LOCK) == 1  # a fresh servo starts locked
    bus.write_register(4, STS3215.MIN_POSITION_LIMIT, 1000)  # acknowledged ...
    bus.write_register(4, STS3215.ID, 9)
    assert bus.read_register(4, STS3215.MIN_POSITION_LIMIT) == 0  # ... and not taken
    assert sorted(sim.servos) == [1, 2, 3, 4, 5, 6]
    bus.write_register(4, STS3215.ACCELERATION, 50)  # RAM: written while locked
    assert bus.read_register(4, STS3215.ACCELERATION) == 50
    bus.write_register(4, STS3215.LOCK, 0)
    bus.write_register(4, STS3215.MIN_POSITION_LIMIT, 1000)
    assert bus.read_register(4, STS3215.MIN_POSITION_LIMIT) == 1000


def _min_answer_s(bus: FeetechBus, n: int = 15) -> float:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        bus.ping(2)
        out.append(time.perf_counter() - t)
    return min(out)


def test_the_return_delay_is_waited_before_every_answer(sim: SimulatedBus, bus: FeetechBus):
    bus.write_register(2, STS3215.LOCK, 0)  # the simulated servo starts locked: unlock
    bus.write_register(2, STS3215.RETURN_DELAY, 250)  # 500 µs, as from the factory
    assert _min_answer_s(bus) >= 500e-6
    bus.write_register(2, STS3215.RETURN_DELAY, 254)
    bus.write_register(2, STS3215.RETURN_DELAY, 0)
    bus.write_register(2, STS3215.LOCK, 1)
    assert bus.read_register(2, STS3215.RETURN_DELAY) == 0


def test_present_position_stays_within_one_turn(sim: SimulatedBus, bus: FeetechBus):
    sim.set_position(1, 5000.0)
    sim.set_position(2, -300.0)
    assert bus.read_register(1, STS3215.PRESENT_POSITION) == 4095
    assert bus.read_register(2, STS3215.PRESENT_POSITION) == 0
    bus.write_register(1, STS3215.TORQUE_ENABLE, 1)
    bus.write_register(1, STS3215.GOAL_POSITION, 4095)
    settle(sim, bus)
    assert bus.read_register(1, STS3215.PRESENT_POSITION) == 4095


# ------------------------------------------------------------------ the set-up tools


def test_setup_motors_dry_run_prints_the_plan_and_writes_nothing(monkeypatch, capsys):
    asked: list[str] = []
    monkeypatch.setattr("builtins.input", lambda p="": asked.append(p) or "")
    with SimulatedBus(ids=(1,)) as sim:
        assert main(["setup-motors", "--port", sim.port_name, "--dry-run",
                     "--joint", "gripper"]) == 0
        assert sim.frames() == []
    out = capsys.readouterr().out
    grip = ArmCalibration.load(default_arm_config()).joint("gripper")  # the shipped file's
    assert asked == []
    rows = [ln.split() for ln in out.splitlines() if ln.startswith("gripper")]
    assert [r[2:5] for r in rows] == [
        ["return_delay", "7", "0"], ["operating_mode", "33", "0"],
        ["p_coefficient", "21", "16"], ["i_coefficient", "23", "0"],
        ["d_coefficient", "22", "32"], ["min_position_limit", "9", str(grip.range_min)],
        ["max_position_limit", "11", str(grip.range_max)], ["max_torque_limit", "16", "500"],
        ["protection_current", "28", "250"], ["overload_torque", "36", "25"],
        ["acceleration", "41", "254"], ["torque_limit", "48", "500"]]
    assert "dry run: nothing written" in out


def test_setup_motors_configures_each_servo_it_sets_up(monkeypatch, capsys):
    with SimulatedBus(ids=()) as sim:
        sim.attach(1)
        monkeypatch.setattr("builtins.input", lambda p="": "")
        assert main(["setup-motors", "--port", sim.port_name, "--joint", "wrist_flex"]) == 0
        assert sorted(sim.servos) == [4]
        # the shipped wrist_flex range_min
        assert sim.register(4, STS3215.MIN_POSITION_LIMIT) == 965
        assert sim.register(4, STS3215.P_COEFFICIENT) == 16
        assert sim.register(4, STS3215.LOCK) == 1


class _ScriptedUI:
    """The calibration's user: the middle pose at 2048 (the jaw half open), then every joint
    end to end (the jaw about 115 degrees, shut to open, around its middle)."""

    def __init__(self, sim: SimulatedBus) -> None:
        self.sim = sim
        self.calls = 0

    def instruct(self, step: str, message: str) -> None:
        pass

    def confirm(self, step: str) -> bool:
        return True

    def progress(self, ranges: object) -> bool:
        self.calls += 1
        for i in range(1, 7):
            lo, hi = (1400, 2700) if i == 6 else (1000, 3000)
            self.sim.set_position(i, lo if self.calls == 1 else hi)
        return self.calls < 3


@pytest.mark.parametrize("dry", [True, False])
def test_calibrate_writes_the_new_limits_or_in_a_dry_run_only_shows_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        dry: bool):
    f = tmp_path / "arm.yaml"
    with SimulatedBus(speed_ticks_per_s=None) as sim:
        monkeypatch.setattr("solarian_agent.hw.feetech.terminal.TerminalCalibrationUI",
                            lambda: _ScriptedUI(sim))
        assert main(["calibrate", "--port", sim.port_name, "--calibration", str(f)]
                    + (["--dry-run"] if dry else [])) == 0
        limits = [sim.register(1, r) for r in (STS3215.MIN_POSITION_LIMIT,
                                               STS3215.MAX_POSITION_LIMIT)]
        delay = sim.register(1, STS3215.RETURN_DELAY)
    out = capsys.readouterr().out
    row = next(ln.split() for ln in out.splitlines()
               if ln.startswith("shoulder_pan") and "max_position_limit" in ln)
    assert row[2:5] == ["max_position_limit", "11", "2990"]  # 3000 less the 10-tick margin
    if dry:
        assert (limits, delay, f.exists()) == ([0, 4095], 250, False)
        assert "dry run: nothing written, nothing saved" in out
    else:
        assert (limits, delay, f.exists()) == ([1010, 2990], 0, True)
