"""What the planner needs of ``observe_scene``, as interfaces: the attention episode
that budgets acquisitions, the result of one observation, and the observer's protocol.

The observer itself (:class:`solarian_agent.perception.observe_scene.SceneObserver`: camera,
vision backend, bounds) is an implementation, wired where the system is built and handed to the
planner; the core only depends on :class:`SceneObserverPort`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .errors import ToolCallRejected
from .model_api import ToolDef
from .text import quote

MAX_ACQUISITIONS = 2
ACQUISITIONS = ("inspect_self", "observe_scene")


class ObserveSceneRejected(ToolCallRejected):
    """A call refused before or instead of interpretation; ``code`` names the rule."""

    def __init__(self, code: str, reason: str) -> None:
        self.code = code
        super().__init__(reason)


@dataclass(frozen=True)
class VisualPerceptionResult:
    """A model-generated interpretation of one frame (never authoritative runtime state)."""

    focus: str
    description: str
    truncated: bool
    observed_at: float  # sampled right after capture, before interpretation (clock seconds)
    observed_at_wall: str
    captured_at: float
    camera: str
    backend: str
    model: str
    latency_s: float
    frame_bytes: int
    model_generated: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {"focus": self.focus, "description": self.description,
                "truncated": self.truncated, "observed_at": self.observed_at_wall,
                "camera": self.camera, "backend": self.backend, "model": self.model,
                "model_generated": True, "latency_s": round(self.latency_s, 4)}

    def text(self) -> str:
        """The bounded textual projection a turn may carry (marked as a model's reading)."""
        flag = " (description truncated)" if self.truncated else ""
        return (f"[observe_scene, model-generated and possibly wrong; observed at "
                f"{self.observed_at_wall} by {self.camera}{flag}]\n"
                f"{quote('scene description', self.description, 8000)}")


class AttentionEpisode:
    """The acquisition budget of one attention episode: looking is on demand and bounded, so an
    autonomous wake never turns into continuous vision.

    Autonomous: at most :data:`MAX_ACQUISITIONS` ordered read-only acquisitions; a rejected
    attempt consumes its slot; nothing is acquired after the first effect; the same capability
    twice must ask for materially different information (the same normalized focus is
    refused).  An operator episode is not limited by slots, only by the single-frame rule.
    """

    def __init__(self, autonomous: bool = True, max_acquisitions: int = MAX_ACQUISITIONS
                 ) -> None:
        self.autonomous = autonomous
        self.max_acquisitions = max_acquisitions
        self.attempts: list[tuple[str, str, bool]] = []  # (capability, key, applied)
        self.effects = 0
        # begin() (a model worker) and record_effect() (the planner's tick) may run on two
        # threads; the planner claims slots in call order on its tick (see ``slot=``)
        self._lock = threading.Lock()

    @property
    def remaining(self) -> int:
        if not self.autonomous:
            return 0 if self.effects else 1_000_000
        if self.effects:
            return 0
        return max(0, self.max_acquisitions - len(self.attempts))

    def offer(self) -> dict[str, Any]:
        """What a fresh request in this episode is offered."""
        return {"acquisitions": self.remaining if self.autonomous else
                (0 if self.effects else None), "effects": True}

    def begin(self, capability: str, key: str = "") -> int:
        """Claim the next slot (raises :class:`ObserveSceneRejected` when none is left).  The
        slot stays consumed whether the acquisition succeeds or is rejected."""
        if capability not in ACQUISITIONS:
            raise ValueError(f"not an acquisition: {capability!r}")
        with self._lock:
            return self._begin(capability, key)

    def _begin(self, capability: str, key: str) -> int:
        if self.effects:
            raise ObserveSceneRejected("after_effect", "no acquisition is possible after the "
                                                       "episode's first effect")
        if self.autonomous and len(self.attempts) >= self.max_acquisitions:
            raise ObserveSceneRejected("acquisitions_exhausted",
                                       f"this attention episode already used its "
                                       f"{self.max_acquisitions} acquisitions")
        self.attempts.append((capability, key, False))
        return len(self.attempts) - 1

    def same_as_before(self, slot: int) -> bool:
        cap, key, _ = self.attempts[slot]
        return any(c == cap and k == key and k for c, k, _ in self.attempts[:slot])

    def applied(self, slot: int) -> None:
        cap, key, _ = self.attempts[slot]
        self.attempts[slot] = (cap, key, True)

    def record_effect(self) -> None:
        with self._lock:
            self.effects += 1


class SceneObserverPort(Protocol):
    """``observe_scene`` as the planner uses it (see :class:`~solarian_agent.perception.
    observe_scene.SceneObserver`).  ``on_event`` receives metadata-only events."""

    on_event: Callable[[str, dict[str, Any]], None] | None

    def tool_defs(self) -> list[ToolDef]: ...

    def handle(self, args: Mapping[str, Any], episode: AttentionEpisode | None = None
               ) -> VisualPerceptionResult: ...

    def claim(self, args: Mapping[str, Any], episode: AttentionEpisode) -> int: ...

    def handle_claimed(self, args: Mapping[str, Any], episode: AttentionEpisode, slot: int
                       ) -> VisualPerceptionResult: ...


__all__ = ["ACQUISITIONS", "AttentionEpisode", "MAX_ACQUISITIONS", "ObserveSceneRejected",
           "SceneObserverPort", "VisualPerceptionResult"]
