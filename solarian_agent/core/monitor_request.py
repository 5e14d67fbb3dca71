"""What one monitor tick asks the vision backend: the questions still active, the frames as the
framing prepared them and the readings, in a :class:`~.vision.MonitorTickRequest`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .messages import JointState
from .monitor_framing import TickImages
from .monitor_rules import QuestionSpec
from .monitor_watch import WatchedAction
from .transport import Subscription
from .vision import MonitorTickRequest

# the latest joint state (None before the first) -> readings by model: {model: {field: value}}
Readings = Callable[["JointState | None"], dict[str, dict[str, float]]]


class JointReadings:
    """The readings sent with a tick: ``readings`` of the latest joint state (default: the
    joint positions), kept to the ``state_fields`` the planner sees when they are given."""

    def __init__(self, joints: Subscription[Any], readings: Readings | None = None,
                 state_fields: Mapping[str, Sequence[str]] | None = None) -> None:
        self._joints = joints
        self._readings = readings
        self._fields = {k: list(v) for k, v in (state_fields or {}).items()}

    def read(self) -> dict[str, Any]:
        js = self._joints.latest()
        if self._readings is not None:
            out = self._readings(js if isinstance(js, JointState) else None)
        elif isinstance(js, JointState):
            out = {"joints": {n: round(p, 4) for n, p in zip(js.name, js.position,
                                                              strict=False)}}
        else:
            out = {}
        if self._fields:
            out = {m: {f: v for f, v in fields.items() if f in self._fields.get(m, [])}
                   for m, fields in out.items() if m in self._fields}
        return dict(out)


def tick_request(act: WatchedAction, active: Sequence[QuestionSpec], elapsed_s: float,
                 images: TickImages, readings: Mapping[str, Any], instructions: str
                 ) -> MonitorTickRequest:
    return MonitorTickRequest(act.action_id, act.tool, round(elapsed_s, 3),
                              tuple(q.question for q in active), images.images, dict(readings),
                              instructions,
                              marked=any(i.mark is not None for i in images.images),
                              reference=images.has_reference)
