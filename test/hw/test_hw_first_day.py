"""The first-day tools over the pseudo-terminal servo bus: find-port, setup-motors, ping (the
shipped calibration found from anywhere), import-lerobot and keyboard teleop output."""

from __future__ import annotations

import io
import json
import math
import os
from pathlib import Path

import pytest

from solarian_agent.hw.errors import CalibrationError
from solarian_agent.hw.feetech import FeetechArm, FeetechArmConfig
from solarian_agent.hw.feetech import protocol as P
from solarian_agent.hw.feetech.arm import default_arm_config
from solarian_agent.hw.feetech.calibration import ArmCalibration, default_so101
from solarian_agent.hw.feetech.cli import main
from solarian_agent.hw.feetech.protocol import STS3215
from solarian_agent.hw.feetech.setup_tools import (
    SetupError,
    find_single_servo,
    list_ports,
    setup_motor,
)
from solarian_agent.hw.feetech.simbus import SimulatedBus
from solarian_agent.testing.lerobot_files import so101_follower

ROOT = Path(__file__).resolve().parents[2]


def _answers(monkeypatch, answer):
    """input() answered by ``answer(prompt)``."""
    prompts: list[str] = []

    def fake(prompt: str = "") -> str:
        prompts.append(prompt)
        return answer(prompt)

    monkeypatch.setattr("builtins.input", fake)
    return prompts


# ------------------------------------------------------------------------------ ping
def test_ping_finds_the_shipped_calibration_from_any_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # not the source tree
    assert default_arm_config() == ROOT / "config" / "arm_so101.yaml"
    with SimulatedBus() as sim:
        assert main(["ping", "--port", sim.port_name]) == 0
    out = capsys.readouterr().out
    assert f"calibration: {ROOT / 'config' / 'arm_so101.yaml'}" in out
    lines = out.splitlines()
    header = next(i for i, ln in enumerate(lines) if ln.startswith("joint"))
    assert set(lines[header + 1]) <= {"-", " "}  # a rule, not a Python repr
    rows = {ln.split()[0]: ln for ln in lines[header + 2:] if ln.strip()}
    assert set(rows) == {"shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex",
                         "wrist_roll", "gripper"}
    assert "+0.000 rad" in rows["elbow_flex"] and "+0.000 rad" in rows["gripper"]
    assert "ServoReading" not in out and "{" not in out


def test_ping_names_a_silent_servo_and_fails(capsys):
    with SimulatedBus() as sim:
        sim.detach(5)
        assert main(["ping", "--port", sim.port_name]) == 1
    out = capsys.readouterr().out
    row = next(ln for ln in out.splitlines() if ln.startswith("wrist_roll"))
    assert "no answer" in row
    assert "1 servo(s) do not answer: wrist_roll" in out


def test_ping_with_a_missing_calibration_file_is_one_line(tmp_path, capsys):
    with SimulatedBus() as sim:
        code = main(["ping", "--port", sim.port_name, "--calibration",
                     str(tmp_path / "nope.yaml")])
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope.yaml does not exist" in err[0]


def test_a_bad_baud_rate_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["ping", "--sim", "--baudrate", "12345"])
    assert e.value.code == 2
    assert "--baudrate 12345 is not one an STS3215 takes" in capsys.readouterr().err


def test_calibrate_into_a_new_file_starts_from_the_nominal_arm(tmp_path, monkeypatch, capsys):
    # a leader arm's first calibration: its file does not exist yet; Enter at once (nothing
    # moved) is refused by name, after the procedure ran on the bus
    monkeypatch.setattr("sys.stdin", io.StringIO("\n\n\n"))
    with SimulatedBus() as sim:
        code = main(["calibrate", "--port", sim.port_name, "--calibration",
                     str(tmp_path / "leader.yaml")])
        assert not any(sim.torque(i) for i in range(1, 7))  # torque off for hand moving
    assert code == 1
    err = capsys.readouterr().err
    assert "joint 'shoulder_pan' moved only 0 ticks during calibration" in err
    assert not (tmp_path / "leader.yaml").exists()


# ------------------------------------------------------------------------------ find-port
def test_find_port_names_the_port_that_vanished(tmp_path, monkeypatch, capsys):
    a, b = SimulatedBus(), SimulatedBus()
    try:
        (tmp_path / "usb-arm").symlink_to(a.port_name)
        (tmp_path / "usb-other").symlink_to(b.port_name)
        pattern = str(tmp_path / "usb-*")
        assert list_ports([pattern]) == [str(tmp_path / "usb-arm"), str(tmp_path / "usb-other")]
        prompts = _answers(monkeypatch, lambda p: a.stop() or "")  # "unplug": the pty goes
        assert main(["find-port", "--pattern", pattern]) == 0
    finally:
        a.stop()
        b.stop()
    out = capsys.readouterr().out
    assert "Unplug the arm's USB cable" in prompts[0]
    assert f"The arm's port is {tmp_path / 'usb-arm'}" in out


def test_find_port_with_a_by_id_link_and_its_device(tmp_path, monkeypatch, capsys):
    """A real adapter shows as /dev/ttyACM0 and as its /dev/serial/by-id/ link: both vanish
    on unplugging, one device; the stable by-id name is the answer."""
    with SimulatedBus() as other:
        a = SimulatedBus()
        by_id = tmp_path / "by-id"
        by_id.mkdir()
        (by_id / "usb-1a86_arm-if00").symlink_to(a.port_name)
        (tmp_path / "ttyACM9").symlink_to(a.port_name)
        (tmp_path / "ttyACM8").symlink_to(other.port_name)
        _answers(monkeypatch, lambda p: a.stop() or "")
        assert main(["find-port", "--pattern", str(tmp_path / "ttyACM*"), "--pattern",
                     str(by_id / "*")]) == 0  # the by-id link listed last
    assert f"The arm's port is {by_id / 'usb-1a86_arm-if00'}" in capsys.readouterr().out


def test_find_port_when_nothing_vanished(tmp_path, monkeypatch, capsys):
    with SimulatedBus() as a:
        (tmp_path / "usb-arm").symlink_to(a.port_name)
        _answers(monkeypatch, lambda p: "")
        assert main(["find-port", "--pattern", str(tmp_path / "usb-*")]) == 1
    assert "no port vanished" in capsys.readouterr().err


# ------------------------------------------------------------------------------ setup-motors
def test_setup_motors_one_at_a_time_then_the_arm_answers(monkeypatch, capsys):
    """Six new servos (all id 1; two of them left at other baud rates), plugged in one at a
    time when asked; afterwards the whole chain answers as the arm."""
    bauds = {"gripper": 115_200, "wrist_roll": 1_000_000, "wrist_flex": 500_000}
    done = []
    with SimulatedBus(ids=()) as sim:
        def plug(prompt: str) -> str:
            for i in list(sim.servos):  # unplug the one set up before
                done.append(sim.detach(i))
            joint = prompt.split("Connect only the ")[1].split(" servo")[0]
            sim.attach(1, baudrate=bauds.get(joint, 1_000_000))
            return ""

        prompts = _answers(monkeypatch, plug)
        assert main(["setup-motors", "--port", sim.port_name]) == 0
        for i in list(sim.servos):
            done.append(sim.detach(i))
        assert len(prompts) == 6 and "gripper servo (it gets id 6)" in prompts[0]
        assert sorted(s.servo_id for s in done) == [1, 2, 3, 4, 5, 6]
        assert all(s.baudrate == 1_000_000 for s in done)
        for s in done:  # the whole chain, cabled together
            sim.reattach(s)
        arm = FeetechArm(FeetechArmConfig(port=sim.port_name),
                         calibration=ArmCalibration.load(default_arm_config()))
        arm.connect()  # pings every id
        assert set(arm.read_state().positions) == set(arm.joint_names)
        arm.disconnect()
    out = capsys.readouterr().out
    assert "gripper: id 1 at 115200 baud -> id 6 at 1000000 baud; it answers." in out
    row = next(ln for ln in out.splitlines() if ln.startswith("wrist_flex"))
    assert "500000" in row and "answers as id 4 (STS3215)" in row


def test_setup_motor_refuses_two_servos_and_none():
    with SimulatedBus(ids=(1, 7)) as sim, pytest.raises(
            SetupError, match="2 servos answer at 1000000 baud .* connect only"):
        setup_motor(sim.port_name, "gripper", 6)
    with SimulatedBus(ids=()) as sim, pytest.raises(Exception, match="no servo answers"):
        find_single_servo(sim.port_name, bauds=(1_000_000, 115_200))


def test_a_servo_at_another_speed_is_deaf_until_found(tmp_path):
    with SimulatedBus(ids=()) as sim:
        sim.attach(3, baudrate=57_600)
        assert find_single_servo(sim.port_name).baudrate == 57_600
        res = setup_motor(sim.port_name, "elbow_flex", 3, 1_000_000)
        assert (res.old_id, res.old_baudrate, res.servo_id, res.model_number) == \
            (3, 57_600, 3, P.STS3215_MODEL_NUMBER)
        assert sim.servos[3].baudrate == 1_000_000


# ------------------------------------------------------------------------------ LeRobot
# a follower as LeRobot's calibrate leaves it (values of a real SO-101's file)
LEROBOT = so101_follower()


def _lerobot_home(tmp_path: Path, monkeypatch, doc=LEROBOT) -> Path:
    monkeypatch.setenv("HF_LEROBOT_CALIBRATION", str(tmp_path / "cal"))
    path = tmp_path / "cal" / "robots" / "so101_follower" / "my_follower.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc, indent=4))
    return path


def test_import_lerobot_by_id_says_which_joints_differ(tmp_path, monkeypatch, capsys):
    _lerobot_home(tmp_path, monkeypatch)
    out_file = tmp_path / "arm.yaml"
    out_file.write_text(default_arm_config().read_text())
    assert main(["import-lerobot", "--id", "my_follower", "--calibration", str(out_file)]) == 0
    out = capsys.readouterr().out
    assert "robots/so101_follower/my_follower.json" in out
    # the jaw's recorded travel is 2024..3452: +-714 ticks about its middle, +-62.8 degrees,
    # so its upper limit is narrower than the published 100 degrees
    assert "joints that differ from the shipped limits: wrist_flex, gripper\n" in out
    row = next(ln for ln in out.splitlines() if ln.startswith("wrist_flex") and "rad" in ln)
    assert "lower limit -1.393 rad instead of -1.658 rad" in row  # zero mid-range
    cal = ArmCalibration.load(out_file)
    pan = cal.joint("shoulder_pan")
    assert (pan.homing_offset, pan.range_min, pan.range_max) == (-1365, 746, 3477)
    assert pan.to_units(746) == pytest.approx(math.radians((746 - 2111.5) * 360 / 4095))
    assert cal.joint("wrist_roll").lower == pytest.approx(-2.7438)  # the hard limit, rounded in
    g = cal.joint("gripper")  # the jaw angle, zero at the middle of its range
    assert g.homing_offset == 1437
    assert g.to_units(3452) == pytest.approx(math.radians((3452 - 2738) * 360 / 4095))
    assert "port: /dev/ttyACM0" in out_file.read_text()  # the file's settings are kept


def test_import_lerobot_checks_and_writes_the_servos_homing_offsets(tmp_path, monkeypatch,
                                                                     capsys):
    path = _lerobot_home(tmp_path, monkeypatch)
    out_file = tmp_path / "arm.yaml"
    with SimulatedBus() as sim:
        assert main(["import-lerobot", str(path), "--port", sim.port_name, "--calibration",
                     str(out_file), "--dry-run"]) == 0
        out = capsys.readouterr().out
        assert "shoulder_pan: the servo holds homing offset 0, the file says -1365" in out
        assert "dry run: nothing written" in out and not out_file.exists()
        assert main(["import-lerobot", str(path), "--port", sim.port_name, "--calibration",
                     str(out_file), "--write-offsets"]) == 0
        out = capsys.readouterr().out
        assert "every servo holds the file's homing offset" in out
        # the pose LeRobot calls the middle of shoulder_pan's range now reads as zero
        mid = (746 + 3477) / 2
        sim.set_position(1, (mid + LEROBOT["shoulder_pan"]["homing_offset"]) % 4096)
        arm = FeetechArm(FeetechArmConfig(port=sim.port_name),
                         calibration=ArmCalibration.load(out_file))
        arm.connect()
        assert abs(arm.read_state().positions["shoulder_pan"]) < 0.002
        arm.disconnect()


@pytest.mark.parametrize("edit,match", [
    (lambda d: d.pop("gripper"), r"missing: \['gripper'\]"),
    (lambda d: d["elbow_flex"].update(range_min="901"), r"elbow_flex.range_min: expected a whole"),
    (lambda d: d["wrist_flex"].update(drive_mode=3), r"wrist_flex.drive_mode: expected 0 or 1"),
    (lambda d: d["shoulder_lift"].update(range_max=100), r"shoulder_lift: range 822..100"),
])
def test_bad_lerobot_files_name_the_motor_and_field(tmp_path, monkeypatch, capsys, edit, match):
    doc = json.loads(json.dumps(LEROBOT))
    edit(doc)
    path = _lerobot_home(tmp_path, monkeypatch, doc)
    assert main(["import-lerobot", str(path), "--calibration", str(tmp_path / "a.yaml")]) == 1
    import re

    assert re.search(match, capsys.readouterr().err)


# ------------------------------------------------------------------------------ teleop
def test_keyboard_teleop_lines_use_whole_joint_names(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("qqoxq\x1b"))
    assert main(["teleop", "--sim"]) == 0
    out = capsys.readouterr().out
    assert "jog shoulder_pan +: shoulder_pan +0.0" in out
    assert "wrist_roll +0.00 rad" in out and "gripper " in out and " mm" in out
    assert "open the gripper:" in out and "e-stop:" in out
    # refused while latched: said as a sentence, no exception class names
    assert "  E-stop is latched (operator e-stop (teleop key)); reset it before commanding " \
           "motion." in out
    assert "Error:" not in out and "EStopLatchedError" not in out


def test_the_pty_is_gone_after_stop():
    sim = SimulatedBus()
    name = sim.port_name
    assert os.path.exists(name)
    sim.stop()
    assert not os.path.exists(name)


def test_calibrate_records_the_homing_offsets_the_servos_hold(tmp_path, monkeypatch, capsys):
    """Ranges are measured in the ticks the servos report (actual - their offset), so the file
    must name the offsets these servos hold, not an older file's: else the file reads as
    another arm's calibration."""
    from solarian_agent.hw.feetech import cli as feetech_cli
    from solarian_agent.hw.feetech.bus import FeetechBus
    from solarian_agent.hw.feetech.calibration import with_held_offsets
    from solarian_agent.hw.feetech.lerobot import LeRobotMotor, write_servo_offsets

    held = {1: 150, 2: -320, 3: 0, 4: 1000, 5: -7, 6: 42}
    with SimulatedBus() as sim:
        bus = FeetechBus(sim.port_name)
        bus.connect()
        try:
            write_servo_offsets(bus, {f"j{i}": LeRobotMotor(f"j{i}", i, 0, off, 0, 4095)
                                      for i, off in held.items()})
            got = with_held_offsets(default_so101(), lambda sid: bus.read_register(
                sid, STS3215.HOMING_OFFSET))
        finally:
            bus.disconnect()
        assert {j.servo_id: j.homing_offset for j in got.joints} == held
        # and `arm calibrate` starts its calibration from them
        seen = {}

        def capture(read_raw, ui, base=None, **kw):
            seen.update({j.servo_id: j.homing_offset for j in base.joints})
            raise CalibrationError("stopped by the test")

        monkeypatch.setattr(feetech_cli, "run_guided_calibration", capture)
        assert main(["calibrate", "--port", sim.port_name, "--calibration",
                     str(tmp_path / "arm.yaml")]) == 1
    assert seen == held
