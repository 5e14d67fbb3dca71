"""The robot profile: one file that says what this robot is and whether it is ready.

``solarian-agent bringup`` writes it step by step (each step records when it was done, so a
session resumes where it stopped); ``demo --robot``, the launch files, the panel and
``solarian-agent doctor`` read it.  Default path ``~/.config/solarian_agent/robot.yaml`` (or
``$SOLARIAN_ROBOT_PROFILE``)::

    robot_profile:
      version: 1
      name: so101
      created: "2026-12-06T10:00:00+00:00"
      updated: "2026-12-06T10:40:00+00:00"
      arm:
        port: /dev/ttyACM0              # "sim" for the simulated robot
        calibration_file: ~/.config/solarian_agent/arm_so101.yaml
        ids: {shoulder_pan: 1, shoulder_lift: 2, elbow_flex: 3, wrist_flex: 4,
              wrist_roll: 5, gripper: 6}
      cameras:
        - name: overhead
          source: "0"                   # OpenCV index, a /dev/video path, a file, or "sim"
          width: 640
          height: 480
          mount: fixed                  # fixed: a pose in base_link; gripper: in gripper_link
          calibration_file: ~/.config/solarian_agent/cameras/overhead.yaml
      steps:                            # step -> when it was last done
        servos: "2026-12-06T10:02:00+00:00"
      check:                            # the pointing check (null until run)
        measured_at: "..."
        threshold_mm: 5.0
        errors_mm: {overhead: [1.2, 0.8, 2.0, 1.1], wrist: [1.9, 2.4, 1.0, 1.6]}

The profile is ready when the pointing check ran and every camera's largest error is under the
threshold: a robot that points 4 cm beside the cup is not ready, whatever else was done.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from solarian_agent.core.errors import ConfigError

VERSION = 1
ENV_PROFILE = "SOLARIAN_ROBOT_PROFILE"
STEPS = ("servos", "arm_calibration", "cameras", "intrinsics", "poses", "check")
MOUNTS = ("fixed", "gripper")
MOUNT_FRAMES = {"fixed": "base_link", "gripper": "gripper_link"}
DEFAULT_THRESHOLD_MM = 5.0


def default_profile_path() -> Path:
    """``$SOLARIAN_ROBOT_PROFILE``, else ``$XDG_CONFIG_HOME/solarian_agent/robot.yaml``, else
    ``~/.config/solarian_agent/robot.yaml``."""
    env = os.environ.get(ENV_PROFILE, "").strip()
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CONFIG_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".config"
    return base / "solarian_agent" / "robot.yaml"


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def parse_iso(text: str) -> _dt.datetime | None:
    try:
        t = _dt.datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    return t if t.tzinfo else t.replace(tzinfo=_dt.timezone.utc)


@dataclass(frozen=True)
class CameraEntry:
    name: str
    source: str
    width: int = 640
    height: int = 480
    mount: str = "fixed"
    calibration_file: str = ""

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").isalnum():
            raise ConfigError("camera.name", f"{self.name!r} is not a camera name "
                                             "(letters, digits, _)")
        if self.mount not in MOUNTS:
            raise ConfigError(f"cameras.{self.name}.mount",
                              f"{self.mount!r} is not one of {', '.join(MOUNTS)}")
        if self.width < 1 or self.height < 1:
            raise ConfigError(f"cameras.{self.name}", f"image size {self.width}x{self.height} "
                                                      "must be positive")

    @property
    def parent_frame(self) -> str:
        return MOUNT_FRAMES[self.mount]


@dataclass(frozen=True)
class PointingCheck:
    """The pointing check's figures: per camera, the error (mm) at each mark."""

    measured_at: str
    threshold_mm: float
    errors_mm: Mapping[str, tuple[float, ...]]

    def worst_mm(self, camera: str) -> float:
        errs = self.errors_mm.get(camera, ())
        return max(errs) if errs else math.inf

    @property
    def passed(self) -> bool:
        return bool(self.errors_mm) and all(
            self.worst_mm(c) < self.threshold_mm for c in self.errors_mm)

    def failures(self) -> list[str]:
        return [f"{c}: {self.worst_mm(c):.1f} mm (threshold {self.threshold_mm:g} mm)"
                for c in self.errors_mm if not self.worst_mm(c) < self.threshold_mm]


@dataclass(frozen=True)
class RobotProfile:
    name: str = "so101"
    arm_port: str = ""
    arm_calibration_file: str = ""
    servo_ids: Mapping[str, int] = field(default_factory=dict)
    cameras: tuple[CameraEntry, ...] = ()
    steps: Mapping[str, str] = field(default_factory=dict)
    check: PointingCheck | None = None
    created: str = ""
    updated: str = ""
    path: str = field(default="", compare=False)

    @property
    def ready(self) -> bool:
        """The pointing check ran after the last pose measurement and passed."""
        if self.check is None or not self.check.passed:
            return False
        poses = parse_iso(self.steps.get("poses", ""))
        checked = parse_iso(self.check.measured_at)
        return poses is None or (checked is not None and checked >= poses)

    def camera(self, name: str) -> CameraEntry | None:
        return next((c for c in self.cameras if c.name == name), None)

    def done(self, step: str) -> bool:
        return step in self.steps

    def with_step(self, step: str, when: str = "") -> RobotProfile:
        if step not in STEPS:
            raise ValueError(f"unknown bring-up step {step!r}; steps are {', '.join(STEPS)}")
        return replace(self, steps={**self.steps, step: when or now_iso()})

    def with_camera(self, cam: CameraEntry) -> RobotProfile:
        rest = tuple(c for c in self.cameras if c.name != cam.name)
        return replace(self, cameras=(*rest, cam))

    def age_days(self, now: _dt.datetime | None = None) -> float | None:
        """Days since the pointing check (None when it never ran)."""
        if self.check is None:
            return None
        t = parse_iso(self.check.measured_at)
        if t is None:
            return None
        now = now or _dt.datetime.now(_dt.timezone.utc)
        return (now - t).total_seconds() / 86400.0

    def summary(self) -> dict[str, Any]:
        """What the operator panel shows of the robot: whether it is ready, and the pointing
        check's worst error per camera (no paths, ports or ids: the panel is a web page)."""
        check = self.check
        return {"name": self.name, "ready": self.ready,
                "checked_at": check.measured_at if check is not None else "",
                "threshold_mm": check.threshold_mm if check is not None else None,
                "worst_mm": ({c: round(check.worst_mm(c), 1) for c in check.errors_mm}
                             if check is not None else {}),
                "missing_steps": [s for s in STEPS if s not in self.steps]}

    # YAML -------------------------------------------------------------------------------
    def to_mapping(self) -> dict[str, Any]:
        check = None
        if self.check is not None:
            check = {"measured_at": self.check.measured_at,
                     "threshold_mm": float(self.check.threshold_mm),
                     "errors_mm": {c: [round(float(v), 2) for v in errs]
                                   for c, errs in self.check.errors_mm.items()}}
        return {"robot_profile": {
            "version": VERSION, "name": self.name, "created": self.created,
            "updated": self.updated,
            "arm": {"port": self.arm_port, "calibration_file": self.arm_calibration_file,
                    "ids": {k: int(v) for k, v in self.servo_ids.items()}},
            "cameras": [{"name": c.name, "source": c.source, "width": c.width,
                         "height": c.height, "mount": c.mount,
                         "calibration_file": c.calibration_file} for c in self.cameras],
            "steps": dict(self.steps),
            "check": check,
        }}

    def save(self, path: str | Path | None = None) -> Path:
        from solarian_agent.core.config import write_yaml

        stamp = now_iso()
        prof = replace(self, created=self.created or stamp, updated=stamp)
        return write_yaml(path or self.path or default_profile_path(), prof.to_mapping(),
                          "# Robot profile for solarian_agent, written by `solarian-agent "
                          "bringup` (the format: solarian_agent/bringup/profile.py).\n")

    @classmethod
    def load(cls, path: str | Path | None = None) -> RobotProfile:
        from solarian_agent.core.config import yaml_block

        p = Path(path or default_profile_path()).expanduser()
        block = yaml_block(p, "robot_profile",
                           "robot profile not found (make it with `solarian-agent bringup`)")
        return replace(cls.from_mapping(block, where=f"{p}:robot_profile"), path=str(p))

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any], where: str = "robot_profile") -> RobotProfile:
        version = m.get("version", VERSION)
        if version != VERSION:
            raise ConfigError(f"{where}.version", f"{version!r} is not a supported version "
                                                  f"(this package reads {VERSION})")
        arm = _mapping(m.get("arm") or {}, f"{where}.arm")
        ids = _mapping(arm.get("ids") or {}, f"{where}.arm.ids")
        servo_ids = {}
        for joint, sid in ids.items():
            if not isinstance(sid, int) or isinstance(sid, bool) or not 0 <= sid <= 253:
                raise ConfigError(f"{where}.arm.ids.{joint}", f"{sid!r} is not a servo id "
                                                               "(0..253)")
            servo_ids[str(joint)] = sid
        cams = m.get("cameras") or []
        if not isinstance(cams, list):
            raise ConfigError(f"{where}.cameras", "expected a list of cameras")
        cameras = []
        for i, c in enumerate(cams):
            cw = f"{where}.cameras[{i}]"
            c = _mapping(c, cw)
            try:
                cameras.append(CameraEntry(
                    name=str(c.get("name", "")), source=str(c.get("source", "")),
                    width=_int(c.get("width", 640), f"{cw}.width"),
                    height=_int(c.get("height", 480), f"{cw}.height"),
                    mount=str(c.get("mount", "fixed")),
                    calibration_file=str(c.get("calibration_file") or "")))
            except ConfigError as e:
                raise ConfigError(cw, str(e)) from None
        if len({c.name for c in cameras}) != len(cameras):
            raise ConfigError(f"{where}.cameras", "a camera name appears twice")
        steps = _mapping(m.get("steps") or {}, f"{where}.steps")
        for s in steps:
            if s not in STEPS:
                raise ConfigError(f"{where}.steps.{s}", f"not one of {', '.join(STEPS)}")
        return cls(name=str(m.get("name") or "so101"), arm_port=str(arm.get("port") or ""),
                   arm_calibration_file=str(arm.get("calibration_file") or ""),
                   servo_ids=servo_ids, cameras=tuple(cameras),
                   steps={str(k): str(v) for k, v in steps.items()},
                   check=_check(m.get("check"), f"{where}.check"),
                   created=str(m.get("created") or ""), updated=str(m.get("updated") or ""))


def _mapping(v: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise ConfigError(where, f"expected a mapping, got {type(v).__name__}")
    return v


def _int(v: Any, where: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise ConfigError(where, f"expected a whole number, got {v!r}")
    return v


def _check(v: Any, where: str) -> PointingCheck | None:
    if v is None:
        return None
    m = _mapping(v, where)
    thr = m.get("threshold_mm", DEFAULT_THRESHOLD_MM)
    if not isinstance(thr, (int, float)) or isinstance(thr, bool) or not thr > 0:
        raise ConfigError(f"{where}.threshold_mm", f"expected a number > 0, got {thr!r}")
    errs = _mapping(m.get("errors_mm") or {}, f"{where}.errors_mm")
    out: dict[str, tuple[float, ...]] = {}
    for cam, vals in errs.items():
        if not isinstance(vals, list) or not all(
                isinstance(e, (int, float)) and not isinstance(e, bool) and e >= 0
                for e in vals):
            raise ConfigError(f"{where}.errors_mm.{cam}", "expected a list of errors >= 0 (mm)")
        out[str(cam)] = tuple(float(e) for e in vals)
    return PointingCheck(str(m.get("measured_at") or ""), float(thr), out)


__all__ = ["DEFAULT_THRESHOLD_MM", "ENV_PROFILE", "MOUNTS", "MOUNT_FRAMES", "STEPS",
           "CameraEntry", "PointingCheck", "RobotProfile", "default_profile_path", "now_iso"]
