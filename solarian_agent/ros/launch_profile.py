"""The robot launch from the robot profile that ``solarian-agent bringup`` wrote (no ROS
imports).

``profile:=auto`` (the default) reads ``~/.config/solarian_agent/robot.yaml`` when it exists,
``profile:=PATH`` that file (it must exist), ``profile:=none`` none.  From a profile the launch
takes what its own arguments leave at their defaults: the cameras and their sources, the servo
port, the arm's calibration file and the cameras' calibration directory; and the robot
description gets each camera where bring-up measured it (static frames under the URDF's
tree).  A profile whose pointing check did not pass stops the launch with the reason, unless
``require_ready:=false``: a robot that reaches beside where its camera saw the cup is not
ready for a task.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..bringup.profile import RobotProfile, default_profile_path
from ..core.errors import ConfigError
from ..hw.camera.calibration import CameraCalibration

DEFAULTS = {"cameras": "overhead=0,wrist=2", "port": "", "arm_config": "",
            "calibration_dir": ""}


@dataclass(frozen=True)
class ProfiledArgs:
    args: dict[str, str]
    profile: RobotProfile | None = None
    calibrations: dict[str, CameraCalibration] = field(default_factory=dict)


def _true(v: str) -> bool:
    return str(v).strip().lower() in ("1", "true", "yes", "on")


def profile_path(value: str) -> Path | None:
    v = value.strip()
    if v.lower() in ("", "none", "false", "off"):
        return None
    if v.lower() == "auto":
        p = default_profile_path()
        return p if p.is_file() else None
    p = Path(v).expanduser()
    if not p.is_file():
        raise ValueError(f"profile:={value}: no such file (make it with "
                         "`solarian-agent bringup`, or profile:=none)")
    return p


def apply_profile(args: Mapping[str, str]) -> ProfiledArgs:
    """``args`` with the profile's values where the arguments are at their defaults."""
    out = dict(args)
    path = profile_path(str(args.get("profile", "none")))
    if path is None:
        return ProfiledArgs(out)
    try:
        prof = RobotProfile.load(path)
    except ConfigError as e:
        raise ValueError(str(e)) from None
    if _true(args.get("require_ready", "true")) and not prof.ready:
        why = ("the pointing check failed: " + "; ".join(prof.check.failures())
               if prof.check is not None and not prof.check.passed
               else "the pointing check has not run since the cameras were last located")
        raise ValueError(f"the robot profile {path} is not ready ({why}): run `solarian-agent "
                         "bringup --step check`, or launch with require_ready:=false")
    if prof.cameras and out.get("cameras", DEFAULTS["cameras"]) == DEFAULTS["cameras"]:
        out["cameras"] = ",".join(f"{c.name}={c.source}" for c in prof.cameras)
    if prof.arm_port and prof.arm_port != "sim" and not out.get("port"):
        out["port"] = prof.arm_port
    if prof.arm_calibration_file and not out.get("arm_config"):
        out["arm_config"] = prof.arm_calibration_file
    cal_files = {c.name: Path(c.calibration_file).expanduser() for c in prof.cameras
                 if c.calibration_file}
    dirs = {str(p.parent) for p in cal_files.values()}
    if len(dirs) == 1 and not out.get("calibration_dir"):
        out["calibration_dir"] = dirs.pop()
    cals = {}
    for name, p in cal_files.items():
        if p.is_file():
            try:
                cals[name] = CameraCalibration.load(p)
            except ConfigError as e:
                raise ValueError(str(e)) from None
    return ProfiledArgs(out, prof, cals)


__all__ = ["ProfiledArgs", "apply_profile", "profile_path"]
