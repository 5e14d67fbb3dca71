"""OpenCVCamera against real video files written with cv2.VideoWriter."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from solarian_agent.core.clock import FakeClock
from solarian_agent.core.errors import ConfigError
from solarian_agent.hw.camera import OpenCVCamera, OpenCVCameraConfig
from solarian_agent.hw.errors import (
    CameraDisconnectedError,
    CameraStalledError,
    DeviceAlreadyConnectedError,
    DeviceNotConnectedError,
    DeviceNotFoundError,
    EndOfStreamError,
)

W, H, N, FPS = 64, 48, 8, 10.0


@pytest.fixture
def video(tmp_path: Path) -> str:
    path = str(tmp_path / "clip.avi")
    out = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"MJPG"), FPS, (W, H))
    assert out.isOpened()
    for i in range(N):  # a white square walking right: every frame differs
        img = np.zeros((H, W, 3), np.uint8)
        img[10:30, i * 6:i * 6 + 12] = 255
        out.write(img)
    out.release()
    return path


def test_reads_every_frame_with_stamp_and_seq(video: str) -> None:
    clock = FakeClock()
    cam = OpenCVCamera(OpenCVCameraConfig(source=video, frame_id="overhead",
                                          stall_timeout_s=1.0), clock)
    with pytest.raises(DeviceNotConnectedError):
        cam.read()
    cam.connect()
    try:
        seqs, stamps = [], []
        for _ in range(N):
            f = cam.read()
            clock.advance(0.1)
            assert f.data.shape == (H, W, 3) and not f.data.flags.writeable
            assert f.dropped == 0 and f.frame_id == "overhead"
            seqs.append(f.seq)
            stamps.append(f.stamp)
        assert seqs == list(range(1, N + 1))
        assert stamps == sorted(stamps) and stamps[0] >= 1000.0
        img = f.to_image()
        assert (img.width, img.height, img.seq) == (W, H, N)
        with pytest.raises(EndOfStreamError, match="end of video file"):
            cam.read(timeout_s=1.0)
        assert cam.status == "ended"
        with pytest.raises(DeviceAlreadyConnectedError):
            cam.connect()
    finally:
        cam.disconnect()
    assert cam.status == "disconnected"


def test_unhonoured_settings_are_reported(video: str) -> None:
    cam = OpenCVCamera(OpenCVCameraConfig(source=video, width=640, height=480, fps=30,
                                          fourcc="YUYV"))
    with cam:
        assert cam.actual is not None
        assert (cam.actual.width, cam.actual.height) == (W, H)
        text = " | ".join(cam.warnings)
        assert "requested 640x480, device delivers 64x48" in text
        assert "requested 30 fps" in text
        assert "requested fourcc YUYV" in text
        assert cam.read().data.shape == (H, W, 3)
    honoured = OpenCVCamera(OpenCVCameraConfig(source=video, width=W, height=H, fps=FPS))
    with honoured:
        assert honoured.warnings == []


def test_missing_device_or_file() -> None:
    with pytest.raises(DeviceNotFoundError, match="does not exist"):
        OpenCVCamera(OpenCVCameraConfig(source="/dev/video-missing-99")).connect()
    with pytest.raises(ConfigError, match="camera.fourcc"):
        OpenCVCameraConfig(source=0, fourcc="MJPEG")


class _Flaky:
    """A live device made from a clip (it loops), that stalls or vanishes on cue."""

    def __init__(self, real: Any, fail_after: int | None = None,
                 gate: threading.Event | None = None, constant: bool = False) -> None:
        self.real, self.fail_after, self.gate, self.constant = real, fail_after, gate, constant
        self.n = 0
        self.first: Any = None

    def isOpened(self) -> bool:  # noqa: N802
        return bool(self.real.isOpened())

    def read(self) -> tuple[bool, Any]:
        self.n += 1
        if self.fail_after is not None and self.n > self.fail_after:
            if self.gate is not None:
                self.gate.wait(2.0)  # a stalled device: the grab blocks
                self.gate = None
                self.fail_after = None
            else:
                return False, None
        if self.constant and self.first is not None:
            return True, self.first.copy()
        ok, img = self.real.read()
        if not ok:  # a live camera never ends: loop the clip
            self.real.set(cv2.CAP_PROP_POS_FRAMES, 0)
            ok, img = self.real.read()
        if self.first is None:
            self.first = img
        return ok, img

    def set(self, prop: int, value: float) -> bool:
        return bool(self.real.set(prop, value))

    def get(self, prop: int) -> float:
        return float(self.real.get(prop))

    def release(self) -> None:
        self.real.release()


def test_stalled_device_is_reported_then_recovers(video: str) -> None:
    gate = threading.Event()

    def factory(src: int | str, api: int) -> Any:
        return _Flaky(cv2.VideoCapture(src, api), fail_after=2, gate=gate)

    cam = OpenCVCamera(OpenCVCameraConfig(source=video, kind="device", stall_timeout_s=0.2),
                       capture_factory=factory)
    with cam:
        first = cam.read()  # frame 1 or 2 (a live device: the newest one)
        with pytest.raises(CameraStalledError, match=r"no new frame within 0.20 s"):
            for _ in range(3):  # the device blocks after its 2nd frame
                cam.read()
        assert cam.status == "stalled"
        with pytest.raises(CameraStalledError):  # never the old frame passed off as new
            cam.read(timeout_s=0.05)
        gate.set()
        f = cam.read(timeout_s=1.0)
        assert f.seq > first.seq and cam.status == "streaming"


def test_device_disappears_and_reconnects(video: str) -> None:
    opened = []

    def factory(src: int | str, api: int) -> Any:
        opened.append(src)
        return _Flaky(cv2.VideoCapture(src, api), fail_after=3 if len(opened) == 1 else None)

    cam = OpenCVCamera(OpenCVCameraConfig(source=video, kind="device",
                                          reconnect_backoff_s=0.01, stall_timeout_s=1.0),
                       capture_factory=factory)
    with cam:
        seqs = [cam.read().seq for _ in range(3)]
        f = cam.read()  # served by the reopened capture
        assert f.seq > seqs[-1]
        assert cam.stats()["reconnects"] == 1 and len(opened) == 2


def test_device_gone_for_good(video: str) -> None:
    calls = []

    class Closed:
        def isOpened(self) -> bool:  # noqa: N802
            return False

        def release(self) -> None: ...

    def factory(src: int | str, api: int) -> Any:
        calls.append(src)
        if len(calls) == 1:
            return _Flaky(cv2.VideoCapture(src, api), fail_after=1)
        return Closed()

    cam = OpenCVCamera(OpenCVCameraConfig(source=video, kind="device", reconnect_attempts=2,
                                          reconnect_backoff_s=0.01), capture_factory=factory)
    with cam:
        cam.read()
        with pytest.raises(CameraDisconnectedError, match="2 reconnect attempt"):
            cam.read(timeout_s=1.0)
        assert cam.status == "failed" and len(calls) == 3
        assert isinstance(CameraDisconnectedError("x"), DeviceNotConnectedError)


def test_frozen_frames_are_not_new(video: str) -> None:
    def factory(src: int | str, api: int) -> Any:
        return _Flaky(cv2.VideoCapture(src, api), constant=True)

    cam = OpenCVCamera(OpenCVCameraConfig(source=video, kind="device", stall_timeout_s=0.15),
                       capture_factory=factory)
    with cam:
        cam.read()
        with pytest.raises(CameraStalledError, match="identical frames rejected"):
            cam.read()
        assert cam.stats()["duplicates"] > 0
