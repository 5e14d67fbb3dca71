"""``solarian-agent bringup``: from a box of parts to a robot ready for its first task.

    bringup --port /dev/ttyACM0 --camera overhead=0 --camera wrist=2   # the real arm
    bringup --sim mujoco --non-interactive --json                       # the simulator
    bringup --step check                                                # one step again

The steps (servos, arm_calibration, cameras, intrinsics, poses, check) run in order; a step
already done is skipped, so an interrupted session resumes.  ``--step`` re-runs the named
steps only, ``--redo`` all of them.  The robot profile (``--profile``, default
``~/.config/solarian_agent/robot.yaml``) records each step and the pointing check's figures;
the camera calibrations go beside it (``cameras/<name>.yaml``).  Exit status 0 when the
robot is ready, 1 when a step failed or the pointing check is over the threshold, 2 for a
bad command line.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

import numpy as np

from solarian_agent.cli_common import CliParser, number_arg
from solarian_agent.core.errors import ConfigError
from solarian_agent.hw.camera.boards import BoardError, BoardSpec
from solarian_agent.hw.errors import HardwareError

from .profile import DEFAULT_THRESHOLD_MM, STEPS, RobotProfile, default_profile_path
from .session import Rig, Session

SIMS = ("mujoco",)


def _parser() -> CliParser:
    ap = CliParser(prog="solarian-agent bringup", description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="", help="the robot profile to write (default "
                    f"{default_profile_path()})")
    ap.add_argument("--sim", choices=SIMS, default=None,
                    help="bring up the simulator as the robot (its truth measures the figures)")
    ap.add_argument("--port", default="", help="the arm's serial port (find it with "
                    "`solarian-agent arm find-port`)")
    ap.add_argument("--arm-calibration", default="",
                    help="the arm's calibration file (default: made by `arm calibrate`)")
    ap.add_argument("--camera", action="append", default=[], metavar="NAME=SOURCE",
                    help="a camera: overhead=0, wrist=/dev/video2 (repeatable)")
    ap.add_argument("--board", default="charuco:7x5:30:22",
                    help="the printed board (measure the square with a ruler)")
    ap.add_argument("--board-at", action="append", default=[], metavar="X,Y,YAW_DEG",
                    help="where you will lay the board (roughly, m and deg; repeatable, one "
                         "per place, 2-3 places)")
    ap.add_argument("--step", action="append", default=[], choices=STEPS,
                    help="run only this step (repeatable), even if done")
    ap.add_argument("--redo", action="store_true", help="run every step again")
    ap.add_argument("--threshold-mm", type=number_arg(
        float, lambda v: 0 < v <= 100, "a distance in mm in (0, 100]"),
        default=DEFAULT_THRESHOLD_MM, help="the pointing check's pass mark (default 5 mm)")
    ap.add_argument("--non-interactive", action="store_true",
                    help="never ask (the simulator's hands do what a person would)")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    return ap


def _board_at(text: str) -> tuple[float, float, float]:
    try:
        x, y, yaw = (float(v) for v in text.split(","))
    except ValueError:
        raise ValueError(f"--board-at {text!r}: expected X,Y,YAW_DEG") from None
    if not all(math.isfinite(v) for v in (x, y, yaw)):
        raise ValueError(f"--board-at {text!r}: expected finite numbers")
    return x, y, math.radians(yaw)


def _corners(board: BoardSpec, place: tuple[float, float, float]) -> np.ndarray:
    from solarian_agent.sim.mujoco.prints import face_up_pose

    pose = face_up_pose(*place)
    pts = board.object_points()
    return np.asarray(pts @ pose[:3, :3].T + pose[:3, 3])


def main(argv: Sequence[str] | None = None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    try:
        board = BoardSpec.parse(args.board)
        places = [_board_at(t) for t in args.board_at]
    except (BoardError, ValueError) as e:
        ap.error(str(e))
    cams: dict[str, str] = {}
    for item in args.camera:
        name, _, source = item.partition("=")
        if not name or not source:
            ap.error(f"--camera {item!r}: expected NAME=SOURCE (overhead=0)")
        cams[name] = source
    if not args.sim:
        if not args.port:
            ap.error("give --port (find it with `solarian-agent arm find-port`) or --sim")
        if args.non_interactive:
            ap.error("--non-interactive needs --sim: on the real arm a person lays the board "
                     "and reads the pointing check")
        if set(cams) != {"overhead", "wrist"}:
            ap.error("give --camera overhead=SOURCE and --camera wrist=SOURCE")
        if len(places) < 2:
            ap.error("give --board-at X,Y,YAW_DEG for 2-3 places where you will lay the board")
    path = Path(args.profile).expanduser() if args.profile else default_profile_path()
    log = (lambda s: print(s, file=sys.stderr)) if args.json else print
    try:
        profile = RobotProfile.load(path) if path.is_file() else RobotProfile(path=str(path))
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    with ExitStack() as stack:
        try:
            rig = (_sim_rig(args, board, path, stack, log) if args.sim
                   else _real_rig(args, board, places, cams, path, stack, log))
        except (HardwareError, ConfigError, OSError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        session = Session(rig, profile, args.threshold_mm, only=args.step, redo=args.redo)
        report = session.run()
        profile = session.profile
    if args.json:
        print(json.dumps(report.as_json(profile), indent=2))
    else:
        _print_summary(report.as_json(profile))
    return 0 if report.ready else 1


def _print_summary(doc: dict[str, object]) -> None:
    steps = doc["steps"]
    assert isinstance(steps, dict)
    for name, row in steps.items():
        print(f"{name:<16} {row.get('status')}" + (f": {row['reason']}" if "reason" in row
                                                   else ""))
    print(f"profile {doc['profile']}: " + ("READY" if doc["ready"] else "not ready"))


def _sim_rig(args: object, board: BoardSpec, path: Path, stack: ExitStack,
             log: object) -> Rig:
    from solarian_agent.hw.feetech.calibration import default_so101

    from .pointing import TruthReference
    from .robot import BOARD_PLACES, MujocoBringupRobot, SimBoardHolder

    robot = MujocoBringupRobot(board=board)
    stack.callback(robot.close)
    cal_dir = path.parent / "cameras"

    def servos() -> tuple[str, dict[str, int]]:
        return _ping_simulated_bus()

    def arm_calibration() -> str:
        p = path.parent / "arm_so101.yaml"
        default_so101().save(p)
        return str(p)

    # the places the simulator's hand lays the board, told roughly (2 cm off), as a person
    # would say where they will put it
    guess = [_corners(board, (x + 0.02, y - 0.02, yaw)) for x, y, yaw in BOARD_PLACES]
    return Rig(robot=robot, board=board, holder=SimBoardHolder(robot), layer=robot,
               reference=TruthReference(robot.truth.marks), board_guess=guess,
               park=np.array(robot.world.config.home[:5], float), servos=servos,
               arm_calibration=arm_calibration, camera_sources={}, calibration_dir=cal_dir,
               truth=robot.truth, log=log)  # type: ignore[arg-type]


def _ping_simulated_bus() -> tuple[str, dict[str, int]]:
    """The servo step against simulated servos on a pseudo-terminal: every id must answer."""
    from solarian_agent.hw.feetech.arm import FeetechArm, FeetechArmConfig
    from solarian_agent.hw.feetech.calibration import default_so101
    from solarian_agent.hw.feetech.simbus import SimulatedBus

    with SimulatedBus() as bus:
        cal = default_so101()
        arm = FeetechArm(FeetechArmConfig(port=bus.port_name), calibration=cal)
        arm.connect(check_ids=True, configure_servos=False)
        try:
            ids = {j.name: j.servo_id for j in cal.joints}
        finally:
            arm.disconnect()
    return "sim", ids


def _real_rig(args: object, board: BoardSpec, places: list[tuple[float, float, float]],
              cams: dict[str, str], path: Path, stack: ExitStack, log: object) -> Rig:
    from solarian_agent.hw.feetech.arm import FeetechArm, FeetechArmConfig, default_arm_config

    from .pointing import OperatorReference
    from .real_robot import PersonHolder, PersonLayer, RealBringupRobot

    a = vars(args)
    cal_file = a["arm_calibration"] or str(default_arm_config())

    def servos() -> tuple[str, dict[str, int]]:
        arm = FeetechArm(FeetechArmConfig(port=a["port"], calibration_file=cal_file))
        arm.connect(check_ids=True, configure_servos=False)
        try:
            return a["port"], {j.name: j.servo_id for j in arm.calibration.joints}
        finally:
            arm.disconnect()

    def arm_calibration() -> str:
        if not Path(cal_file).is_file():
            from solarian_agent.hw.errors import CalibrationError

            raise CalibrationError(
                f"no arm calibration at {cal_file}: run `solarian-agent arm calibrate --port "
                f"{a['port']}` (or `arm import-lerobot`), then bringup again")
        return cal_file

    robot = RealBringupRobot(a["port"], cal_file, cams, stack)
    park = np.array([0.0, -1.74, 1.69, -1.6, 0.0])  # folded over the base, out of view
    return Rig(robot=robot, board=board, holder=PersonHolder(input),
               layer=PersonLayer(input), reference=OperatorReference(input),
               board_guess=[_corners(board, p) for p in places], park=park, servos=servos,
               arm_calibration=arm_calibration, camera_sources=cams,
               calibration_dir=path.parent / "cameras", log=log)  # type: ignore[arg-type]


__all__ = ["main"]
