"""``OpenCVCamera``: a V4L2 / USB camera, or a video file, through ``cv2.VideoCapture``.

A background grab thread owns the capture; ``read()`` waits (bounded) for a frame *newer*
than the last one it returned, so a frame is never handed out twice and a stalled device is
reported as ``CameraStalledError`` instead of passing its last frame off as new.  Each frame
carries a capture timestamp from the passed clock, taken as the grab returns, and a sequence
number; ``dropped`` says how many newer frames the caller skipped.

- Requested width / height / fps / fourcc are applied on open and read back; what the device
  does not honour is listed in ``warnings`` (and ``actual``), not silently ignored.
- A device that disappears (grab fails) is reopened up to ``reconnect_attempts`` times with
  ``reconnect_backoff_s`` between tries; after that ``read()`` raises
  ``CameraDisconnectedError``.  ``status`` says where the camera is at any time.
- A video file ends with ``EndOfStreamError``.  Files are delivered frame by frame (every
  frame once, the grab thread waits for the reader: "lockstep") unless ``realtime`` is set,
  in which case they play at their own fps like a live camera.
- ``detect_frozen`` (default on for devices): content identical to the previous frame is not
  published as new; if nothing but identical frames arrive for ``stall_timeout_s`` the camera
  reads as stalled.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from solarian_agent.core.clock import Clock, SystemClock
from solarian_agent.core.errors import ConfigError
from solarian_agent.core.messages import Image
from solarian_agent.hw.errors import (
    CameraDisconnectedError,
    CameraStalledError,
    DeviceAlreadyConnectedError,
    DeviceNotConnectedError,
    DeviceNotFoundError,
    EndOfStreamError,
)

log = logging.getLogger(__name__)

STATUSES = ("disconnected", "streaming", "stalled", "reconnecting", "ended", "failed")


class Capture(Protocol):
    """The part of ``cv2.VideoCapture`` the driver uses."""

    def isOpened(self) -> bool: ...  # noqa: N802 (OpenCV's name)

    def read(self) -> tuple[bool, Any]: ...

    def set(self, prop: int, value: float) -> bool: ...

    def get(self, prop: int) -> float: ...

    def release(self) -> None: ...


CaptureFactory = Callable[[int | str, int], Capture]


def _default_factory(source: int | str, backend: int) -> Capture:
    import cv2

    cap: Capture = cv2.VideoCapture(source, backend)
    return cap


@dataclass
class OpenCVCameraConfig:
    """``source``: a device index (0), a device path (/dev/video0, /dev/v4l/by-id/...) or a
    video file.  ``kind`` "auto" treats existing regular files as files, all else as devices.
    """

    source: int | str = 0
    width: int | None = None
    height: int | None = None
    fps: float | None = None
    fourcc: str | None = None  # e.g. "MJPG", "YUYV"
    frame_id: str = "camera"
    backend: int | None = None  # cv2.CAP_* (None: CAP_ANY; CAP_V4L2 is a good Linux choice)
    kind: str = "auto"  # auto | device | file
    stall_timeout_s: float = 2.0
    reconnect_attempts: int = 3
    reconnect_backoff_s: float = 0.5
    detect_frozen: bool | None = None  # None: on for devices, off for files
    realtime: bool = False  # files only: play at the file's fps instead of lockstep
    fps_tolerance: float = 0.5

    def __post_init__(self) -> None:
        if self.kind not in ("auto", "device", "file"):
            raise ConfigError("camera.kind", f"must be auto|device|file, got {self.kind!r}")
        for name in ("width", "height"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or v <= 0):
                raise ConfigError(f"camera.{name}", f"must be a positive integer, got {v!r}")
        if self.fps is not None and not (math.isfinite(self.fps) and self.fps > 0):
            raise ConfigError("camera.fps", f"must be > 0, got {self.fps!r}")
        if self.fourcc is not None and len(self.fourcc) != 4:
            raise ConfigError("camera.fourcc", f"must be 4 characters, got {self.fourcc!r}")
        if not (math.isfinite(self.stall_timeout_s) and self.stall_timeout_s > 0):
            raise ConfigError("camera.stall_timeout_s", f"must be > 0, got "
                              f"{self.stall_timeout_s!r}")
        if self.reconnect_attempts < 0:
            raise ConfigError("camera.reconnect_attempts", "must be >= 0")

    @property
    def is_file(self) -> bool:
        if self.kind != "auto":
            return self.kind == "file"
        return isinstance(self.source, str) and os.path.isfile(self.source)


@dataclass(frozen=True)
class CameraSettings:
    width: int
    height: int
    fps: float
    fourcc: str


@dataclass(frozen=True)
class CameraFrame:
    """A captured frame: BGR ``data`` (read-only), capture ``stamp`` (the driver's clock),
    ``seq`` (1, 2, ... per published frame), frames skipped since the last read."""

    data: np.ndarray
    stamp: float
    seq: int
    frame_id: str
    dropped: int = 0

    def to_image(self) -> Image:
        return Image(data=self.data, stamp=self.stamp, frame_id=self.frame_id, seq=self.seq)


@dataclass
class _Shared:
    frame: CameraFrame | None = None
    status: str = "disconnected"
    error: str = ""
    consumed_seq: int = 0
    reconnects: int = 0
    duplicates: int = 0
    grabbed: int = 0
    last_new_at: float | None = None
    warnings: list[str] = field(default_factory=list)


def _fourcc_int(code: str) -> int:
    """``cv2.VideoWriter_fourcc`` without the cv2 call: four characters, little-endian."""
    return sum((ord(ch) & 0xFF) << (8 * k) for k, ch in enumerate(code))


def _fourcc_str(v: float) -> str:
    i = int(v)
    if i <= 0:
        return ""
    s = "".join(chr((i >> (8 * k)) & 0xFF) for k in range(4))
    return s if s.isprintable() else ""


class OpenCVCamera:
    def __init__(
        self,
        config: OpenCVCameraConfig,
        clock: Clock | None = None,
        capture_factory: CaptureFactory | None = None,
    ) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self._factory = capture_factory or _default_factory
        self._cap: Capture | None = None
        self._cond = threading.Condition()
        self._s = _Shared()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.actual: CameraSettings | None = None
        self._seq = 0

    # ------------------------------------------------------------------ state

    @property
    def name(self) -> str:
        return f"camera {self.config.frame_id!r} ({self.config.source})"

    @property
    def is_connected(self) -> bool:
        return self._thread is not None

    @property
    def status(self) -> str:
        with self._cond:
            return self._s.status

    @property
    def error(self) -> str:
        with self._cond:
            return self._s.error

    @property
    def warnings(self) -> list[str]:
        with self._cond:
            return list(self._s.warnings)

    def stats(self) -> dict[str, Any]:
        with self._cond:
            s = self._s
            return {"status": s.status, "error": s.error, "grabbed": s.grabbed,
                    "published": self._seq, "duplicates": s.duplicates,
                    "reconnects": s.reconnects}

    # ------------------------------------------------------------------ lifecycle

    def _backend(self) -> int:
        if self.config.backend is not None:
            return self.config.backend
        import cv2

        return int(cv2.CAP_ANY)

    def _open(self) -> Capture:
        src = self.config.source
        if isinstance(src, str) and not src.isdigit() and not os.path.exists(src):
            raise DeviceNotFoundError(
                f"{self.name}: {src} does not exist; list cameras with "
                "`ls /dev/v4l/by-id/` or `v4l2-ctl --list-devices`")
        source: int | str = int(src) if isinstance(src, str) and src.isdigit() else src
        cap = self._factory(source, self._backend())
        if not cap.isOpened():
            try:
                cap.release()
            except Exception:
                pass
            raise DeviceNotFoundError(f"{self.name}: cannot be opened (busy, unplugged, or not "
                                      "a camera / readable video)")
        self._apply_settings(cap)
        return cap

    def _apply_settings(self, cap: Capture) -> None:
        import cv2

        c = self.config
        if c.fourcc:
            cap.set(cv2.CAP_PROP_FOURCC, float(_fourcc_int(c.fourcc)))
        if c.width:
            cap.set(cv2.CAP_PROP_FRAME_WIDTH, float(c.width))
        if c.height:
            cap.set(cv2.CAP_PROP_FRAME_HEIGHT, float(c.height))
        if c.fps:
            cap.set(cv2.CAP_PROP_FPS, float(c.fps))
        actual = CameraSettings(
            width=int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)),
            height=int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT)),
            fps=float(cap.get(cv2.CAP_PROP_FPS)),
            fourcc=_fourcc_str(cap.get(cv2.CAP_PROP_FOURCC)),
        )
        self.actual = actual
        warnings = []
        if (c.width and actual.width != c.width) or (c.height and actual.height != c.height):
            warnings.append(f"{self.name}: requested {c.width or actual.width}x"
                            f"{c.height or actual.height}, device delivers "
                            f"{actual.width}x{actual.height}")
        if c.fps and abs(actual.fps - c.fps) > c.fps_tolerance:
            warnings.append(f"{self.name}: requested {c.fps:g} fps, device reports "
                            f"{actual.fps:g} fps")
        if c.fourcc and actual.fourcc.upper() != c.fourcc.upper():
            warnings.append(f"{self.name}: requested fourcc {c.fourcc}, device uses "
                            f"{actual.fourcc or 'unknown'}")
        for w in warnings:
            log.warning(w)
        with self._cond:
            self._s.warnings = warnings

    def connect(self) -> None:
        """Open the source, apply and check the settings, start grabbing.  Raises
        ``DeviceNotFoundError`` when the device / file cannot be opened."""
        if self._thread is not None:
            raise DeviceAlreadyConnectedError(f"{self.name} is already connected")
        cap = self._open()
        self._cap = cap
        self._stop.clear()
        with self._cond:
            self._s = _Shared(warnings=self._s.warnings, status="streaming",
                              last_new_at=self.clock.now())
        self._seq = 0
        self._thread = threading.Thread(target=self._grab_loop, name=f"cam-{self.config.frame_id}",
                                        daemon=True)
        self._thread.start()

    def disconnect(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        t, self._thread = self._thread, None
        if t is not None:
            t.join(timeout=max(1.0, self.config.stall_timeout_s))
        cap, self._cap = self._cap, None
        if t is not None and t.is_alive():
            # the backend is stuck inside a grab: releasing under it can crash OpenCV, so the
            # (daemon) thread keeps the capture and exits when the grab returns
            log.warning("%s: grab thread did not stop; capture left to it", self.name)
        elif cap is not None:
            try:
                cap.release()
            except Exception:
                pass
        with self._cond:
            self._s.status = "disconnected"

    def __enter__(self) -> OpenCVCamera:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.disconnect()

    # ------------------------------------------------------------------ the grab thread

    def _set(self, status: str, error: str = "") -> None:
        with self._cond:
            self._s.status = status
            if error:
                self._s.error = error
            self._cond.notify_all()

    def _grab_loop(self) -> None:
        c = self.config
        is_file = c.is_file
        frozen_check = c.detect_frozen if c.detect_frozen is not None else not is_file
        prev: np.ndarray | None = None
        pace = 1.0 / self.actual.fps if (is_file and c.realtime and self.actual
                                         and self.actual.fps > 0) else 0.0
        while not self._stop.is_set():
            cap = self._cap
            try:
                ok, img = cap.read() if cap is not None else (False, None)
            except Exception as e:  # a backend error is a failed grab, not a dead thread
                log.warning("%s: grab raised %s", self.name, e)
                ok, img = False, None
            if self._stop.is_set():
                return
            if not ok or img is None:
                if is_file:
                    self._set("ended", f"{self.name}: end of video file")
                    return
                if not self._reconnect():
                    return
                prev = None
                continue
            stamp = self.clock.now()
            with self._cond:
                self._s.grabbed += 1
            if frozen_check and prev is not None and prev.shape == img.shape \
                    and np.array_equal(prev, img):
                with self._cond:
                    self._s.duplicates += 1
                continue
            prev = img
            img.setflags(write=False)
            with self._cond:
                self._seq += 1
                self._s.frame = CameraFrame(img, stamp, self._seq, c.frame_id)
                self._s.last_new_at = stamp
                if self._s.status in ("stalled", "reconnecting"):
                    self._s.status = "streaming"
                self._cond.notify_all()
                if is_file and not c.realtime:
                    # lockstep: every file frame is read once before the next is grabbed
                    while not self._stop.is_set() and self._s.consumed_seq < self._seq:
                        self._cond.wait(0.1)
            if pace and self._stop.wait(pace):
                return

    def _reconnect(self) -> bool:
        c = self.config
        self._set("reconnecting", f"{self.name}: grab failed (device gone?)")
        old, self._cap = self._cap, None
        if old is not None:
            try:
                old.release()
            except Exception:
                pass
        last = ""
        for attempt in range(1, c.reconnect_attempts + 1):
            if self._stop.wait(c.reconnect_backoff_s):
                return False
            try:
                self._cap = self._open()
                with self._cond:
                    self._s.reconnects += 1
                    self._s.status = "streaming"
                log.warning("%s: reconnected after %d attempt(s)", self.name, attempt)
                return True
            except Exception as e:
                last = str(e)
        self._set("failed", f"{self.name}: device disappeared and {c.reconnect_attempts} "
                  f"reconnect attempt(s) failed" + (f" ({last})" if last else ""))
        return False

    # ------------------------------------------------------------------ reading

    def read(self, timeout_s: float | None = None) -> CameraFrame:
        """The next frame newer than the last one returned, waiting at most ``timeout_s``
        (default ``stall_timeout_s``).  Raises ``CameraStalledError`` when none arrives,
        ``EndOfStreamError`` at the end of a file, ``CameraDisconnectedError`` after failed
        reconnects, ``DeviceNotConnectedError`` before ``connect()``."""
        if self._thread is None:
            raise DeviceNotConnectedError(f"{self.name} is not connected; call connect() first")
        timeout = self.config.stall_timeout_s if timeout_s is None else timeout_s
        with self._cond:
            got = self._cond.wait_for(
                lambda: (self._s.frame is not None and self._s.frame.seq > self._s.consumed_seq)
                or self._s.status in ("ended", "failed") or self._stop.is_set(),
                timeout,
            )
            s = self._s
            f = s.frame
            if f is not None and f.seq > s.consumed_seq:
                dropped = f.seq - s.consumed_seq - 1
                s.consumed_seq = f.seq
                self._cond.notify_all()
                return CameraFrame(f.data, f.stamp, f.seq, f.frame_id, dropped)
            if s.status == "ended":
                raise EndOfStreamError(s.error or f"{self.name}: end of video file")
            if s.status == "failed":
                raise CameraDisconnectedError(s.error)
            if self._stop.is_set():
                raise DeviceNotConnectedError(f"{self.name} was disconnected")
            assert not got
            s.status = "stalled"
            age = "" if s.last_new_at is None else \
                f"; last new frame {self.clock.now() - s.last_new_at:.2f} s ago"
            if s.duplicates:
                age += f" ({s.duplicates} identical frames rejected)"
            s.error = f"{self.name}: no new frame within {timeout:.2f} s{age}"
            raise CameraStalledError(s.error)
