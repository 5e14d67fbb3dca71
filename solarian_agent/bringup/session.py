"""The bring-up session: the steps in order, each recorded in the robot profile when done.

    servos -> arm_calibration -> cameras -> intrinsics -> poses -> check

A step already done is skipped (the session resumes where it stopped) unless it is asked for
again (``only``) or ``redo`` is set; every step's outcome and figures go into the report.  A
step that fails stops the session with its reason; the profile keeps what was done before it.
The camera steps write each camera's calibration file, which the profile names.

On the simulator the report also measures each figure against the simulator's truth (keys
ending ``_mm``: position errors, ``_deg``: rotation errors); bring-up never reads the truth to
calibrate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from solarian_agent.hw.camera.boards import BoardSpec
from solarian_agent.hw.camera.calibration import CameraCalibration
from solarian_agent.hw.errors import CalibrationError, HardwareError

from .camera_steps import (
    BoardHolder,
    BoardLayer,
    fixed_camera_intrinsics,
    fixed_camera_pose,
    locate_board,
    pose_error,
    wrist_camera,
)
from .pointing import MarkReference, PointingError, fixed_camera_marks, point_at
from .pointing import wrist_camera_marks as wrist_marks
from .profile import STEPS, CameraEntry, PointingCheck, RobotProfile, now_iso
from .robot import BringupRobot, SimTruth


class StepFailed(Exception):
    """A bring-up step could not be done; the message says why and what to do."""


class ServoStep(Protocol):
    def __call__(self) -> tuple[str, dict[str, int]]:
        """Check the bus: (port, joint -> servo id); raises ``HardwareError``."""


@dataclass
class Rig:
    """What the session works with: the robot, the people (or the simulator's hands) who lay
    and hold the board, who measures the pointing, and where files go."""

    robot: BringupRobot
    board: BoardSpec
    holder: BoardHolder  # holds the board up to the fixed camera
    layer: BoardLayer  # lays the board at its places on the table
    reference: MarkReference  # measures the pointing error
    board_guess: Sequence[np.ndarray]  # where each board place is, roughly (corners)
    park: np.ndarray  # an arm pose out of the fixed camera's view
    servos: ServoStep
    arm_calibration: Callable[[], str]  # returns the calibration file's path
    camera_sources: dict[str, str]
    calibration_dir: Path
    truth: SimTruth | None = None
    log: Callable[[str], None] = print
    fixed_views: int = 25


@dataclass
class Report:
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    ready: bool = False

    def as_json(self, profile: RobotProfile) -> dict[str, Any]:
        return {"ready": self.ready, "profile": profile.path, "steps": self.steps}


def _mm(v: float) -> float:
    return round(float(v), 3)


class Session:
    def __init__(self, rig: Rig, profile: RobotProfile, threshold_mm: float = 5.0,
                 only: Sequence[str] = (), redo: bool = False) -> None:
        bad = [s for s in only if s not in STEPS]
        if bad:
            raise ValueError(f"unknown step(s) {', '.join(bad)}; steps are {', '.join(STEPS)}")
        self.rig = rig
        self.profile = profile
        self.threshold_mm = threshold_mm
        self.only = tuple(only)
        self.redo = redo
        self.report = Report()

    # the run ----------------------------------------------------------------------------------
    def run(self) -> Report:
        table: dict[str, Callable[[], dict[str, Any]]] = {
            "servos": self._servos, "arm_calibration": self._arm_calibration,
            "cameras": self._cameras, "intrinsics": self._intrinsics, "poses": self._poses,
            "check": self._check}
        for step in STEPS:
            wanted = step in self.only if self.only else (self.redo
                                                          or not self.profile.done(step))
            if not wanted:
                self.report.steps[step] = {"status": "skipped", "done_at":
                                           self.profile.steps.get(step, "")}
                continue
            self.rig.log(f"[{step}]")
            try:
                figures = table[step]()
            except (StepFailed, HardwareError, CalibrationError, PointingError, OSError) as e:
                self.report.steps[step] = {"status": "failed", "reason": str(e)}
                self.rig.log(f"  failed: {e}")
                break
            self.profile = self.profile.with_step(step)
            self.profile.save()
            self.report.steps[step] = {"status": "done", **figures}
        self.report.ready = self.profile.ready
        return self.report

    # steps ------------------------------------------------------------------------------------
    def _servos(self) -> dict[str, Any]:
        port, ids = self.rig.servos()
        self.profile = replace(self.profile, arm_port=port, servo_ids=ids)
        self.rig.log(f"  {len(ids)} servos answer on {port}")
        return {"port": port, "ids": ids}

    def _arm_calibration(self) -> dict[str, Any]:
        path = self.rig.arm_calibration()
        self.profile = replace(self.profile, arm_calibration_file=path)
        self.rig.log(f"  the arm's calibration: {path}")
        return {"calibration_file": path}

    def _cameras(self) -> dict[str, Any]:
        out = {}
        for name in self.rig.robot.cameras:
            img = self.rig.robot.grab(name)
            h, w = img.shape[:2]
            mount = "gripper" if name == "wrist" else "fixed"
            snap = self.rig.calibration_dir / f"{name}_snapshot.png"
            import cv2

            snap.parent.mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(snap), img)
            self.profile = self.profile.with_camera(CameraEntry(
                name, self.rig.camera_sources.get(name, "sim"), w, h, mount,
                str(self.rig.calibration_dir / f"{name}.yaml")))
            self.rig.log(f"  {name}: {w}x{h}, {mount}; snapshot {snap}")
            out[name] = {"width": w, "height": h, "mount": mount, "snapshot": str(snap)}
        return {"cameras": out}

    def _cal_path(self, name: str) -> Path:
        return self.rig.calibration_dir / f"{name}.yaml"

    def _load(self, name: str) -> CameraCalibration:
        path = self._cal_path(name)
        if not path.is_file():
            raise StepFailed(f"no calibration file for the {name} camera ({path}): run "
                             "`solarian-agent bringup --step intrinsics` first")
        return CameraCalibration.load(path)

    def _intrinsics(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.rig.robot.cameras:
            if name == "wrist":
                continue  # measured from the arm's own views, with its pose ("poses")
            self.rig.log(f"  {name}: hold the board up to it at different angles")
            fig = fixed_camera_intrinsics(self.rig.robot, name, self.rig.board,
                                          self.rig.holder, n=self.rig.fixed_views,
                                          log=self.rig.log)
            fig.calibration.save(self._cal_path(name))
            k = fig.calibration.k
            self.rig.log(f"  {name}: fx {k[0]:.1f} fy {k[4]:.1f} cx {k[2]:.1f} cy {k[5]:.1f} px "
                         f"from {fig.views} views, {fig.rms_px:.2f} px")
            row: dict[str, Any] = {"rms_px": round(fig.rms_px, 4), "views": fig.views}
            if self.rig.truth is not None:
                k, t = fig.calibration.k, self.rig.truth.k[name]
                row.update(fx_error_px=round(k[0] - t[0], 3), fy_error_px=round(k[4] - t[4], 3),
                           cx_error_px=round(k[2] - t[2], 3), cy_error_px=round(k[5] - t[5], 3))
            out[name] = row
        return {"cameras": out}

    def _poses(self) -> dict[str, Any]:
        rig, robot = self.rig, self.rig.robot
        out: dict[str, Any] = {}
        if "wrist" not in robot.cameras:
            raise StepFailed("the poses step locates the board with the wrist camera; this "
                             "robot has none")
        wr = wrist_camera(robot, "wrist", rig.board, rig.board_guess[0],
                          _nominal_k(self.profile, robot), _size(self.profile, robot),
                          log=rig.log)
        wr.calibration.save(self._cal_path("wrist"))
        he = wr.hand_eye
        row: dict[str, Any] = {
            "views": he.views, "rms_px": round(he.rms_px, 4), "spread_mm": _mm(he.spread_mm),
            "spread_deg": round(he.spread_deg, 4),
            "intrinsics_rms_px": round(wr.intrinsics.rms_px, 4)}
        rig.log(f"  wrist: on the gripper from {he.views} arm poses: the board's pose "
                f"through each agrees within {he.spread_mm:.2f} mm / {he.spread_deg:.2f} deg, "
                f"{he.rms_px:.2f} px")
        if rig.truth is not None:
            d_mm, d_deg = pose_error(he.gripper_from_camera,
                                     rig.truth.gripper_from_camera["wrist"])
            row.update(position_error_mm=_mm(d_mm), rotation_error_deg=round(d_deg, 4))
            rig.log(f"  wrist: {d_mm:.2f} mm / {d_deg:.2f} deg from the simulator's truth")
        out["wrist"] = row
        for name in robot.cameras:
            if name == "wrist":
                continue
            intr = self._load(name)

            def locate(i: int) -> np.ndarray:
                if i == 0:
                    return he.base_from_board
                return locate_board(robot, "wrist", rig.board, wr.calibration,
                                    rig.board_guess[i])

            places = len(rig.board_guess)
            cal, rms = fixed_camera_pose(robot, name, rig.board, intr, [np.eye(4)] * places,
                                         rig.park, layer=rig.layer, locate=locate)
            rig.layer.lay(0, places)  # the board back where it started
            cal.save(self._cal_path(name))
            assert cal.extrinsics is not None
            row = {"rms_px": round(rms, 4), "places": places,
                   "corners": cal.extrinsics.measurement.count}
            if rig.truth is not None:
                d_mm, d_deg = pose_error(cal.extrinsics.base_from_camera,
                                         rig.truth.base_from_camera[name])
                row.update(position_error_mm=_mm(d_mm), rotation_error_deg=round(d_deg, 4))
            out[name] = row
            rig.log(f"  {name}: located from the board at {places} places, {rms:.2f} px")
            if rig.truth is not None:
                rig.log(f"  {name}: {row['position_error_mm']:.2f} mm / "
                        f"{row['rotation_error_deg']:.2f} deg from the simulator's truth")
        return {"cameras": out}

    def _check(self) -> dict[str, Any]:
        rig, robot = self.rig, self.rig.robot
        errors: dict[str, tuple[float, ...]] = {}
        out: dict[str, Any] = {}
        seen: dict[int, np.ndarray] = {}
        order = sorted(robot.cameras, key=lambda n: n == "wrist")  # fixed cameras first
        for name in order:
            cal = self._load(name)
            if cal.extrinsics is None:
                raise StepFailed(f"the {name} camera has no pose yet: run "
                                 "`solarian-agent bringup --step poses`")
            if cal.extrinsics.on_gripper:
                if not seen:
                    raise StepFailed("the wrist camera's check needs a fixed camera to find "
                                     "the marks first")
                est = wrist_marks(robot, name, cal, seen, log=rig.log)
            else:
                est = fixed_camera_marks(robot, name, cal, rig.park)
                seen = seen or est
            results = point_at(robot, name, est, rig.reference, log=rig.log)
            robot.move(rig.park)
            errors[name] = tuple(r.error_mm for r in results)
            marks: dict[str, Any] = {}
            for r in results:
                row: dict[str, Any] = {"error_mm": _mm(r.error_mm)}
                if rig.truth is not None:
                    row["estimate_error_mm"] = _mm(1000.0 * math.dist(
                        r.estimate[:2], rig.truth.marks[r.mark][:2]))
                marks[str(r.mark)] = row
            out[name] = {"marks": marks, "max_error_mm": _mm(max(errors[name]))}
        check = PointingCheck(now_iso(), self.threshold_mm, errors)
        self.profile = replace(self.profile, check=check)
        if not check.passed:
            self.profile.save()
            raise StepFailed("pointing off: " + "; ".join(check.failures())
                             + ": recalibrate the camera's pose (--step poses)")
        rig.log("  " + ", ".join(f"{c} worst {check.worst_mm(c):.1f} mm" for c in errors)
                + f" (threshold {self.threshold_mm:g} mm): ready")
        return {"threshold_mm": self.threshold_mm, "cameras": out, "passed": True}


def _nominal_k(profile: RobotProfile, robot: BringupRobot) -> tuple[float, ...]:
    """The wrist camera's K roughly, for planning its views: the simulator's, scaled."""
    from solarian_agent.sim.camera import WRIST

    w, h = _size(profile, robot)
    s = w / WRIST.width
    return (WRIST.fx * s, 0.0, w / 2.0, 0.0, WRIST.fy * s, h / 2.0, 0.0, 0.0, 1.0)


def _size(profile: RobotProfile, robot: BringupRobot) -> tuple[int, int]:
    cam = profile.camera("wrist")
    if cam is not None:
        return cam.width, cam.height
    img = robot.grab("wrist")
    return int(img.shape[1]), int(img.shape[0])


__all__ = ["Report", "Rig", "ServoStep", "Session", "StepFailed"]
