"""``doctor``'s arm checks: the calibration file, then the servo bus and what each servo holds.

Every check here reads; none writes a register (a doctor that "fixes" an EEPROM on the way
would hide the fault it was asked to find, and the EEPROM takes a limited number of writes).
A servo that does not answer its PING is left out of the later checks, so one unplugged servo
is one line, not one per check.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from solarian_agent.bringup.findings import (
    Finding,
    arm,
    bringup,
    command,
    fail,
    ok,
    one_line,
    warn,
)
from solarian_agent.bringup.profile import RobotProfile
from solarian_agent.core.errors import ConfigError
from solarian_agent.hw.errors import (
    BusError,
    HardwareError,
    ServoStatusError,
    ServoTimeoutError,
    decode_status_flags,
)
from solarian_agent.hw.feetech import protocol as P
from solarian_agent.hw.feetech.arm import FeetechArmConfig
from solarian_agent.hw.feetech.bus import FeetechBus
from solarian_agent.hw.feetech.calibration import (
    RAD_PER_TICK,
    SO101_IDS,
    SO101_LIMITS,
    ArmCalibration,
    JointCalibration,
    default_so101,
)
from solarian_agent.hw.feetech.controller_config import ArmControllerConfig
from solarian_agent.hw.feetech.protocol import STS3215, Register
from solarian_agent.hw.feetech.servo_config import ServoSettings, joint_writes

SIM_PORT = "sim"  # the port a profile written on the simulator names: not a device
# A joint whose recorded raw range is under this share of its hard-limit travel was not moved
# end to end during the calibration: its limits are narrower than the arm can go.
MIN_TRAVEL_SHARE = 0.5
# Two servos on one supply reading further apart than this: a poor contact along the chain.
MAX_SUPPLY_SPREAD_V = 1.0
SUPPLY_FIX = ("the servos' power supply: 7.4 V servos want about 7.4 V, 12 V servos 12 V; "
              "check its plug on the adapter board and the cable along the chain")


@dataclass(frozen=True)
class ArmSetup:
    """What the bus checks need from the profile and the arm's calibration file."""

    port: str
    ids: Mapping[str, int]  # joint -> servo id, the order the joints are checked in
    baudrate: int = 1_000_000
    calibration: ArmCalibration | None = None
    calibration_file: str = ""
    settings: ServoSettings = field(default_factory=ServoSettings)
    configure_on_connect: bool = True


# ------------------------------------------------------------------------------ the file
def load_arm_setup(profile: RobotProfile) -> tuple[ArmSetup, list[Finding]]:
    """The profile's arm, with its calibration file read and judged (check "arm calibration"):
    the file exists and loads, names every joint, and each range is plausible."""
    name = "arm calibration"
    port = profile.arm_port
    setup = ArmSetup(port=port, ids=dict(profile.servo_ids) or dict(SO101_IDS))
    path = profile.arm_calibration_file
    calibrate = arm("calibrate", port or "PORT")
    if not path:
        return setup, [fail(name, "the profile names no arm calibration file",
                            bringup("arm_calibration"))]
    p = Path(path).expanduser()
    if not p.is_file():
        return setup, [fail(name, f"{p} does not exist", f"{calibrate} (or "
                            f"{bringup('arm_calibration')})")]
    try:
        cfg = FeetechArmConfig.from_yaml(p)
        cal = ArmCalibration.load(p)
    except (ConfigError, HardwareError, OSError) as e:
        return setup, [fail(name, f"{p} does not load: {one_line(e)}", calibrate)]
    setup = replace(setup, baudrate=cfg.baudrate, calibration=cal, calibration_file=str(p),
                    settings=cfg.servo_settings, configure_on_connect=cfg.configure_on_connect,
                    ids=dict(profile.servo_ids) or cal.ids)
    return setup, [judge_ranges(cal, setup.ids, str(p), calibrate)]


def judge_ranges(cal: ArmCalibration, ids: Mapping[str, int], path: str, fix: str) -> Finding:
    name = "arm calibration"
    missing = [j for j in ids if j not in cal.names]
    if missing:
        return fail(name, f"{path} has no calibration for {', '.join(missing)}", fix)
    narrow = []
    for j in cal.joints:
        lim = SO101_LIMITS.get(j.name)
        if lim is None:  # a joint this package has no hard limits for: nothing to compare
            continue
        travel = (lim[1] - lim[0]) / RAD_PER_TICK
        width = j.range_max - j.range_min
        if width < MIN_TRAVEL_SHARE * travel:
            narrow.append(f"{j.name} {j.range_min}..{j.range_max} ({width} ticks, "
                          f"{math.degrees(width * RAD_PER_TICK):.0f}° of its "
                          f"{math.degrees(travel * RAD_PER_TICK):.0f}°)")
    if narrow:
        return warn(name, f"{path}: ranges too narrow to be the joints' travel: "
                    f"{'; '.join(narrow)} (moved end to end during the calibration?)", fix)
    nominal = default_so101()
    if all(j.name in nominal.names and
           (j.range_min, j.range_max) == (nominal.joint(j.name).range_min,
                                          nominal.joint(j.name).range_max)
           for j in cal.joints):
        return warn(name, f"{path} holds the nominal SO-101 values, not a calibration of "
                    "this arm", fix)
    return ok(name, f"{path}: {len(cal.joints)} joints, every range plausible")


# ------------------------------------------------------------------------------ the bus
@dataclass
class _Inventory:
    """The servos that answered (joint -> id), filled by the id check for the later ones."""

    answering: dict[str, int] = field(default_factory=dict)


Guard = Callable[[str, Callable[[], list[Finding]]], list[Finding]]


def check_bus(setup: ArmSetup, guard: Guard, servo_timeout_s: float) -> list[Finding]:
    """The servo bus and every servo on it: "servo bus", "servo ids", "servo settings",
    "supply voltage", "homing offsets".  ``guard`` runs each check, turning an exception
    into a finding naming it."""
    port = setup.port
    if port == SIM_PORT:
        return [warn("servo bus", "port 'sim': this profile was written on the simulator; no "
                     "servo bus to check", f"{bringup('servos')} with the arm plugged in")]
    if not port:
        return [fail("servo bus", "the profile names no servo port", bringup("servos"))]
    bus = FeetechBus(port, setup.baudrate, timeout_s=servo_timeout_s, retries=1)
    try:
        bus.connect()
    except HardwareError as e:
        return [fail("servo bus", _open_failure(port, e),
                     f"plug the adapter in and power it, then {arm('ping', port)}; a new "
                     f"name: {command('arm', 'find-port')}")]
    try:
        inv = _Inventory()
        out = [ok("servo bus", f"{port} opens at {setup.baudrate} baud")]
        out += guard("servo ids", lambda: [check_ids(bus, setup, inv)])
        if inv.answering:
            out += guard("servo settings", lambda: [check_settings(bus, setup, inv)])
            out += guard("supply voltage", lambda: [check_voltage(bus, setup, inv)])
            if setup.calibration is not None:
                out += guard("homing offsets", lambda: [check_offsets(bus, setup, inv)])
        return out
    finally:
        bus.disconnect()


def _open_failure(port: str, e: HardwareError) -> str:
    if not os.path.exists(port):
        return f"{port} does not exist (the adapter unplugged, or it has another name now)"
    cause = e.__cause__
    return f"{port} does not open: {one_line(cause if cause is not None else e)}"


def check_ids(bus: FeetechBus, setup: ArmSetup, inv: _Inventory) -> Finding:
    """Every joint's id answers a PING, with no status flag, as an STS3215."""
    name = "servo ids"
    silent: list[str] = []
    wrong: list[str] = []
    flagged: list[str] = []
    for joint, sid in setup.ids.items():
        try:
            err = bus.ping(sid)
        except ServoTimeoutError:
            silent.append(f"{joint} (id {sid})")
            continue
        except BusError as e:  # garbled after the retries: noise on the line
            wrong.append(f"{joint} (id {sid}) answers garbled: {one_line(e)}")
            continue
        inv.answering[joint] = sid
        if err:
            flagged.append(f"{joint} (id {sid}) reports {', '.join(decode_status_flags(err))}")
        model = _read(bus, sid, STS3215.MODEL_NUMBER)
        if model != P.STS3215_MODEL_NUMBER:
            wrong.append(f"{joint} (id {sid}) is model {model}, not an STS3215 "
                         f"({P.STS3215_MODEL_NUMBER})")
    port = setup.port
    if silent and not inv.answering:
        return fail(name, f"no servo answers on {port} at {setup.baudrate} baud (ids "
                    f"{', '.join(str(i) for i in setup.ids.values())})",
                    "switch the servos' supply on and check the cable from the adapter to the "
                    f"first servo; then {arm('ping', port)}")
    if silent:
        first = silent[0].split()[0]
        return fail(name, f"{' and '.join(silent)} do{'es' if len(silent) == 1 else ''} not "
                    f"answer ({len(inv.answering)} of {len(setup.ids)} do)",
                    f"check that servo's cable (and the one before it in the chain); a servo "
                    f"that lost its id: {arm('setup-motors', port, '--joint', first)} with it "
                    "alone on the bus")
    if wrong:
        return fail(name, "; ".join(wrong), f"check the bus cable; {arm('ping', port)}")
    if flagged:
        return fail(name, "; ".join(flagged), "power the servos off and on (the protection "
                    f"latches), check the supply and that nothing blocks the joint; "
                    f"{arm('ping', port)}")
    return ok(name, f"all {len(inv.answering)} servos answer (ids "
              f"{', '.join(str(i) for i in inv.answering.values())}), each an STS3215")


def _read(bus: FeetechBus, sid: int, reg: Register) -> int:
    """A register's value; a servo with a status flag set still sends its reading."""
    try:
        return bus.read_register(sid, reg)
    except ServoStatusError as e:
        if len(e.data) == reg.size:
            return P.decode_value(e.data, reg.sign_bit)
        raise


def _joint(setup: ArmSetup, joint: str, sid: int) -> JointCalibration:
    cal = setup.calibration
    if cal is not None and joint in cal.names:
        return replace(cal.joint(joint), servo_id=sid)
    nominal = default_so101()
    base = nominal.joint(joint) if joint in nominal.names else nominal.joints[0]
    return replace(base, name=joint, servo_id=sid)


def check_settings(bus: FeetechBus, setup: ArmSetup, inv: _Inventory) -> Finding:
    """What servo_config writes into each servo's EEPROM against what the servo holds.  Only
    EEPROM registers are compared: the RAM ones (acceleration, the gripper's Torque_Limit)
    fall back to the EEPROM's values at every power-up and are written at connect, so a
    difference there says nothing about the servo."""
    name = "servo settings"
    settings = setup.settings
    if setup.calibration is None:  # no calibrated range to compare the position limits with
        settings = replace(settings, position_limits=False)
    differ: list[str] = []
    checked = 0
    for joint, sid in inv.answering.items():
        for w in joint_writes(_joint(setup, joint, sid), settings):
            if w.register.address >= STS3215.EEPROM_END:
                continue
            checked += 1
            held = _read(bus, sid, w.register)
            if held != w.value:
                differ.append(f"{joint} {w.register.name} holds {held}, expects {w.value}")
    if not differ:
        return ok(name, f"{checked} EEPROM values match servo_settings and the calibrated "
                  "ranges")
    shown = "; ".join(differ[:4]) + (f" (+{len(differ) - 4} more)" if len(differ) > 4 else "")
    cal = setup.calibration_file or "the calibration file"
    fix = (f"{arm('teleop', setup.port, '--calibration', cal)}: connecting writes and verifies "
           "them (then quit with Esc)")
    if setup.configure_on_connect:
        return warn(name, f"{shown}; the arm writes them as it connects "
                    "(configure_on_connect)", fix)
    return fail(name, f"{shown}; configure_on_connect is off, so nothing writes them", fix)


def check_voltage(bus: FeetechBus, setup: ArmSetup, inv: _Inventory,
                  limits: ArmControllerConfig | None = None) -> Finding:
    """Each servo's present supply voltage inside the controller's band (the one it warns
    outside of while the arm runs), and the servos agreeing with each other."""
    name = "supply voltage"
    c = limits or ArmControllerConfig()
    lo, hi = c.warn_voltage_low_v, c.warn_voltage_high_v
    volts = {j: _read(bus, sid, STS3215.PRESENT_VOLTAGE) / 10.0
             for j, sid in inv.answering.items()}
    outside = [f"{j} {v:.1f} V" for j, v in volts.items() if not lo <= v <= hi]
    if outside:
        return fail(name, f"{', '.join(outside)}: outside {lo:.1f}..{hi:.1f} V",
                    SUPPLY_FIX)
    vmin, vmax = min(volts.values()), max(volts.values())
    if vmax - vmin > MAX_SUPPLY_SPREAD_V:
        low = min(volts, key=lambda j: volts[j])
        return warn(name, f"servos read {vmin:.1f}..{vmax:.1f} V ({low} lowest): more than "
                    f"{MAX_SUPPLY_SPREAD_V:.1f} V apart on one supply", SUPPLY_FIX)
    span = f"{vmin:.1f} V" if vmax == vmin else f"{vmin:.1f}..{vmax:.1f} V"
    return ok(name, f"{span} on {'every servo' if len(volts) > 1 else 'the servo'} "
              f"(range {lo:.1f}..{hi:.1f} V)")


def check_offsets(bus: FeetechBus, setup: ArmSetup, inv: _Inventory) -> Finding:
    """The calibration belongs to this arm: each servo's stored Homing_Offset (EEPROM; the
    servo reports ``actual - offset``) equals the file's.  A file calibrated on another arm,
    or a servo reset or swapped since, holds other offsets: every range in the file is then
    off by the difference."""
    name = "homing offsets"
    cal = setup.calibration
    assert cal is not None
    held: dict[str, int] = {}
    differ: list[str] = []
    for joint, sid in inv.answering.items():
        if joint not in cal.names:
            continue
        held[joint] = _read(bus, sid, STS3215.HOMING_OFFSET)
        want = cal.joint(joint).homing_offset
        if held[joint] != want:
            differ.append(f"{joint} {held[joint]}/{want}")
    path = setup.calibration_file
    if not differ:
        return ok(name, f"every servo holds {Path(path).name}'s homing offset: the "
                  "calibration is this arm's")
    port = setup.port
    # `arm calibrate` records the offsets the servos hold, so calibrating into the same file
    # makes it this arm's; servos holding LeRobot's offsets may rather take LeRobot's file
    fix = f"calibrate this arm: {arm('calibrate', port, '--calibration', path)}"
    if any(v != 0 for v in held.values()):
        lerobot = command("arm", "import-lerobot", "--id", "ID", "--port", port,
                          "--calibration", path)
        fix += (f"; or, as these servos hold LeRobot's offsets, take this arm's own LeRobot "
                f"calibration (ID: the id LeRobot calibrated it under): {lerobot}")
    return fail(name, f"{path} is not this arm's calibration: servo/file homing offsets "
                f"{', '.join(differ)} (a file from another arm, or servos reset since)", fix)


def arm_findings(profile: RobotProfile, guard: Guard, servo_timeout_s: float
                 ) -> list[Finding]:
    """The calibration file's finding, then the bus's."""
    setup, out = load_arm_setup(profile)
    return out + check_bus(setup, guard, servo_timeout_s)


__all__ = ["MIN_TRAVEL_SHARE", "SIM_PORT", "ArmSetup", "arm_findings", "check_bus",
           "check_ids", "check_offsets", "check_settings", "check_voltage", "judge_ranges",
           "load_arm_setup"]
