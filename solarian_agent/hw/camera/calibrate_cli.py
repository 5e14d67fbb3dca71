"""``solarian-agent calibrate-camera``: make a camera's calibration file (docs/hardware.md).

    calibrate-camera print-board  --board charuco:11x8:30:22 --out board.png
    calibrate-camera intrinsics   --camera overhead --board chessboard:9x6:25 \\
                                  (--images 'views/*.png' | --source 0 [--views 20])
    calibrate-camera board-pose   --camera overhead --board charuco:11x8:30:22 \\
                                  --board-pose X,Y,YAW_DEG (--images board.png | --source 0)
    calibrate-camera touch        --camera overhead (--port P | --sim) \\
                                  (--source 0 | --image frame.png) [--clicks 'u,v;u,v;...']
    calibrate-camera show         --camera overhead [--pixel U,V ...]

Files go to ``--dir`` (default ``~/.config/solarian_agent/cameras``) as ``<camera>.yaml``.
A bad value is a one-line usage error (exit 2); a refused calibration says why (exit 1).
"""

from __future__ import annotations

import argparse
import glob
import sys
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from solarian_agent.core.errors import ConfigError
from solarian_agent.hw.camera.boards import BoardError, BoardSpec, Detection, average, detect
from solarian_agent.hw.camera.calibration import (
    COMMAND,
    CameraCalibration,
    Extrinsics,
    Measurement,
    calibration_path,
    default_calibration_dir,
    now_iso,
)
from solarian_agent.hw.camera.model import CalibratedCamera
from solarian_agent.hw.camera.solve import (
    base_from_table_board,
    calibrate_intrinsics,
    extrinsics_from_board,
)
from solarian_agent.hw.camera.touch import (
    TouchResult,
    arm_tip_source,
    residual_rows,
    touch_calibration,
)
from solarian_agent.hw.errors import HardwareError
from solarian_agent.hw.tables import format_table

from ...cli_common import CliParser


def _board(text: str) -> BoardSpec:
    try:
        return BoardSpec.parse(text)
    except BoardError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _floats(n_min: int, n_max: int, what: str) -> Any:
    def parse(text: str) -> list[float]:
        try:
            vals = [float(v) for v in text.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {what}") from None
        if not n_min <= len(vals) <= n_max:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {what}")
        return vals
    return parse


def _clicks(text: str) -> list[tuple[float, float]]:
    out = []
    for item in text.split(";"):
        if item.strip():
            u, v = _floats(2, 2, "u,v;u,v;... pixels")(item)
            out.append((u, v))
    return out


def _parser() -> argparse.ArgumentParser:
    ap = CliParser(prog=COMMAND, description="Calibrate a camera: intrinsics "
                                 "from board views, then its pose relative to the arm.")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="STEP",
                            help="print-board, intrinsics, board-pose, touch or show")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--camera", required=True, help="the camera's name (overhead, wrist...)")
        p.add_argument("--dir", default="", help=f"calibration directory (default "
                                                 f"{default_calibration_dir()})")

    def frames(p: argparse.ArgumentParser) -> None:
        g = p.add_mutually_exclusive_group(required=True)
        g.add_argument("--images", nargs="+", help="image files or globs")
        g.add_argument("--source", help="camera device index, /dev/video* path or video file")
        p.add_argument("--width", type=int, default=0,
                       help="capture width from --source (0: the camera's own)")
        p.add_argument("--height", type=int, default=0,
                       help="capture height from --source (0: the camera's own)")

    pb = sub.add_parser("print-board", help="write a board image to print")
    pb.add_argument("--board", type=_board, required=True,
                    help="chessboard:COLSxROWS:SQUARE_MM or charuco:COLSxROWS:SQ_MM:MARKER_MM")
    pb.add_argument("--out", required=True, help="the image file to write (PNG)")
    pb.add_argument("--px-per-square", type=int, default=200,
                    help="pixels per board square (default 200)")

    pi = sub.add_parser("intrinsics", help="K and D from views of a board")
    common(pi)
    frames(pi)
    pi.add_argument("--board", type=_board, required=True,
                    help="chessboard:COLSxROWS:SQUARE_MM or charuco:COLSxROWS:SQ_MM:MARKER_MM")
    pi.add_argument("--views", type=int, default=20, help="views to take from --source")
    pi.add_argument("--max-error", type=float, default=1.0, help="refuse above this RMS (px)")
    pi.add_argument("--k3", action="store_true", help="also fit k3 (wide-angle lenses)")

    pp = sub.add_parser("board-pose", help="the camera's pose from a board at a measured pose")
    common(pp)
    frames(pp)
    pp.add_argument("--board", type=_board, required=True,
                    help="chessboard:COLSxROWS:SQUARE_MM or charuco:COLSxROWS:SQ_MM:MARKER_MM")
    pp.add_argument("--board-pose", required=True,
                    type=_floats(3, 4, "X,Y,YAW_DEG or X,Y,Z,YAW_DEG (metres, degrees)"),
                    help="the board origin's x, y (, z) in the arm's base frame (metres) and "
                         "its x axis' yaw from the base's x (degrees, counter-clockwise)")
    pp.add_argument("--frames", type=int, default=10, help="frames averaged from --source")
    pp.add_argument("--max-error", type=float, default=2.0,
                    help="refuse above this reprojection error (px; default 2)")

    pt = sub.add_parser("touch", help="the camera's pose from table marks touched with the "
                                      "tool point (the fixed jaw's inner face 6 mm above its "
                                      "tip) and clicked in the image")
    common(pt)
    g = pt.add_mutually_exclusive_group(required=True)
    g.add_argument("--port", help="the arm's servo bus port")
    g.add_argument("--sim", action="store_true", help="the simulated servo bus")
    pt.add_argument("--arm-config", default="", help="the arm's calibration YAML")
    f = pt.add_mutually_exclusive_group(required=True)
    f.add_argument("--source", help="camera device index, /dev/video* path or video file")
    f.add_argument("--image", help="a frame of the marks (arm out of view) taken before")
    pt.add_argument("--clicks", type=_clicks, default=None,
                    help="the marks' pixels 'u,v;u,v;...' in the order touched (else asked)")
    pt.add_argument("--max-error", type=float, default=3.0,
                    help="refuse above this reprojection error (px; default 3)")

    ps = sub.add_parser("show", help="print a calibration file and map pixels to the table")
    common(ps)
    ps.add_argument("--pixel", action="append", type=_floats(2, 2, "U,V"), default=[],
                    help="a pixel U,V to map onto the table (repeatable)")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    ap = _parser()
    args = ap.parse_args(list(sys.argv[1:] if argv is None else argv))
    for name in ("views", "frames"):
        if getattr(args, name, 1) < 1:
            ap.error(f"--{name} must be at least 1")
    try:
        return int(COMMANDS[args.cmd](args))
    except (HardwareError, ConfigError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


# ------------------------------------------------------------------------------ frames
@contextmanager
def _camera(args: argparse.Namespace) -> Iterator[Any]:
    from solarian_agent.hw.camera.opencv import OpenCVCamera, OpenCVCameraConfig

    src: int | str = int(args.source) if str(args.source).isdigit() else str(args.source)
    cam = OpenCVCamera(OpenCVCameraConfig(source=src, width=args.width or None,
                                          height=args.height or None))
    cam.connect()
    try:
        yield cam
    finally:
        cam.disconnect()


def _image_files(patterns: Sequence[str]) -> list[Path]:
    files: list[Path] = []
    for pat in patterns:
        hits = sorted(glob.glob(pat)) if any(c in pat for c in "*?[") else [pat]
        if not hits:
            raise HardwareError(f"no image matches {pat!r}")
        files += [Path(h) for h in hits]
    return files


def _read(path: Path) -> np.ndarray:
    import cv2

    img = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if img is None:
        raise HardwareError(f"{path} is not an image OpenCV can read")
    return np.asarray(img)


def _views_from_files(board: BoardSpec, files: Sequence[Path]) -> dict[str, Detection]:
    views: dict[str, Detection] = {}
    for f in files:
        det = detect(board, _read(f))
        if det is None:
            print(f"  {f.name}: no board found (skipped)")
            continue
        views[f.name] = det
        print(f"  {f.name}: {len(det.image_points)} corners")
    return views


def _views_from_camera(board: BoardSpec, cam: Any, n: int, quiet: bool = False
                       ) -> dict[str, Detection]:
    views: dict[str, Detection] = {}
    while len(views) < n:
        if not quiet:
            ans = input(f"view {len(views) + 1}/{n}: place the board, hold it still and press "
                        "Enter (d when done, q to quit): ").strip().lower()
            if ans == "q":
                raise HardwareError("calibration stopped by the user")
            if ans == "d":
                break
        det = detect(board, cam.read().data)
        if det is None:
            print("  no board in view: show the whole board (chessboard) or more of it "
                  "(ChArUco), well lit, not blurred")
            continue
        views[f"view{len(views) + 1:02d}"] = det
        print(f"  {len(det.image_points)} corners")
    return views


# ------------------------------------------------------------------------------ commands
def _print_board(args: argparse.Namespace) -> int:
    import cv2

    from solarian_agent.hw.camera.boards import draw

    img = draw(args.board, px_per_square=args.px_per_square)
    out = Path(args.out)
    if not cv2.imwrite(str(out), img.image):
        raise HardwareError(f"could not write {out}")
    h, w = img.image.shape
    sq = args.board.square_m * 1000
    print(f"wrote {out} ({w}x{h} px, {args.board.describe()}): print it at "
          f"{args.px_per_square / sq * 25.4:.0f} dpi for {sq:g} mm squares, glue it flat, and "
          "measure a square with a ruler")
    return 0


def _intrinsics(args: argparse.Namespace) -> int:
    board: BoardSpec = args.board
    print(f"intrinsics of {args.camera} from a {board.describe()}")
    with ExitStack() as stack:
        if args.images:
            views = _views_from_files(board, _image_files(args.images))
        else:
            views = _views_from_camera(board, stack.enter_context(_camera(args)), args.views)
    res = calibrate_intrinsics(views, max_rms_px=args.max_error, fix_k3=not args.k3)
    path = calibration_path(args.camera, args.dir or None)
    m = Measurement(now_iso(), f"{board.describe()}, {len(views)} views", res.rms_px,
                    len(views))
    cal = CameraCalibration(args.camera, res.image_size[0], res.image_size[1], res.k, res.d, m)
    dropped = ""
    if path.is_file():
        try:
            if CameraCalibration.load(path).extrinsics is not None:
                dropped = ("\nthe old extrinsics were for other intrinsics and are gone: "
                           f"measure them again ({COMMAND} touch / board-pose)")
        except ConfigError:
            pass
    cal.save(path)
    k = res.k
    print(format_table(["", "value"], [
        ["image size", f"{res.image_size[0]}x{res.image_size[1]}"],
        ["fx, fy (px)", f"{k[0]:.1f}, {k[4]:.1f}"], ["cx, cy (px)", f"{k[2]:.1f}, {k[5]:.1f}"],
        ["distortion", ", ".join(f"{v:.4f}" for v in res.d)],
        ["views", len(views)], ["coverage", f"{res.coverage:.0%}"],
        ["most tilted view", f"{res.max_tilt_deg:.0f} deg"],
        ["reprojection error", f"{res.rms_px:.3f} px RMS"]]))
    print(f"saved {path}{dropped}")
    return 0


def _intrinsics_file(args: argparse.Namespace) -> tuple[Path, CameraCalibration]:
    return intrinsics_file(args.camera, args.dir)


def intrinsics_file(camera: str, directory: str = "") -> tuple[Path, CameraCalibration]:
    """The camera's calibration file, which must exist (with its intrinsics)."""
    path = calibration_path(camera, directory or None)
    if not path.is_file():
        raise HardwareError(f"{path} does not exist: calibrate the intrinsics first "
                            f"({COMMAND} intrinsics --camera {camera} ...)")
    return path, CameraCalibration.load(path)


def _board_pose(args: argparse.Namespace) -> int:
    path, intr = _intrinsics_file(args)
    board: BoardSpec = args.board
    bp = args.board_pose
    x, y, z, yaw = (bp[0], bp[1], 0.0, bp[2]) if len(bp) == 3 else tuple(bp)
    base_from_board = base_from_table_board(x, y, z, yaw)
    with ExitStack() as stack:
        if args.images:
            dets = list(_views_from_files(board, _image_files(args.images)).values())
        else:
            dets = list(_views_from_camera(board, stack.enter_context(_camera(args)),
                                           args.frames, quiet=True).values())
    if not dets:
        raise HardwareError(f"the {board.describe()} was not found in any frame")
    view = average(dets)
    if view.image_size != (intr.width, intr.height):
        raise HardwareError(f"the frames are {view.image_size[0]}x{view.image_size[1]}, the "
                            f"intrinsics {intr.width}x{intr.height}: use that camera mode")
    res = extrinsics_from_board(view, intr.k, intr.d, base_from_board, board=board,
                                max_rms_px=args.max_error)
    m = Measurement(now_iso(), f"board: {board.describe()} at x {x:.3f} m, y {y:.3f} m, z "
                    f"{z:.3f} m, yaw {yaw:g} deg; {len(dets)} frames", res.rms_px,
                    len(view.image_points))
    cal = intr.with_extrinsics(Extrinsics.from_matrix(res.base_from_camera, m))
    cal.save(path)
    _print_pose(cal, res.rms_px)
    print(f"saved {path}")
    return 0


def _touch(args: argparse.Namespace) -> int:
    from solarian_agent.hw.feetech.arm import FeetechArm, FeetechArmConfig, default_arm_config
    from solarian_agent.hw.feetech.calibration import ArmCalibration, default_so101
    from solarian_agent.hw.feetech.simbus import SimulatedBus

    path, intr = _intrinsics_file(args)
    with ExitStack() as stack:
        arm_file = args.arm_config or str(default_arm_config())
        if args.sim:
            port = stack.enter_context(SimulatedBus()).port_name
            cal = default_so101()
        else:
            port, cal = args.port, ArmCalibration.load(arm_file)
        arm = FeetechArm(FeetechArmConfig(port=port, calibration_file=arm_file), calibration=cal)
        arm.connect()
        stack.callback(arm.disconnect)
        arm.set_torque(False)
        print("torque is off: guide the arm by hand (support it)")
        tip = arm_tip_source(lambda: dict(arm.read_state().positions))
        if args.image:
            frame = _read(Path(args.image))

            def grab() -> np.ndarray:
                return frame
        else:
            cam = stack.enter_context(_camera(args))

            def grab() -> np.ndarray:
                return np.asarray(cam.read().data)

        ui = TerminalTouchUI(args.clicks, save_dir=path.parent)
        result = touch_calibration(intr, tip, grab, ui, max_rms_px=args.max_error)
    save_touch(result, path)
    return 0


def save_touch(result: TouchResult, path: Path) -> None:
    """Print the marks' table and the pose, and save the calibration."""
    print(format_table(["mark", "x (mm)", "y (mm)", "z (mm)", "u (px)", "v (px)", "off (px)"],
                       residual_rows(result.points, result.pixels,
                                     result.extrinsics.residuals_px),
                       right=range(7)))
    result.calibration.save(path)
    _print_pose(result.calibration, result.extrinsics.rms_px)
    print(f"saved {path}")


def _print_pose(cal: CameraCalibration, rms: float) -> None:
    from solarian_agent.hw.camera.calibration import quat_to_matrix

    assert cal.extrinsics is not None
    t = cal.extrinsics.translation_m
    r = quat_to_matrix(cal.extrinsics.rotation_xyzw)
    down = float(np.degrees(np.arccos(np.clip(-r[2, 2], -1.0, 1.0))))
    print(format_table(["", "value"], [
        ["camera position (m)", f"x {t[0]:.3f}, y {t[1]:.3f}, z {t[2]:.3f}"],
        ["looks", f"{down:.0f} deg from straight down"],
        ["reprojection error", f"{rms:.2f} px RMS"],
        ["method", cal.extrinsics.measurement.method]]))


def _show(args: argparse.Namespace) -> int:
    path = calibration_path(args.camera, args.dir or None)
    cal = CameraCalibration.load(path)
    k = cal.k
    print(f"{path}")
    print(format_table(["", "value"], [
        ["camera", cal.camera], ["image size", f"{cal.width}x{cal.height}"],
        ["fx, fy (px)", f"{k[0]:.1f}, {k[4]:.1f}"], ["cx, cy (px)", f"{k[2]:.1f}, {k[5]:.1f}"],
        ["intrinsics", f"{cal.intrinsics.method}; {cal.intrinsics.rms_px:.3f} px; "
                       f"{cal.intrinsics.measured_at}"],
        ["extrinsics", "not measured" if cal.extrinsics is None else
         f"{cal.extrinsics.measurement.method}; {cal.extrinsics.measurement.rms_px:.2f} px; "
         f"{cal.extrinsics.measurement.measured_at}"]]))
    if cal.extrinsics is not None:
        _print_pose(cal, cal.extrinsics.measurement.rms_px)
    if args.pixel:
        if cal.extrinsics is None:
            raise HardwareError("no extrinsics: pixels cannot be mapped to the table yet")
        model = CalibratedCamera(cal)
        rows = []
        for u, v in args.pixel:
            try:
                p = model.unproject(u, v, 0.0)
                rows.append([f"{u:g}, {v:g}", f"{p[0] * 1000:.1f}", f"{p[1] * 1000:.1f}"])
            except ValueError as e:
                rows.append([f"{u:g}, {v:g}", str(e), ""])
        print(format_table(["pixel", "table x (mm)", "table y (mm)"], rows))
    return 0


COMMANDS = {"print-board": _print_board, "intrinsics": _intrinsics, "board-pose": _board_pose,
            "touch": _touch, "show": _show}


class TerminalTouchUI:
    """The touch procedure in a terminal: Enter confirms; pixels come from ``clicks``, or an
    OpenCV window where HighGUI exists, or are typed (the frame is saved to look them up)."""

    def __init__(self, clicks: Sequence[tuple[float, float]] | None, save_dir: Path) -> None:
        self.clicks = list(clicks) if clicks is not None else None
        self.save_dir = save_dir
        self._saved: Path | None = None

    def say(self, text: str) -> None:
        print(text, flush=True)

    def ask(self, prompt: str) -> str:
        try:
            return input(prompt)
        except EOFError:
            return "q"

    def click(self, image: np.ndarray | None, index: int, total: int) -> tuple[float, float]:
        if self.clicks is not None:
            if len(self.clicks) != total:
                raise HardwareError(f"--clicks gives {len(self.clicks)} pixels for {total} "
                                    "touched marks")
            return self.clicks[index - 1]
        if image is not None:
            got = _click_in_window(image, index, total)
            if got is not None:
                return got
        if image is not None and self._saved is None:
            import cv2

            self._saved = self.save_dir / "touch_frame.png"
            self.save_dir.mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(self._saved), image)
            print(f"the frame is saved as {self._saved}")
        while True:
            ans = self.ask(f"pixel of mark {index}/{total} as 'u v' (read it off the frame): ")
            try:
                u, v = (float(x) for x in ans.replace(",", " ").split())
                return u, v
            except ValueError:
                if ans.strip().lower() == "q":
                    raise HardwareError("calibration stopped by the user") from None
                print("  type two numbers, e.g. 312 240")


def _click_in_window(image: np.ndarray, index: int, total: int) -> tuple[float, float] | None:
    """A click in an OpenCV window, where OpenCV has a GUI (opencv-python, not the headless
    build); None where it has none, or when the window is closed with Esc."""
    import cv2

    title = f"click mark {index} of {total} (Esc: type it instead)"
    try:
        cv2.namedWindow(title, cv2.WINDOW_NORMAL)
    except cv2.error:
        return None
    clicked: list[tuple[float, float]] = []

    def on_mouse(event: int, x: int, y: int, *_: Any) -> None:
        if event == cv2.EVENT_LBUTTONDOWN:
            clicked.append((float(x), float(y)))

    cv2.setMouseCallback(title, on_mouse)
    try:
        while not clicked:  # a person's click: as long as they take
            cv2.imshow(title, image)
            if cv2.waitKey(50) == 27:
                return None
    finally:
        cv2.destroyWindow(title)
    return clicked[0]


if __name__ == "__main__":
    sys.exit(main())
