"""``solarian-agent arm reach X Y Z [--pitch DEG] [--roll DEG] [--dry-run] [--json]``.

Prints the joint values (LeRobot degrees) that put the tool point at X Y Z (metres, the arm's
base frame, the table top at z = 0) and, with a port (or ``--sim``) and without ``--dry-run``,
moves the arm there slowly through the controller: the joint limits, the speed clamp, the
workspace box and the e-stop latch all apply, as to any other command.  A bring-up and
teaching tool: touch a mark on the table and see whether the arm lands where it should.

Exit status: 0 reached (or solved, with --dry-run / no port), 2 a bad argument, 3 unreachable
(one line saying why), 1 a hardware or configuration error.
"""

from __future__ import annotations

import json
import math
import sys
import threading
from collections.abc import Callable, Sequence
from contextlib import ExitStack

from solarian_agent.arm.kinematics import ARM_JOINTS, ArmModel
from solarian_agent.arm.reach import Reach, ReachError, solve_reach
from solarian_agent.core.clock import Clock, SystemClock
from solarian_agent.core.errors import ConfigError
from solarian_agent.hw.errors import HardwareError

from ...cli_common import CliParser

EXIT_UNREACHABLE = 3
SLOW_RAD_S = 0.35  # the speed a reach moves at: slow enough to stop by hand
ARRIVED_RAD = math.radians(1.0)


def number(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(text)
    return v


def _parser() -> CliParser:
    ap = CliParser(prog="solarian-agent arm reach",
                   description="Joint values (LeRobot degrees) that put the tool point at X Y Z "
                               "(metres, base frame, table top z = 0); with a port, go there.")
    for axis in "XYZ":
        ap.add_argument(axis.lower(), type=number, metavar=axis, help=f"{axis} in metres")
    ap.add_argument("--pitch", type=number, default=None,
                    help="degrees below the horizontal (90 = straight down; default: the "
                         "steepest that reaches)")
    ap.add_argument("--roll", type=number, default=0.0,
                    help="wrist roll in degrees (0: the jaws close in the arm's vertical plane)")
    ap.add_argument("--dry-run", action="store_true", help="only print, never move")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--port", help="the arm's serial port: move there")
    ap.add_argument("--sim", action="store_true", help="move simulated servos")
    ap.add_argument("--calibration", default="", help="the arm's calibration YAML")
    ap.add_argument("--timeout", type=number, default=20.0,
                    help="seconds to wait for the arm to arrive (default 20)")
    return ap


def main(argv: Sequence[str], out: Callable[[str], None] = print,
         clock: Clock | None = None) -> int:
    ap = _parser()
    args = ap.parse_args(list(argv))
    if args.pitch is not None and not -90.0 <= args.pitch <= 90.0:
        ap.error(f"--pitch {args.pitch:g} must be within -90 .. 90 degrees")
    if not args.timeout > 0:
        ap.error(f"--timeout {args.timeout:g} must be > 0")
    model = ArmModel.default()
    try:
        reach = solve_reach(model, (args.x, args.y, args.z),
                            None if args.pitch is None else math.radians(args.pitch),
                            math.radians(args.roll))
    except ReachError as e:
        print(f"unreachable: {e}", file=sys.stderr)
        return EXIT_UNREACHABLE
    out(json.dumps(reach.as_json()) if args.json else _describe(reach))
    if args.dry_run or not (args.port or args.sim):
        return 0
    try:
        with ExitStack() as stack:
            return _move(args, stack, reach, clock or SystemClock(), out)
    except (HardwareError, ConfigError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


def _describe(reach: Reach) -> str:
    joints = "  ".join(f"{n} {v:+.2f}" for n, v in reach.joints_deg.items())
    x, y, z = reach.tcp
    return (f"joints (deg): {joints}\n"
            f"tool point ({x:.4f}, {y:.4f}, {z:.4f}) m at pitch {reach.pitch_deg:g} deg")


def _move(args: object, stack: ExitStack, reach: Reach, clock: Clock,
          out: Callable[[str], None]) -> int:
    from solarian_agent.hw.feetech.arm import FeetechArm, FeetechArmConfig, default_arm_config
    from solarian_agent.hw.feetech.calibration import ArmCalibration, default_so101
    from solarian_agent.hw.feetech.controller import ArmController, ArmControllerConfig
    from solarian_agent.hw.feetech.simbus import SimulatedBus

    a = vars(args)
    path = a["calibration"] or str(default_arm_config())
    if a["sim"]:
        port, cal = stack.enter_context(SimulatedBus()).port_name, default_so101()
    else:
        port, cal = a["port"], ArmCalibration.load(path)
    arm = FeetechArm(FeetechArmConfig(port=port, calibration_file=path), calibration=cal)
    arm.connect()
    stack.callback(arm.disconnect)
    ctl = ArmController(arm, clock, ArmControllerConfig(rate_hz=arm.config.rate_hz,
                                                        command_timeout_s=2.0))
    ctl.step()  # torque on, holding where the arm is, before the first target
    target = {n: math.radians(v) for n, v in reach.joints_deg.items()}
    stop = threading.Event()
    loop = threading.Thread(target=ctl.run, args=(stop,), name="arm-reach", daemon=True)
    loop.start()
    stack.callback(loop.join, 2.0)
    stack.callback(stop.set)
    deadline = clock.now() + float(a["timeout"])
    while clock.now() < deadline:
        if ctl.latch.tripped:
            out(f"stopped: e-stop ({ctl.latch.reason})")
            return 1
        ctl.command(target, source="operator", max_velocity=SLOW_RAD_S)
        now = ctl.positions()
        if now and all(abs(now[j] - target[j]) <= ARRIVED_RAD for j in ARM_JOINTS):
            ctl.hold("reached")
            out("reached")
            return 0
        clock.sleep_until(clock.now() + 0.1, stop)
    ctl.hold("reach timed out")
    out(f"not there after {a['timeout']:g} s: holding where the arm is")
    return 1


__all__ = ["EXIT_UNREACHABLE", "main"]
