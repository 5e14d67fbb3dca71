"""``python -m solarian_agent.hw.feetech COMMAND`` (also ``solarian-agent arm COMMAND``): the
first-day tools for an SO-100 / SO-101 on its Feetech bus (docs/hardware.md).

    find-port                      which serial port is the arm's (unplug it when asked)
    setup-motors  --port P         give each new servo its id and baud rate, one at a time
    ping          --port P         does every servo answer; where is each joint
    calibrate     --port P         the guided calibration (homing offsets, ranges, limits)
    import-lerobot FILE | --id ID  take LeRobot's calibration of this arm instead
    teleop        --port P         jog from the keyboard, or --leader-port L: a leader arm
    reach X Y Z   [--pitch D]      joint values for a tool point (and, with a port, go there)

``--sim`` runs a command against simulated servos on a pseudo-terminal.  The calibration file
is the shipped ``config/arm_so101.yaml`` wherever the tool runs, or ``--calibration FILE``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

from solarian_agent.core.errors import ConfigError
from solarian_agent.hw.errors import HardwareError, ServoTimeoutError
from solarian_agent.hw.feetech import lerobot, servo_config, setup_tools
from solarian_agent.hw.feetech.arm import FeetechArm, FeetechArmConfig, default_arm_config
from solarian_agent.hw.feetech.bus import FeetechBus
from solarian_agent.hw.feetech.calibration import (
    SO101_IDS,
    SO101_JOINTS,
    ArmCalibration,
    default_so101,
    run_guided_calibration,
    with_held_offsets,
)
from solarian_agent.hw.feetech.protocol import STS3215
from solarian_agent.hw.feetech.simbus import SimulatedBus
from solarian_agent.hw.tables import format_table

from ...cli_common import CliParser

COMMANDS = ("find-port", "setup-motors", "ping", "calibrate", "import-lerobot", "teleop",
            "reach")


def _parser() -> argparse.ArgumentParser:
    ap = CliParser(prog="solarian-agent arm",
                                 description="Set-up tools for an SO-101 arm on a Feetech bus.")
    ap.add_argument("command", choices=COMMANDS,
                    help="find-port (which port is the arm's), setup-motors (servo ids one by "
                         "one), ping, calibrate, import-lerobot (a LeRobot calibration), teleop")
    ap.add_argument("file", nargs="?", help="import-lerobot: the LeRobot calibration JSON")
    ap.add_argument("--port", help="serial port, e.g. /dev/serial/by-id/usb-1a86_...")
    ap.add_argument("--sim", action="store_true", help="use simulated servos")
    ap.add_argument("--calibration", default="",
                    help=f"the arm's calibration YAML (default {default_arm_config()})")
    ap.add_argument("--baudrate", type=int, default=1_000_000,
                    help="the bus's baud rate (default 1000000)")
    ap.add_argument("--pattern", action="append", default=None,
                    help="find-port: where to look for ports (repeatable; default "
                         + ", ".join(setup_tools.PORT_PATTERNS) + ")")
    ap.add_argument("--joint", action="append", choices=SO101_JOINTS, default=None,
                    help="setup-motors: only these joints (default all, gripper first)")
    ap.add_argument("--id", dest="robot_id", help="import-lerobot: LeRobot's robot id")
    ap.add_argument("--robot-type", default="so101_follower", choices=lerobot.ROBOT_TYPES,
                    help="import-lerobot: LeRobot's robot type (default so101_follower)")
    ap.add_argument("--write-offsets", action="store_true",
                    help="import-lerobot: write the file's homing offsets into the servos")
    ap.add_argument("--dry-run", action="store_true",
                    help="setup-motors / calibrate: print what would be written to the "
                         "servos, write nothing; import-lerobot: only compare")
    ap.add_argument("--leader-port", help="teleop: the leader arm's serial port")
    ap.add_argument("--leader-sim", action="store_true", help="teleop: a simulated leader")
    ap.add_argument("--leader-calibration", default="",
                    help="teleop: the leader's calibration YAML (calibrate --port LEADER "
                         "--calibration FILE makes it)")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["reach"]:  # its own arguments: X Y Z and the pose options
        from solarian_agent.hw.feetech import reach_cli

        return reach_cli.main(argv[1:])
    ap = _parser()
    args = ap.parse_args(argv)
    if args.baudrate not in setup_tools.BAUD_ORDER:
        ap.error(f"--baudrate {args.baudrate} is not one an STS3215 takes: "
                 + ", ".join(map(str, setup_tools.BAUD_ORDER)))
    if args.command == "import-lerobot" and not (args.file or args.robot_id):
        ap.error("import-lerobot needs the LeRobot calibration FILE or --id ROBOT_ID")
    needs_port = args.command in ("setup-motors", "ping", "calibrate", "teleop")
    if needs_port and not (args.port or args.sim):
        try:
            args.port = FeetechArmConfig.from_yaml(args.calibration or None).port
        except (ConfigError, OSError):
            ap.error("give --port (find it with `find-port`) or --sim")
    try:
        with ExitStack() as stack:
            return int(RUN[args.command](args, stack))
    except (HardwareError, ConfigError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


def _calibration_file(args: argparse.Namespace) -> Path:
    return Path(args.calibration) if args.calibration else default_arm_config()


def _settings(args: argparse.Namespace) -> servo_config.ServoSettings:
    """The calibration file's ``arm.servo_settings`` (defaults when there is no file)."""
    path = _calibration_file(args)
    if args.sim or not path.is_file():
        return servo_config.ServoSettings()
    return FeetechArmConfig.from_yaml(path).servo_settings


def _print_plan(writes: list[servo_config.RegisterWrite]) -> None:
    print(format_table(["joint", "id", "register", "addr", "value", "why"],
                       servo_config.plan_rows(writes), right=(1, 3, 4)))


def _arm(args: argparse.Namespace, stack: ExitStack, check_ids: bool = True,
         new_file_ok: bool = False, configure: bool = True) -> FeetechArm:
    """The arm on its port with its calibration file (``new_file_ok``: a file that does not
    exist yet starts from the nominal SO-101 values, for ``calibrate``)."""
    path = _calibration_file(args)
    port = args.port
    cal = None
    if args.sim:
        port = stack.enter_context(SimulatedBus()).port_name
        cal = default_so101()
    elif new_file_ok and not path.is_file():
        cal = default_so101()
    else:
        cal = ArmCalibration.load(path)
    arm = FeetechArm(FeetechArmConfig(port=port, baudrate=args.baudrate,
                                      calibration_file=str(path),
                                      servo_settings=_settings(args),
                                      configure_on_connect=configure), calibration=cal)
    arm.connect(check_ids=check_ids)
    stack.callback(arm.disconnect)
    return arm


# ------------------------------------------------------------------------------ commands
def _find_port(args: argparse.Namespace, stack: ExitStack) -> int:
    patterns = args.pattern or setup_tools.PORT_PATTERNS
    ports = setup_tools.list_ports(patterns)
    print(format_table(["serial ports now"], [[setup_tools.describe_port(p)] for p in ports])
          if ports else "no serial ports now")
    port = setup_tools.find_port(input, patterns)
    print(f"The arm's port is {setup_tools.describe_port(port)}. Plug the cable back in, and "
          f"use --port {port} (or put it in the arm YAML as arm.port).")
    return 0


def _setup_motors(args: argparse.Namespace, stack: ExitStack) -> int:
    joints = args.joint or list(reversed(SO101_JOINTS))
    path = _calibration_file(args)
    cal = ArmCalibration.load(path) if path.is_file() and not args.sim else default_so101()
    settings = _settings(args)
    if args.dry_run:
        print("dry run: each servo would get its id and baud rate, then:")
        _print_plan(servo_config.plan(cal, settings, joints))
        print("dry run: nothing written")
        return 0
    sim = stack.enter_context(SimulatedBus(ids=())) if args.sim else None
    port = sim.port_name if sim is not None else args.port
    rows = []
    for joint in joints:
        target = SO101_IDS[joint]
        if sim is not None:  # a new servo, as it comes out of the box, for each joint
            for i in list(sim.servos):
                sim.detach(i)
            sim.attach(1)
        ans = input(f"Connect only the {joint} servo (it gets id {target}) to the adapter "
                    "board, then press Enter (s to skip, q to quit): ").strip().lower()
        if ans == "q":
            break
        if ans == "s":
            rows.append([joint, "", "", target, args.baudrate, "skipped"])
            continue
        res = setup_tools.setup_motor(port, joint, target, args.baudrate)
        bus = FeetechBus(port, args.baudrate)
        bus.connect()
        try:
            servo_config.configure(bus, cal.with_ids({joint: target}), settings, [joint])
        finally:
            bus.disconnect()
        model = "STS3215" if res.model_number == 777 else f"model {res.model_number}"
        rows.append([joint, res.old_id, res.old_baudrate, res.servo_id, res.baudrate,
                     f"answers as id {res.servo_id} ({model})"])
        print(f"  {joint}: id {res.old_id} at {res.old_baudrate} baud -> id {res.servo_id} at "
              f"{res.baudrate} baud; it answers.")
    print(format_table(["joint", "was id", "was baud", "id", "baud", "check"], rows,
                       right=(1, 2, 3, 4)))
    return 0


def _ping(args: argparse.Namespace, stack: ExitStack) -> int:
    arm = _arm(args, stack, check_ids=False)
    print(f"calibration: {'simulated (nominal)' if args.sim else _calibration_file(args)}")
    silent = []
    for n in arm.joint_names:
        try:
            arm.ping(n)
        except ServoTimeoutError:
            silent.append(n)
        except HardwareError as e:  # answered, with a status flag
            print(f"{n}: {e}")
    rows = []
    if not silent:
        state = arm.read_state()
        for n in arm.joint_names:
            s = state.servos[n]
            pos = state.positions[n]
            rows.append([n, s.servo_id, f"{pos:+.3f} rad", s.raw_position, f"{s.voltage_v:.1f}",
                         f"{s.temperature_c:.0f}", f"{s.load * 100:.0f}%",
                         ", ".join(s.error_flags) or "ok"])
    else:
        cal = arm.calibration
        rows = [[n, cal.joint(n).servo_id, "", "", "", "", "",
                 "no answer" if n in silent else "answers"] for n in arm.joint_names]
    print(format_table(["joint", "id", "position", "raw", "volts", "°C", "load", "status"],
                       rows, right=(1, 2, 3, 4, 5, 6)))
    if silent:
        print(f"{len(silent)} servo(s) do not answer: {', '.join(silent)}. Check their cables "
              "and the supply, and their ids (setup-motors).")
        return 1
    return 0


def _calibrate(args: argparse.Namespace, stack: ExitStack) -> int:
    from solarian_agent.hw.feetech.terminal import TerminalCalibrationUI

    arm = _arm(args, stack, new_file_ok=True, configure=not args.dry_run)
    path = _calibration_file(args)
    base = with_held_offsets(arm.calibration, lambda sid: arm.bus.read_register(
        sid, STS3215.HOMING_OFFSET))
    new = run_guided_calibration(arm.read_raw_positions, TerminalCalibrationUI(),
                                 base=base, set_torque=arm.set_torque)
    writes = servo_config.plan(new, arm.config.servo_settings)
    print("\ndry run: the servos would be brought to these values:" if args.dry_run
          else "\nbringing the servos to these values:")
    _print_plan(writes)
    if args.dry_run:
        print("dry run: nothing written, nothing saved")
        return 0
    out = path if not args.sim else Path("/dev/stdout")
    new.save(out, settings=None if not args.sim else {})
    print(f"\nsaved {out}")
    made = servo_config.configure(arm.bus, new, arm.config.servo_settings)
    print(f"wrote {len(made)} of these {len(writes)} values (the others the servos held "
          "already); each read back and verified")
    return 0


def _import_lerobot(args: argparse.Namespace, stack: ExitStack) -> int:
    src = Path(args.file) if args.file else lerobot.lerobot_file(args.robot_id, args.robot_type)
    motors = lerobot.read_lerobot(src)
    path = _calibration_file(args)
    shipped = ArmCalibration.load(path) if path.is_file() else default_so101()
    new = lerobot.to_arm_calibration(motors, shipped)
    print(f"LeRobot calibration {src}")
    print(format_table(["motor", "id", "drive_mode", "homing_offset", "range_min", "range_max"],
                       lerobot.summary(motors), right=(1, 2, 3, 4, 5)))
    diffs = lerobot.compare(new, shipped)
    print(format_table(["joint", "shipped limits", "imported limits", "differs"], [
        [d.joint, _limits(d.joint, d.shipped), _limits(d.joint, d.imported), d.note or "no"]
        for d in diffs]))
    differ = [d.joint for d in diffs if d.differs]
    print("joints that differ from the shipped limits: " + (", ".join(differ) or "none"))
    if args.port or args.sim:
        _check_offsets(args, stack, motors)
    if args.dry_run:
        print("dry run: nothing written")
        return 0
    new.save(path)
    print(f"saved {path}")
    return 0


def _limits(joint: str, lim: tuple[float, float]) -> str:
    return f"{lim[0]:+.3f} .. {lim[1]:+.3f} rad"


def _check_offsets(args: argparse.Namespace, stack: ExitStack,
                   motors: dict[str, lerobot.LeRobotMotor]) -> None:
    port = args.port
    if args.sim:
        port = stack.enter_context(SimulatedBus()).port_name
    bus = FeetechBus(port, args.baudrate)
    bus.connect()
    stack.callback(bus.disconnect)
    if args.write_offsets:
        lerobot.write_servo_offsets(bus, motors)
        print("wrote the file's homing offsets into the servos")
    wrong = lerobot.check_servo_offsets(bus, motors)
    for name, (held, want) in wrong.items():
        print(f"{name}: the servo holds homing offset {held}, the file says {want}; positions "
              f"would be off by {held - want} ticks (add --write-offsets to write the file's)")
    if not wrong:
        print("every servo holds the file's homing offset")


def _teleop(args: argparse.Namespace, stack: ExitStack) -> int:
    from solarian_agent.hw.feetech.teleop_cli import run_keyboard, run_leader

    arm = _arm(args, stack)
    if not (args.leader_port or args.leader_sim):
        return run_keyboard(arm)
    if args.leader_sim:
        port, cal = stack.enter_context(SimulatedBus()).port_name, default_so101()
    else:
        if not args.leader_calibration:
            raise HardwareError("give --leader-calibration FILE: calibrate the leader arm "
                                f"first (calibrate --port {args.leader_port} --calibration "
                                "leader.yaml)")
        port, cal = args.leader_port, ArmCalibration.load(args.leader_calibration)
    leader = FeetechArm(FeetechArmConfig(port=port, baudrate=args.baudrate,
                                         calibration_file=args.leader_calibration),
                        calibration=cal)
    leader.connect()
    stack.callback(leader.disconnect)
    return run_leader(arm, leader)


RUN = {"find-port": _find_port, "setup-motors": _setup_motors, "ping": _ping,
       "calibrate": _calibrate, "import-lerobot": _import_lerobot, "teleop": _teleop}


__all__ = ["COMMANDS", "main"]
