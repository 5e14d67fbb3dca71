"""Stand-ins shared by the observe_scene tests (a uniquely named module, unlike ``conftest``):
a vision backend and a camera on a fake clock, the observer built over them, and the code and
reason of a refusal."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from solarian_agent.core.clock import FakeClock
from solarian_agent.core.config import load_agent_config
from solarian_agent.perception.observe_scene import (
    CameraFrame,
    ObserveSceneRejected,
    SceneObserver,
)
from solarian_agent.perception.vision import Description


class Backend:
    name = "fake"
    model = "fake-vision"

    def __init__(self, text="a red cup on the table", clock=None, advance=0.0, error=None):
        self.text, self.clock, self.advance, self.error = text, clock, advance, error
        self.calls = 0
        self.sizes = []

    def describe(self, frame, focus, *, timeout_s):
        self.calls += 1
        self.sizes.append(len(frame.data))
        if self.clock is not None:
            self.clock.advance(self.advance)  # the model takes its time
        if self.error is not None:
            raise self.error
        return Description(self.text, model=self.model)

    def answer_tick(self, request, *, timeout_s):  # pragma: no cover - not used here
        raise NotImplementedError


class Camera:
    def __init__(self, clock, size=1000, running=True):
        self.clock, self.size, self.running = clock, size, running
        self.captures = 0
        self.error = None

    def capture(self):
        self.captures += 1
        if self.error is not None:
            raise self.error
        px = np.zeros((4, 4, 3), np.uint8)
        return CameraFrame(b"\0" * self.size, "image/jpeg", 640, 480, "wrist",
                           self.clock.now() - 0.05, px)


def make(backend="default", *, size=1000, running=True, app=True, advance=0.0, text=None,
         error=None):
    clock = FakeClock()
    cam = Camera(clock, size, running)
    if backend == "default":
        backend = Backend(clock=clock, advance=advance, error=error,
                          **({"text": text} if text is not None else {}))
    events = []
    obs = SceneObserver(clock, backend, cam.capture, camera="wrist",
                        camera_running=lambda: cam.running, app_running=lambda: app,
                        on_event=lambda k, d: events.append((k, d)))
    return obs, cam, backend, clock, events


def code(fn):
    with pytest.raises(ObserveSceneRejected) as e:
        fn()
    return e.value.code


def reason(fn):
    with pytest.raises(ObserveSceneRejected) as e:
        fn()
    return e.value.code, str(e.value)


def cfg(**agent):
    return load_agent_config({"agent": agent})


class SizingBackend:
    """Says the frame size and camera it got, records focus and timeout."""

    name = "fake"
    model = "fake-vision"

    def __init__(self) -> None:
        self.focuses: list[str] = []
        self.timeouts: list[float] = []

    def describe(self, frame: Any, focus: str, *, timeout_s: float) -> Description:
        self.focuses.append(focus)
        self.timeouts.append(timeout_s)
        return Description(f"saw {frame.width}x{frame.height} from {frame.camera}")


class Anonymous:  # a backend without a name or model attribute
    def describe(self, frame: Any, focus: str, *, timeout_s: float) -> Description:
        return Description("something")


def observer(backend: Any = None, app: Any = lambda: True, cam: Any = lambda: True,
              events: list[Any] | None = None) -> SceneObserver:
    return SceneObserver(FakeClock(), backend, lambda: None, camera="wrist",
                         camera_running=cam, app_running=app,
                         on_event=(lambda k, d: events.append((k, d))) if events is not None
                         else None)
