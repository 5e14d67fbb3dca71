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
from typing import Any

import numpy as np

from solarian_agent.arm.kinematics import ArmModel
from solarian_agent.core.clock import SystemClock

ARM_JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll")
SLOW_RAD_S = 0.35  # slow enough to stop by hand
ARRIVED_RAD = math.radians(1.0)


class RealBringupRobot:
    """The arm on ``port`` with ``calibration_file``; cameras by name -> OpenCV source.

    Nothing is opened until a step first needs the arm or a camera: the servo step before it
    opens the port on its own (one owner of a serial port at a time)."""

    def __init__(self, port: str, calibration_file: str, cameras: Mapping[str, str],
                 stack: ExitStack, arm: ArmModel | None = None) -> None:
        self.arm = arm or ArmModel.default()
        self.clock = SystemClock()
        self._port, self._cal_file, self._sources = port, calibration_file, dict(cameras)
        self._stack = stack
        self._stop = threading.Event()
        self._ctl: Any = None
        self._cams: dict[str, Any] = {}

    def _controller(self) -> Any:
        if self._ctl is None:
            from solarian_agent.hw.feetech.arm import FeetechArm, FeetechArmConfig
            from solarian_agent.hw.feetech.controller import ArmController, ArmControllerConfig

            hw = FeetechArm(FeetechArmConfig(port=self._port, calibration_file=self._cal_file))
            hw.connect()
            self._stack.callback(hw.disconnect)
            ctl = ArmController(hw, self.clock, ArmControllerConfig(
                rate_hz=hw.config.rate_hz, command_timeout_s=2.0))
            ctl.step()  # torque on, holding where the arm is, before the first target
            # the controller's loop runs on its own thread at the servo rate; this thread only
            # sends targets and reads positions
            loop = threading.Thread(target=ctl.run, args=(self._stop,), name="bringup-arm",
                                    daemon=True)
            loop.start()
            self._stack.callback(loop.join, 2.0)
            self._stack.callback(self._stop.set)
            self._ctl = ctl
        return self._ctl

    def _camera(self, name: str) -> Any:
        if name not in self._cams:
            from solarian_agent.hw.camera.opencv import OpenCVCamera, OpenCVCameraConfig

            source = self._sources[name]
            src: int | str = int(source) if source.isdigit() else source
            cam = OpenCVCamera(OpenCVCameraConfig(source=src, frame_id=name))
            cam.connect()
            self._stack.callback(cam.disconnect)
            self._cams[name] = cam
        return self._cams[name]

    @property
    def cameras(self) -> tuple[str, ...]:
        return tuple(self._sources)

    def joints(self) -> np.ndarray:
        now = self._controller().positions()
        return np.array([now.get(j, 0.0) for j in (*ARM_JOINTS, "gripper")], float)

    def move(self, q5: np.ndarray, timeout_s: float = 15.0) -> bool:
        target = {j: float(v) for j, v in zip(ARM_JOINTS, q5, strict=True)}
        ctl = self._controller()
        deadline = self.clock.now() + timeout_s
        while self.clock.now() < deadline:
            if ctl.latch.tripped:
                return False
            # sent again every 0.1 s: the controller holds the arm when commands stop
            ctl.command(target, source="operator", max_velocity=SLOW_RAD_S)
            now = ctl.positions()
            if now and all(abs(now[j] - target[j]) <= ARRIVED_RAD for j in ARM_JOINTS):
                self.clock.sleep_until(self.clock.now() + 0.3, self._stop)  # settle
                return True
            self.clock.sleep_until(self.clock.now() + 0.1, self._stop)
        ctl.hold("bring-up move timed out")
        return False

    def grab(self, camera: str) -> np.ndarray:
        frame = self._camera(camera).read(timeout_s=2.0)
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
