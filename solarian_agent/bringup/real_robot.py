"""The real SO-101 as a :class:`~solarian_agent.bringup.robot.BringupRobot`, and the people
around it: the arm on its Feetech bus through the same controller the robot runs (limits,
speed and the workspace guard apply to every move bring-up makes), the cameras through
OpenCV, and prompts for what a person does (hold the board up, lay it down, read a ruler).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass

import numpy as np

from solarian_agent.arm.kinematics import ArmModel
from solarian_agent.core.clock import SystemClock

ARM_JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll")
SLOW_RAD_S = 0.35  # slow enough to stop by hand
ARRIVED_RAD = math.radians(1.0)


class RealBringupRobot:
    """The arm on ``port`` with ``calibration_file``; cameras by name -> OpenCV source."""

    def __init__(self, port: str, calibration_file: str, cameras: Mapping[str, str],
                 stack: ExitStack, arm: ArmModel | None = None) -> None:
        from solarian_agent.hw.camera.opencv import OpenCVCamera, OpenCVCameraConfig
        from solarian_agent.hw.feetech.arm import FeetechArm, FeetechArmConfig
        from solarian_agent.hw.feetech.controller import ArmController, ArmControllerConfig

        self.arm = arm or ArmModel.default()
        self.clock = SystemClock()
        hw = FeetechArm(FeetechArmConfig(port=port, calibration_file=calibration_file))
        hw.connect()
        stack.callback(hw.disconnect)
        self.ctl = ArmController(hw, self.clock, ArmControllerConfig(
            rate_hz=hw.config.rate_hz, command_timeout_s=2.0))
        self.ctl.step()  # torque on, holding where the arm is, before the first target
        self._stop = threading.Event()
        loop = threading.Thread(target=self.ctl.run, args=(self._stop,), name="bringup-arm",
                                daemon=True)
        loop.start()
        stack.callback(loop.join, 2.0)
        stack.callback(self._stop.set)
        self._cams = {}
        for name, source in cameras.items():
            src: int | str = int(source) if source.isdigit() else source
            cam = OpenCVCamera(OpenCVCameraConfig(source=src, frame_id=name))
            cam.connect()
            stack.callback(cam.disconnect)
            self._cams[name] = cam

    @property
    def cameras(self) -> tuple[str, ...]:
        return tuple(self._cams)

    def joints(self) -> np.ndarray:
        now = self.ctl.positions()
        return np.array([now.get(j, 0.0) for j in (*ARM_JOINTS, "gripper")], float)

    def move(self, q5: np.ndarray, timeout_s: float = 15.0) -> bool:
        target = {j: float(v) for j, v in zip(ARM_JOINTS, q5, strict=True)}
        deadline = self.clock.now() + timeout_s
        while self.clock.now() < deadline:
            if self.ctl.latch.tripped:
                return False
            # sent again every 0.1 s: the controller holds the arm when commands stop
            self.ctl.command(target, source="operator", max_velocity=SLOW_RAD_S)
            now = self.ctl.positions()
            if now and all(abs(now[j] - target[j]) <= ARRIVED_RAD for j in ARM_JOINTS):
                self.clock.sleep_until(self.clock.now() + 0.3, self._stop)  # settle
                return True
            self.clock.sleep_until(self.clock.now() + 0.1, self._stop)
        self.ctl.hold("bring-up move timed out")
        return False

    def grab(self, camera: str) -> np.ndarray:
        frame = self._cams[camera].read(timeout_s=2.0)
        img: np.ndarray = frame.data
        return img

    def close(self) -> None:
        self._stop.set()


@dataclass(frozen=True)
class PersonHolder:
    """Asks the operator to hold the board up to the fixed camera."""

    ask: Callable[[str], str]

    def present(self, index: int, total: int) -> None:
        self.ask(f"  view {index + 1}/{total}: hold the board before the camera, tilted, in "
                 "another part of the image, then press Enter ")

    def put_down(self) -> None:
        self.ask("  lay the board flat on the table where both cameras see it, then press "
                 "Enter ")


@dataclass(frozen=True)
class PersonLayer:
    """Asks the operator to lay the board at another place on the table."""

    ask: Callable[[str], str]

    def lay(self, index: int, total: int) -> None:
        if index:
            self.ask(f"  place {index + 1}/{total}: lay the board flat elsewhere on the table "
                     "(in reach, in both cameras' view), then press Enter ")


__all__ = ["PersonHolder", "PersonLayer", "RealBringupRobot"]
