"""Calibration files that describe the simulator's cameras (a documented test double).

The robot graph's tests run ``robot.launch.py`` on video files and a simulated servo bus; its
skills need calibrated cameras like a real robot's.  These files say what the simulator's
cameras are (the URDF's fixed overhead pose and the simulated intrinsics), marked as such in
their ``method``; the wrist camera, which moves with the arm, gets intrinsics only, as a real
one would.  Nothing outside tests should use them: a real camera is calibrated with
``solarian-agent calibrate-camera``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from solarian_agent.hw.camera.calibration import (
    CameraCalibration,
    Extrinsics,
    Measurement,
    calibration_path,
)

FIXED = ("overhead",)


def sim_calibration(camera: str, width: int = 0, height: int = 0) -> CameraCalibration:
    """The simulator's ``camera`` as a calibration file would describe it, at ``width`` x
    ``height`` (default: the simulated size; another size of the same aspect ratio scales K)."""
    from solarian_agent.arm.kinematics import ArmModel
    from solarian_agent.sim.camera import CAMERA_SPECS, camera_from_urdf

    spec = CAMERA_SPECS[camera]
    m = Measurement("2026-01-01T00:00:00+00:00", "the simulator's camera model (test double)",
                    0.0, 0)
    cal = CameraCalibration(camera, spec.width, spec.height, spec.k, (0.0,) * 5, m)
    w, h = width or spec.width, height or spec.height
    cal = CameraCalibration(camera, w, h, cal.scaled_k(w, h), cal.d, m)
    if camera not in FIXED:
        return cal
    pose = camera_from_urdf(ArmModel.default(), spec).pose
    return cal.with_extrinsics(Extrinsics.from_matrix(pose, m, child_frame=spec.frame))


def write_sim_calibrations(directory: str | Path, cameras: Sequence[str] = ("overhead", "wrist"),
                           sizes: dict[str, tuple[int, int]] | None = None) -> list[Path]:
    out = []
    for cam in cameras:
        w, h = (sizes or {}).get(cam, (0, 0))
        out.append(sim_calibration(cam, w, h).save(calibration_path(cam, directory)))
    return out


__all__ = ["sim_calibration", "write_sim_calibrations"]
