"""``doctor``'s checks of the profile itself, the cameras and the ROS environment (the arm's
are in :mod:`.doctor_arm`).  Each returns findings and raises nothing it expects: the runner
turns anything else into a failure naming the exception."""

from __future__ import annotations

import datetime as _dt
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType

from solarian_agent.bringup.findings import Finding, bringup, fail, ok, one_line, warn
from solarian_agent.bringup.profile import STEPS, CameraEntry, RobotProfile
from solarian_agent.core.errors import ConfigError
from solarian_agent.hw.errors import CalibrationError, HardwareError

MAX_CHECK_AGE_DAYS = 30.0  # a camera knocked or an arm moved a little in a month: check again
# ROS 2 domain ids: 0..101 are safe on every platform; 102..232 work on Linux but may share
# ports with the operating system's ephemeral range (the ROS 2 documentation's advice)
SAFE_DOMAIN_IDS = range(0, 102)
MAX_DOMAIN_ID = 232
KNOWN_RMW = ("rmw_fastrtps_cpp", "rmw_fastrtps_dynamic_cpp", "rmw_cyclonedds_cpp",
             "rmw_connextdds", "rmw_zenoh_cpp")
SIM_SOURCE = "sim"

Importer = Callable[[str], ModuleType]


# ------------------------------------------------------------------------------ profile
def profile_findings(profile: RobotProfile, now: _dt.datetime | None = None) -> list[Finding]:
    """"profile" (what it is), "bring-up steps" (which are missing), "pointing check" (ready,
    with the figures, and its age)."""
    cams = ", ".join(f"{c.name} ({c.mount})" for c in profile.cameras) or "none"
    port = profile.arm_port or "(no port)"
    out = [ok("profile", f"{profile.path}: robot {profile.name!r}, arm on {port} "
              f"({len(profile.servo_ids)} servo ids), cameras {cams}")]
    if not profile.cameras:
        out[0] = warn("profile", f"{profile.path}: no cameras: the skills see nothing",
                      bringup("cameras"))
    missing = [s for s in STEPS if not profile.done(s)]
    if missing:
        out.append(warn("bring-up steps", f"not done: {', '.join(missing)}", bringup()))
    else:
        out.append(ok("bring-up steps", f"all {len(STEPS)} done ({', '.join(STEPS)})"))
    out.append(pointing_finding(profile, now))
    return out


def pointing_finding(profile: RobotProfile, now: _dt.datetime | None = None) -> Finding:
    name = "pointing check"
    check = profile.check
    fix = bringup("check")
    if check is None:
        return fail(name, "never ran: the robot is not ready", fix)
    figures = ", ".join(f"{c} {check.worst_mm(c):.1f} mm" for c in check.errors_mm)
    threshold = f"threshold {check.threshold_mm:g} mm"
    if not check.passed:
        why = "; ".join(check.failures()) or "no camera's figures recorded"
        return fail(name, f"failed: {why}: the robot is not ready", fix)
    if not profile.ready:
        return fail(name, f"passed ({figures}; {threshold}) but before the last pose "
                    f"measurement ({profile.steps.get('poses', '?')}): not ready", fix)
    unchecked = [c.name for c in profile.cameras if c.name not in check.errors_mm]
    age = profile.age_days(now)
    when = "" if age is None else " today" if age < 1 else f" {age:.0f} days ago"
    found = f"passed{when}: {figures} ({threshold})"
    if unchecked:
        return warn(name, f"{found}; not checked: {', '.join(unchecked)}", fix)
    if age is not None and age > MAX_CHECK_AGE_DAYS:
        return warn(name, f"{found}; older than {MAX_CHECK_AGE_DAYS:.0f} days: a camera or "
                    "the arm may have moved since", fix)
    return ok(name, found)


# ------------------------------------------------------------------------------ cameras
def camera_findings(cam: CameraEntry, timeout_s: float) -> list[Finding]:
    """"camera NAME": the source opens and delivers a frame of the profile's size;
    "camera NAME calibration": the file loads with intrinsics at that size and a pose in the
    frame its mount says."""
    return [camera_stream(cam, timeout_s), camera_calibration(cam)]


def camera_stream(cam: CameraEntry, timeout_s: float) -> Finding:
    from solarian_agent.hw.camera.opencv import OpenCVCamera, OpenCVCameraConfig

    name = f"camera {cam.name}"
    src = cam.source
    pick = bringup("cameras")
    if src == SIM_SOURCE:
        return warn(name, "source 'sim': a simulated camera, written on the simulator",
                    f"{pick} with the camera plugged in")
    if not src:
        return fail(name, "the profile names no source", pick)
    # a device is asked for the profile's mode, as the robot's camera node asks; a video
    # file has only its own size (asking would log a "not honoured" warning for nothing)
    size = None if os.path.isfile(src) else (cam.width, cam.height)
    camera = OpenCVCamera(OpenCVCameraConfig(
        source=src, width=size and size[0], height=size and size[1], frame_id=cam.name,
        stall_timeout_s=timeout_s, reconnect_attempts=0))
    unplugged = (f"plug it in (cameras now: `ls /dev/v4l/by-id/`), or pick its source "
                 f"again: {pick}")
    try:
        camera.connect()
    except (HardwareError, ConfigError, OSError) as e:
        if not src.isdigit() and not os.path.exists(src):
            return fail(name, f"source {src} does not exist: unplugged?", unplugged)
        return fail(name, f"source {src} does not open: {_short(e, cam.name, src)}",
                    unplugged)
    try:
        frame = camera.read(timeout_s)
    except HardwareError as e:
        return fail(name, f"source {src} opens but delivers no frame within {timeout_s:g} s "
                    f"({one_line(e)})", unplugged)
    finally:
        camera.disconnect()
    h, w = frame.data.shape[:2]
    if (w, h) != (cam.width, cam.height):
        return fail(name, f"source {src} delivers {w}x{h} frames, the profile says "
                    f"{cam.width}x{cam.height}",
                    f"run it at {cam.width}x{cam.height} (another mode, or another camera "
                    f"plugged into its port?), or pick its mode again: {pick}")
    return ok(name, f"source {src} delivers {w}x{h} frames")


def _short(e: Exception, camera: str, src: str) -> str:
    """The driver's message without its "camera 'NAME' (SOURCE): " (the line says both)."""
    text = one_line(e)
    prefix = f"camera {camera!r} ({src}): "
    return text[len(prefix):] if text.startswith(prefix) else text


def camera_calibration(cam: CameraEntry) -> Finding:
    from solarian_agent.hw.camera.calibration import CameraCalibration

    name = f"camera {cam.name} calibration"
    intrinsics = bringup("intrinsics")
    poses = bringup("poses")
    path = cam.calibration_file
    if not path:
        return fail(name, "the profile names no calibration file", intrinsics)
    p = Path(path).expanduser()
    if not p.is_file():
        return fail(name, f"{p} does not exist", intrinsics)
    try:
        cal = CameraCalibration.load(p)
    except (ConfigError, CalibrationError, OSError) as e:
        return fail(name, f"{p} does not load: {one_line(e)}", intrinsics)
    size = f"{cal.width}x{cal.height}"
    want = f"{cam.width}x{cam.height}"
    if cal.camera != cam.name:
        return fail(name, f"{p} is camera {cal.camera!r}'s calibration, not {cam.name!r}'s",
                    intrinsics)
    if (cal.width, cal.height) != (cam.width, cam.height):
        try:
            cal.scaled_k(cam.width, cam.height)
        except CalibrationError:
            return fail(name, f"{p}: intrinsics at {size}, the camera runs at {want} (another "
                        "aspect ratio)", intrinsics)
        return warn(name, f"{p}: intrinsics at {size}, scaled to the camera's {want}",
                    intrinsics)
    ext = cal.extrinsics
    if ext is None:
        return fail(name, f"{p}: intrinsics at {size}, no pose (extrinsics): the skills "
                    "cannot point through it", poses)
    if ext.parent_frame != cam.parent_frame:
        return fail(name, f"{p}: its pose is in {ext.parent_frame}, but a {cam.mount} camera's "
                    f"is in {cam.parent_frame}", poses)
    return ok(name, f"{p}: intrinsics at {size} (rms {cal.intrinsics.rms_px:.2f} px), pose in "
              f"{ext.parent_frame} (rms {ext.measurement.rms_px:.2f} px)")


# ------------------------------------------------------------------------------ ROS
def ros_findings(env: Mapping[str, str], import_module: Importer) -> list[Finding]:
    """"ROS": rclpy imports (a warning when not: the one-process simulator runs without it);
    "ROS_DOMAIN_ID" and "RMW_IMPLEMENTATION" when set."""
    from solarian_agent.cli_common import EXTRAS

    out: list[Finding] = []
    try:
        mod = import_module("rclpy")
        where = getattr(mod, "__file__", None) or "rclpy"
        out.append(ok("ROS", f"rclpy imports ({Path(where).parent})"))
    except Exception as e:  # a broken ROS set-up raises more than ImportError (a missing .so)
        out.append(warn("ROS", f"rclpy does not import ({type(e).__name__}: {one_line(e)}): "
                        "the ROS launch needs it, the one-process simulator does not",
                        EXTRAS["rclpy"]))
    domain = env.get("ROS_DOMAIN_ID")
    if domain is not None:
        out.append(_domain_finding(domain))
    rmw = env.get("RMW_IMPLEMENTATION")
    if rmw is not None:
        out.append(_rmw_finding(rmw, env))
    return out


def _domain_finding(text: str) -> Finding:
    name = "ROS_DOMAIN_ID"
    fix = "`export ROS_DOMAIN_ID=0` (any of 0..101), or `unset ROS_DOMAIN_ID`"
    value = text.strip()
    if not value.isdigit() or int(value) > MAX_DOMAIN_ID:
        return fail(name, f"{text!r} is not a domain id (0..{MAX_DOMAIN_ID}): every ROS node "
                    "would fail to start", fix)
    if int(value) not in SAFE_DOMAIN_IDS:
        return warn(name, f"{value}: above 101, it may share ports with the system's "
                    "ephemeral range", fix)
    return ok(name, value)


def _rmw_finding(name_: str, env: Mapping[str, str]) -> Finding:
    name = "RMW_IMPLEMENTATION"
    fix = "`unset RMW_IMPLEMENTATION` (the default, rmw_fastrtps_cpp) or install that RMW"
    rmw = name_.strip()
    if not rmw.startswith("rmw_"):
        return warn(name, f"{name_!r} is not an RMW implementation (rmw_...; known: "
                    f"{', '.join(KNOWN_RMW)})", fix)
    found = _find_library(f"lib{rmw}.so", env)
    if found is None:
        return warn(name, f"{rmw}: no lib{rmw}.so under the ROS prefixes or the library path: "
                    "rclpy would fail to initialise", fix)
    return ok(name, f"{rmw} ({found})")


def _find_library(lib: str, env: Mapping[str, str]) -> Path | None:
    """Where the RMW's library lies: the ament prefixes' lib/, the library path, and this
    Python's prefix (the PyPI ROS wheels put their libraries there)."""
    dirs = [Path(p) / "lib" for p in env.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    dirs += [Path(p) for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    dirs.append(Path(sys.prefix) / "lib")
    return next((d / lib for d in dirs if (d / lib).is_file()), None)


__all__ = ["MAX_CHECK_AGE_DAYS", "camera_calibration", "camera_findings", "camera_stream",
           "pointing_finding", "profile_findings", "ros_findings"]
