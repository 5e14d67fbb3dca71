"""``observe_scene(focus)``: bounded one-frame visual perception, on demand only (no streaming,
polling or image history), its answer model-made and never authoritative state.

* ``focus`` is the only argument: a trimmed, non-empty string of at most 300 characters without
  control characters.  It cannot select a camera, file, URL, crop, exposure, resolution,
  provider, model or frame count.
* Each applied call captures exactly one current frame (:class:`CameraFrame`) from the
  configured camera and passes it to the configured vision backend.  ``observed_at`` is sampled
  immediately after capture, before interpretation, so model latency never becomes scene time.
* A frame larger than 4 MiB (:data:`MAX_FRAME_BYTES`) is rejected before any provider request.
  Neither capture nor interpretation is retried.
* The result (:class:`VisualPerceptionResult`) holds the normalized focus, a description bounded
  to 2,000 characters (:data:`MAX_DESCRIPTION_CHARS`) and an explicit ``truncated`` flag.  It is
  a model-generated interpretation (``model_generated`` is always True) that may be incomplete,
  uncertain or wrong; it is never copied into runtime state.
* Image bytes are discarded after the request: never written, logged, published, cached or kept
  as history.  The observer holds no reference to a frame after a call returns, and its events
  carry only sizes and timings.
* The tool is offered only while the application runs, the configured camera is currently
  running and a vision backend is configured (:meth:`SceneObserver.offered`).
  :meth:`SceneObserver.inspect_self` reports those facts separately and never captures.
* An autonomous attention episode (:class:`AttentionEpisode`) may attempt at most two ordered
  read-only acquisitions (``inspect_self`` or ``observe_scene``); a rejected attempt consumes
  its slot, the same capability twice must ask for materially different information (the same
  normalized focus twice is refused), and no acquisition is possible after the episode's first
  effect.

Configuration: ``runtime.vision`` (``none`` by default; ``openai-responses``, ``openai``,
``anthropic`` or the offline ``cv``), or the development override ``--vision``.  A non-none
vision needs a camera (``runtime.vision_camera``, else the first agent camera) and a text
cognition backend (the planner model): :func:`effective_vision` raises :class:`ConfigError`
otherwise.  For OpenAI backends ``OPENAI_VISION_MODEL`` takes precedence over ``OPENAI_MODEL``;
``OPENAI_API_KEY`` stays in the environment.
"""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core import names
from ..core.attention import (
    ACQUISITIONS,
    MAX_ACQUISITIONS,
    AttentionEpisode,
    ObserveSceneRejected,
    VisualPerceptionResult,
)
from ..core.clock import Clock
from ..core.config import AgentConfig
from ..core.errors import ConfigError
from ..core.messages import Image
from ..core.model_api import ModelError, ToolDef
from ..core.transport import Bus, QoS, Subscription
from . import images as im
from .vision import FrameForVision, VisionBackend

MAX_FOCUS_CHARS = 300
MAX_DESCRIPTION_CHARS = 2000
MAX_FRAME_BYTES = 4 * 1024 * 1024
TRUNCATION_MARK = " [truncated]"

TOOL_DEF = ToolDef(
    "observe_scene",
    "Look once at the scene through the configured camera and get a short description of "
    "what bears on `focus`. One current frame; the description is a model's reading and may "
    "be incomplete or wrong.",
    {"type": "object",
     "properties": {"focus": {"type": "string", "minLength": 1, "maxLength": MAX_FOCUS_CHARS,
                              "description": "What to look for (at most 300 characters)."}},
     "required": ["focus"], "additionalProperties": False},
)


@dataclass(frozen=True)
class CameraFrame:
    """A transient authoritative sensor payload: one encoded frame, in memory only."""

    data: bytes = field(repr=False)
    media_type: str
    width: int
    height: int
    camera: str
    captured_at: float  # the camera's capture stamp (clock seconds)
    pixels: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def size_bytes(self) -> int:
        return len(self.data)


def normalize_focus(focus: Any) -> str:
    """The trimmed focus, or :class:`ObserveSceneRejected` naming what is wrong."""
    if not isinstance(focus, str):
        raise ObserveSceneRejected("focus_type", f"focus must be a string, got "
                                                 f"{type(focus).__name__}")
    f = focus.strip()
    if not f:
        raise ObserveSceneRejected("focus_empty", "focus must not be empty")
    if len(f) > MAX_FOCUS_CHARS:
        raise ObserveSceneRejected("focus_too_long", f"focus has {len(f)} characters; at most "
                                                     f"{MAX_FOCUS_CHARS} are allowed")
    # Zl / Zp: the Unicode line and paragraph separators break a line like a control char
    # (a plain space is Zs: allowed)
    bad = [c for c in f if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")]
    if bad:
        raise ObserveSceneRejected("focus_control", f"focus contains control characters "
                                                    f"({', '.join(repr(c) for c in bad[:3])})")
    return f


def bound_description(text: str) -> tuple[str, bool]:
    text = text.strip()
    if len(text) <= MAX_DESCRIPTION_CHARS:
        return text, False
    keep = MAX_DESCRIPTION_CHARS - len(TRUNCATION_MARK)
    return text[:keep].rstrip() + TRUNCATION_MARK, True


# -------------------------------------------------------------------------------------------
# configuration
# -------------------------------------------------------------------------------------------

VISION_CHOICES = ("none", "openai-responses", "openai", "anthropic", "cv", "scripted")


def effective_vision(cfg: AgentConfig, override: str | None = None) -> tuple[str, str]:
    """(vision backend, camera) in effect; ``none`` needs nothing.  Raises ConfigError for a
    non-none vision without a camera or without a text cognition backend."""
    vision = (override or cfg.runtime.vision or "none").strip()
    where = "--vision" if override else "agent.runtime.vision"
    if vision not in VISION_CHOICES:
        raise ConfigError(where, f"{vision!r} is not allowed; allowed values: "
                                 f"{', '.join(VISION_CHOICES)}")
    if vision == "none":
        return "none", ""
    camera = cfg.runtime.vision_camera or (cfg.cameras[0] if cfg.cameras else "")
    if not camera:
        raise ConfigError("agent.runtime.vision_camera",
                          f"vision {vision!r} needs a camera: set runtime.vision_camera or "
                          "agent.cameras")
    planner = cfg.planner
    offline = planner.provider in ("rules", "scripted")
    if not planner.provider or (not offline and not planner.model):
        raise ConfigError("agent.planner", f"vision {vision!r} needs a text cognition "
                                           "backend: configure the planner's provider and model")
    return vision, camera


# -------------------------------------------------------------------------------------------
# the camera and the observer
# -------------------------------------------------------------------------------------------

class BusCamera:
    """The configured camera on the bus: running while its frames are fresh."""

    def __init__(self, bus: Bus, camera: str, clock: Clock, stale_s: float = 2.0,
                 node: str = "observe_scene") -> None:
        self.camera = camera
        self.clock = clock
        self.stale_s = stale_s
        self._sub: Subscription[Any] = bus.subscribe(names.image_topic(camera), names.T_IMAGE,
                                                     qos=QoS(depth=1), node=node)

    def running(self) -> bool:
        f = self._sub.latest()
        return isinstance(f, Image) and self.clock.now() - f.stamp <= self.stale_s

    def capture(self) -> CameraFrame | None:
        """The current frame, encoded in memory (PNG, lossless, at capture resolution)."""
        f = self._sub.latest()
        if not isinstance(f, Image) or self.clock.now() - f.stamp > self.stale_s:
            return None
        data, mt = im.encode(f.data, "png")
        return CameraFrame(data, mt, f.width, f.height, self.camera, f.stamp, f.data)


class SceneObserver:
    """``observe_scene`` for one configured camera and backend.

    ``capture`` returns the current :class:`CameraFrame` (None: no current frame);
    ``camera_running`` and ``app_running`` say whether the tool may be offered.  ``on_event``
    receives metadata-only events (never image bytes).
    """

    def __init__(
        self,
        clock: Clock,
        backend: VisionBackend | None,
        capture: Callable[[], CameraFrame | None],
        *,
        camera: str,
        camera_running: Callable[[], bool],
        app_running: Callable[[], bool] = lambda: True,
        timeout_s: float = 30.0,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> None:
        self.clock = clock
        self.backend = backend
        self._capture = capture
        self.camera = camera
        self._camera_running = camera_running
        self._app_running = app_running
        self.timeout_s = timeout_s
        self.on_event = on_event
        self.calls = 0

    @classmethod
    def on_bus(cls, bus: Bus, clock: Clock, backend: VisionBackend | None, camera: str,
               **kw: Any) -> SceneObserver:
        cam = BusCamera(bus, camera, clock)
        return cls(clock, backend, cam.capture, camera=camera, camera_running=cam.running,
                   **kw)

    # facts -----------------------------------------------------------------------------------
    def _safe(self, fn: Callable[[], bool]) -> bool:
        try:
            return bool(fn())
        except Exception:
            return False

    def inspect_self(self, episode: AttentionEpisode | None = None) -> dict[str, Any]:
        """Resource and interpretation facts, reported separately; never captures."""
        if episode is not None:
            slot = episode.begin("inspect_self")
            episode.applied(slot)
        app = self._safe(self._app_running)
        cam = self._safe(self._camera_running)
        return {
            "app_running": app,
            "camera": {"name": self.camera, "configured": bool(self.camera), "running": cam},
            "vision": {"configured": self.backend is not None,
                       "backend": getattr(self.backend, "name", "none"),
                       "model": getattr(self.backend, "model", "")},
            "observe_scene_offered": app and cam and self.backend is not None,
        }

    def offered(self) -> bool:
        return (self.backend is not None and self._safe(self._app_running)
                and self._safe(self._camera_running))

    def tool_defs(self) -> list[ToolDef]:
        return [TOOL_DEF] if self.offered() else []

    # the call --------------------------------------------------------------------------------
    def handle(self, args: Mapping[str, Any], episode: AttentionEpisode | None = None
               ) -> VisualPerceptionResult:
        """A tool call's arguments: exactly ``{"focus": ...}``; anything else is refused."""
        extra = sorted(set(args) - {"focus"})
        return self._call(args.get("focus"), extra, episode)

    def claim(self, args: Mapping[str, Any], episode: AttentionEpisode) -> int:
        """Claim this call's acquisition slot now (the caller's thread, in call order); raises
        :class:`ObserveSceneRejected` when none is left.  Pass the slot to :meth:`handle`."""
        focus = args.get("focus")
        try:
            return episode.begin("observe_scene",
                                 focus.strip() if isinstance(focus, str) else "")
        except ObserveSceneRejected as e:
            self._event("observe_scene_rejected", code=e.code, reason=e.reason)
            raise

    def handle_claimed(self, args: Mapping[str, Any], episode: AttentionEpisode, slot: int
                       ) -> VisualPerceptionResult:
        """:meth:`handle` for a slot :meth:`claim` already took."""
        extra = sorted(set(args) - {"focus"})
        return self._call(args.get("focus"), extra, episode, slot)

    def observe_scene(self, focus: str, episode: AttentionEpisode | None = None
                      ) -> VisualPerceptionResult:
        # no extra arguments: [] and None read the same in _call's ``if extra``
        return self._call(focus, [], episode)

    def _call(self, focus: Any, extra: list[str], episode: AttentionEpisode | None,
              claimed: int | None = None) -> VisualPerceptionResult:
        try:
            if claimed is not None:
                slot = claimed
            elif episode is not None:
                slot = episode.begin("observe_scene",
                                     focus.strip() if isinstance(focus, str) else "")
            else:
                # without an episode _observe never reads the slot: any value is the same
                slot = -1
            if extra:
                raise ObserveSceneRejected(
                    "extra_argument", f"observe_scene takes only focus; got "
                                      f"{', '.join(extra)} (it cannot select a camera, file, "
                                      "URL, crop, exposure, resolution, provider, model or "
                                      "frame count)")
            return self._observe(focus, episode, slot)
        except ObserveSceneRejected as e:
            self._event("observe_scene_rejected", code=e.code, reason=e.reason)
            raise

    def _observe(self, focus: Any, episode: AttentionEpisode | None, slot: int
                 ) -> VisualPerceptionResult:
        f = normalize_focus(focus)
        if episode is not None and episode.same_as_before(slot):
            raise ObserveSceneRejected("repeated", "this episode already observed with the "
                                                   "same focus; ask for different information")
        if self.backend is None:
            raise ObserveSceneRejected("no_vision", "no vision backend is configured "
                                                    "(runtime.vision is none)")
        if not self._safe(self._app_running):
            raise ObserveSceneRejected("not_running", "the application is not running")
        if not self._safe(self._camera_running):
            raise ObserveSceneRejected("camera_not_running",
                                       f"the configured camera {self.camera!r} is not running")
        self.calls += 1
        try:
            frame = self._capture()
        except Exception as e:  # not retried
            raise ObserveSceneRejected("capture_failed", f"capture failed: "
                                                         f"{type(e).__name__}: {e}") from None
        observed_at = self.clock.now()
        observed_wall = self.clock.wall()
        if frame is None:
            raise ObserveSceneRejected("no_frame", f"camera {self.camera!r} has no current "
                                                   "frame")
        size = frame.size_bytes
        camera = frame.camera or self.camera
        captured_at = frame.captured_at
        if size > MAX_FRAME_BYTES:
            del frame
            raise ObserveSceneRejected("frame_too_large",
                                       f"the frame is {size} bytes; at most {MAX_FRAME_BYTES} "
                                       "(4 MiB) are sent, so nothing was sent")
        backend = self.backend
        t0 = time.monotonic()
        failed: ObserveSceneRejected | None = None
        try:
            desc = backend.describe(FrameForVision(frame.data, frame.media_type, frame.width,
                                                   frame.height, camera, frame.pixels),
                                    f, timeout_s=self.timeout_s)
        except ModelError as e:  # not retried
            failed = ObserveSceneRejected("interpretation_failed",
                                          f"the vision model failed ({e.kind}): {e.message}")
        except Exception as e:
            failed = ObserveSceneRejected("interpretation_failed",
                                          f"the vision backend failed: {type(e).__name__}: "
                                          f"{e}")
        finally:
            del frame  # the bytes go nowhere else
        if failed is not None:
            # raised outside the handler: no __context__ whose traceback would keep the
            # backend's frames, and the image bytes in their locals, alive with the error
            raise failed
        latency = time.monotonic() - t0
        text, truncated = bound_description(desc.text)
        if episode is not None:
            episode.applied(slot)
        res = VisualPerceptionResult(f, text, truncated, observed_at, observed_wall,
                                     captured_at, camera, getattr(backend, "name", ""),
                                     desc.model or getattr(backend, "model", ""), latency, size)
        self._event("observe_scene", focus=f, camera=camera, frame_bytes=size,
                    observed_at=observed_wall, latency_s=round(latency, 4),
                    truncated=truncated, chars=len(text), model=res.model,
                    usage=desc.usage.as_dict())
        return res

    def _event(self, kind: str, **data: Any) -> None:
        if self.on_event is not None:
            try:
                self.on_event(kind, data)
            except Exception:
                pass


__all__ = [
    "ACQUISITIONS", "AttentionEpisode", "BusCamera", "CameraFrame", "MAX_ACQUISITIONS",
    "MAX_DESCRIPTION_CHARS", "MAX_FOCUS_CHARS", "MAX_FRAME_BYTES", "ObserveSceneRejected",
    "SceneObserver", "TOOL_DEF", "VisualPerceptionResult", "effective_vision",
    "normalize_focus",
]
