"""The vision-backend interface the core depends on: what answers a monitor tick and what
describes one frame (implementations live in :mod:`solarian_agent.perception`).

Two jobs share one interface:

* :meth:`VisionBackend.answer_tick` answers a monitor tick: the skill's questions (a
  ``predicate`` with the probability that it holds, a ``choice`` with a value and the
  probability that it is right) about the frames the monitor selected.  Answers are typed JSON
  (one object per question); a question the backend cannot answer is left out, never guessed.
* :meth:`VisionBackend.describe` describes one frame for a reader that sees no image
  (``observe_scene``, and views for a planner that reads no images, which is sent none).

A failed call raises :class:`~solarian_agent.core.model_api.ModelError`; the monitor then answers
nothing for that tick.  The model-backed implementation is
:class:`solarian_agent.perception.vision.ModelVisionBackend`, the offline classical-CV one
:class:`solarian_agent.perception.cv_monitor.CvVisionBackend`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .model_api import Usage

QUESTION_TYPES = ("predicate", "choice")


@dataclass(frozen=True)
class MonitorQuestion:
    """One monitor question as the backend sees it (rules stay with the monitor)."""

    name: str
    type: str  # predicate | choice
    instructions: str = ""
    choices: tuple[tuple[str, str], ...] = ()  # (value, definition), in declared order
    camera: str = ""  # the camera the question is about, where the skill names one

    @property
    def values(self) -> tuple[str, ...]:
        return tuple(v for v, _ in self.choices) if self.type == "choice" else ("true", "false")


@dataclass(frozen=True)
class MonitorImage:
    """One image of a tick, exactly as sent.

    ``pixels`` is the BGR array that was encoded into ``data`` (the classical backend reads it
    without decoding); ``scaling`` maps its pixels to the capture's.  ``mark`` is the target
    box drawn on it, in its own pixels (None: unmarked).
    """

    camera: str
    label: str  # previous | "<age> s ago" | current | reference
    age_s: float
    data: bytes = field(repr=False)
    media_type: str
    width: int
    height: int
    pixels: np.ndarray | None = field(default=None, repr=False, compare=False)
    close_up: bool = False
    reference: bool = False
    mark: tuple[int, int, int, int] | None = None
    file: str = ""  # the episode-log name of the unmarked image, where one is kept
    seq: int = 0
    stamp: float = 0.0

    def caption(self) -> str:
        what = "close-up" if self.close_up else "view"
        if self.reference:
            when = f"reference: when the action started, {self.age_s:.1f} s ago"
        elif self.label == "previous":
            when = f"previous, {self.age_s:.1f} s ago"
        else:
            when = self.label
        return f"[{self.camera} {what}, {when}]"


@dataclass(frozen=True)
class MonitorTickRequest:
    action_id: str
    tool: str
    elapsed_s: float
    questions: tuple[MonitorQuestion, ...]
    images: tuple[MonitorImage, ...]
    readings: Mapping[str, Any] = field(default_factory=dict)
    instructions: str = ""  # monitor.instructions: about this robot, for every skill
    marked: bool = False
    reference: bool = False


@dataclass(frozen=True)
class MonitorAnswer:
    """``value`` is the choice (or ``true``/``false`` for a predicate); ``probability`` is the
    probability that ``value`` is right.  ``p_true`` keeps a predicate's raw probability."""

    question: str
    value: str
    probability: float
    reason: str = ""
    p_true: float | None = None

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"value": self.value, "probability": round(self.probability, 4)}
        if self.p_true is not None:
            d["p_true"] = round(self.p_true, 4)
        if self.reason:
            d["reason"] = self.reason
        return d


def predicate_answer(question: str, p_true: float, reason: str = "") -> MonitorAnswer:
    p = min(1.0, max(0.0, float(p_true)))
    if p >= 0.5:
        return MonitorAnswer(question, "true", p, reason, p)
    return MonitorAnswer(question, "false", 1.0 - p, reason, p)


@dataclass(frozen=True)
class TickReply:
    answers: dict[str, MonitorAnswer]
    usage: Usage = Usage()
    latency_s: float = 0.0
    model: str = ""
    text: str = ""  # the raw reply, for the log
    problems: tuple[str, ...] = ()  # answers left out, and why


@dataclass(frozen=True)
class FrameForVision:
    """One encoded frame handed to :meth:`VisionBackend.describe` (lives only in memory)."""

    data: bytes = field(repr=False)
    media_type: str
    width: int
    height: int
    camera: str = ""
    pixels: np.ndarray | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class Description:
    text: str
    usage: Usage = Usage()
    latency_s: float = 0.0
    model: str = ""


@runtime_checkable
class VisionBackend(Protocol):
    name: str
    model: str

    def answer_tick(self, request: MonitorTickRequest, *, timeout_s: float) -> TickReply: ...

    def describe(self, frame: FrameForVision, focus: str, *, timeout_s: float
                 ) -> Description: ...


def question_from_dict(d: Mapping[str, Any]) -> MonitorQuestion:
    """A skill's question dict (its ``monitor`` entry) as the backend sees it.  Raises
    ValueError."""
    name = d.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValueError("a monitor question needs a non-empty name")
    qtype = d.get("type", "predicate")
    if qtype not in QUESTION_TYPES:
        raise ValueError(f"question {name!r}: type must be predicate or choice, got {qtype!r}")
    instr = d.get("instructions", "") or ""
    if not isinstance(instr, str):
        raise ValueError(f"question {name!r}: instructions must be text")
    choices: tuple[tuple[str, str], ...] = ()
    if qtype == "choice":
        raw = d.get("choices")
        if isinstance(raw, Mapping):
            choices = tuple((str(k), str(v or "")) for k, v in raw.items())
        elif isinstance(raw, Sequence) and not isinstance(raw, str):
            choices = tuple((str(k), "") for k in raw)
        if len(choices) < 2:
            raise ValueError(f"question {name!r}: a choice needs at least two choices")
        if len({v for v, _ in choices}) != len(choices):
            raise ValueError(f"question {name!r}: choices repeat a value")
    elif d.get("choices"):
        raise ValueError(f"question {name!r}: a predicate has no choices")
    camera = d.get("camera") or ""
    if not isinstance(camera, str):
        raise ValueError(f"question {name!r}: camera must name a camera")
    return MonitorQuestion(name.strip(), qtype, instr.strip(), choices, camera)


__all__ = [
    "QUESTION_TYPES", "Description", "FrameForVision", "MonitorAnswer", "MonitorImage",
    "MonitorQuestion", "MonitorTickRequest", "TickReply", "VisionBackend", "predicate_answer",
    "question_from_dict",
]
