"""The camera node's core and the camera models the skills and the planner's markers use,
without ROS.

``build_camera_core`` runs one OpenCV camera (a device or a video file) on the node's Bus;
its ``camera_info`` comes from the camera's calibration file when there is one.
``skill_camera_models`` picks the models that turn an image point into a table position:
the simulator's (``sim``) or the robot's calibration files (``calibrated``), never one for the
other.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core import names
from ..core.clock import Clock
from ..core.errors import ConfigError
from ..core.messages import CameraInfo
from ..core.transport import LATCHED, Bus
from ..rosmsg import graph
from .node_core import Loop, NodeCore

log = logging.getLogger(__name__)


def guess_intrinsics(width: int, height: int, hfov_deg: float = 60.0) -> tuple[float, ...]:
    f = width / (2.0 * math.tan(math.radians(hfov_deg) / 2.0))
    return (f, 0.0, width / 2.0, 0.0, f, height / 2.0, 0.0, 0.0, 1.0)


def build_camera_core(
    clock: Clock,
    camera: str,
    source: int | str,
    *,
    width: int = 0,
    height: int = 0,
    fps: float = 0.0,
    frame_id: str = "",
    k: Sequence[float] = (),
    d: Sequence[float] = (),
    capture_factory: Any = None,
    loop_file: bool = True,
    bus: Bus | None = None,
    calibration_file: str = "",
) -> NodeCore:
    """An OpenCV camera publishing ``<camera>/image_raw`` and ``<camera>/camera_info``.  A
    video file plays at its own frame rate and, with ``loop_file``, starts again at its end.

    ``camera_info`` carries the intrinsics of ``calibration_file`` (K scaled to the frames'
    size when the camera runs another mode of the same aspect ratio); without one, ``k`` /
    ``d``; without those, a guess (60 degrees across), said in the log."""
    from ..hw.camera.opencv import OpenCVCamera, OpenCVCameraConfig

    bus = bus or Bus()
    node = f"camera_{camera}"
    cal = _camera_calibration(node, camera, calibration_file)
    if cal is not None and not (width or height) and not Path(str(source)).is_file():
        width, height = cal.width, cal.height  # ask the camera for the calibrated mode
    cfg = OpenCVCameraConfig(source=source, width=width or None, height=height or None,
                             fps=fps or None, frame_id=frame_id or f"{camera}_camera_optical",
                             realtime=True)
    cam = OpenCVCamera(cfg, clock, capture_factory)
    img_pub = bus.publisher(names.image_topic(camera), names.T_IMAGE,
                            graph.SENSOR_DATA, node=node)
    info_pub = bus.publisher(names.camera_info_topic(camera), names.T_CAMERA_INFO, LATCHED,
                             node=node)
    reader = CameraReader(node, cam, clock, img_pub, info_pub,
                          lambda img: _camera_info(node, cal, img, k, d),
                          stall_timeout_s=cfg.stall_timeout_s, loop_file=loop_file)
    return NodeCore(bus, graph.camera_node(camera), [Loop("read", 0.0, reader.read_once)],
                    start=cam.connect, shutdown=cam.disconnect,
                    parts={"camera": cam, "reader": reader})


class CameraReader:
    """Reads the camera ``node``'s frames one at a time and publishes them, with its
    ``camera_info`` (``info_for`` an image) whenever the frames' size changes.  The end of a
    video file starts it again (``loop_file``) or idles; a stall is said and retried; a camera
    gone after the driver's own reconnects is reconnected after a second."""

    def __init__(self, node: str, cam: Any, clock: Clock, img_pub: Any, info_pub: Any,
                 info_for: Callable[[Any], CameraInfo], *, stall_timeout_s: float,
                 loop_file: bool) -> None:
        self.node = node
        self.cam = cam
        self.clock = clock
        self.img_pub = img_pub
        self.info_pub = info_pub
        self.info_for = info_for
        self.stall_timeout_s = stall_timeout_s
        self.loop_file = loop_file
        self.info: CameraInfo | None = None
        self.ended = False
        self.stalls = 0

    def read_once(self) -> None:
        from ..hw.errors import CameraError, CameraStalledError, EndOfStreamError

        if self.ended:
            self.clock.sleep_until(self.clock.now() + 0.2)
            return
        try:
            frame = self.cam.read(timeout_s=self.stall_timeout_s)
        except EndOfStreamError:
            log.info("%s: end of the video file%s", self.node,
                     ", again" if self.loop_file else "")
            if self.loop_file:
                self.cam.disconnect()
                self.cam.connect()
            else:
                self.ended = True
            return
        except CameraStalledError as e:  # no frame in time: said, and tried again
            self.stalls += 1
            log.warning("%s: %s", self.node, e)
            return
        except CameraError as e:  # gone after the driver's own reconnects: back off, retry
            log.error("%s: %s; reconnecting in 1 s", self.node, e)
            self.clock.sleep_until(self.clock.now() + 1.0)
            self.cam.disconnect()
            self.cam.connect()
            return
        img = frame.to_image()
        if self.info is None or self.info.width != img.width:
            self.info = self.info_for(img)
            self.info_pub.publish(self.info)
        self.img_pub.publish(img)


def _camera_calibration(node: str, camera: str, path: str) -> Any:
    """The camera's calibration file, or None (a missing file is said, not fatal: the launch
    already refused a camera the skills point through without one)."""
    if not path:
        return None
    from ..hw.camera.calibration import COMMAND, CameraCalibration

    if not Path(path).expanduser().is_file():
        log.warning("%s: no calibration at %s; camera_info carries guessed intrinsics (make "
                    "one with `%s intrinsics --camera %s`)", node, path, COMMAND, camera)
        return None
    cal = CameraCalibration.load(path)  # an invalid file: ConfigError naming the field
    if cal.camera != camera:
        raise ConfigError(f"{path}:camera_calibration.camera",
                          f"the file is for camera {cal.camera!r}, not {camera!r}")
    return cal


def _camera_info(node: str, cal: Any, img: Any, k: Sequence[float], d: Sequence[float]
                 ) -> CameraInfo:
    from ..hw.errors import CalibrationError

    if cal is not None:
        try:
            return cal.camera_info(img.stamp, img.width, img.height, img.frame_id)  # type: ignore[no-any-return]
        except CalibrationError as e:
            log.error("%s: %s; camera_info carries guessed intrinsics", node, e)
    kk = tuple(k) if len(k) == 9 else guess_intrinsics(img.width, img.height)
    return CameraInfo(img.width, img.height, kk, tuple(d), img.frame_id, img.stamp)


def pointing_cameras(tools: Mapping[str, Any]) -> dict[str, list[str]]:
    """camera -> the tools whose image points refer to its images (the skills turn those
    pixels into table positions through the camera's model)."""
    out: dict[str, list[str]] = {}
    for name, tool in tools.items():
        spec = tool.spec(name)
        if spec.image_points and spec.camera:
            out.setdefault(spec.camera, []).append(name)
    return out


CAMERA_MODELS = ("sim", "calibrated")


def skill_camera_models(kind: str, cameras: Sequence[str], calibration_dir: str = "",
                  required: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
    """The camera models the skills and the planner's markers unproject with: ``sim`` (the
    simulator's, from the URDF) or ``calibrated`` (the calibration files; a camera in
    ``required`` without one raises ``MissingCalibrationError``, naming the camera, the file
    and the command that makes it)."""
    if kind == "sim":
        from ..arm.kinematics import ArmModel
        from ..sim.render import Renderer

        renderer = Renderer(ArmModel.default())
        return {c: renderer.camera(c) for c in cameras if c in renderer.cameras}
    if kind == "calibrated":
        from ..hw.camera.model import load_camera_models

        return dict(load_camera_models(cameras, calibration_dir or None, required))
    raise ConfigError("camera_models", f"{kind!r} is not one of {', '.join(CAMERA_MODELS)}")


__all__ = ["CAMERA_MODELS", "build_camera_core", "guess_intrinsics", "pointing_cameras",
           "skill_camera_models"]
