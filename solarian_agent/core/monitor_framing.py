"""The frames the monitor keeps per action: taken from the cameras each tick (one shared shot per
frame, the target's mark drawn on the history copy), the last ``history`` of them per camera,
and the reference frames from the action's start, made once.  Rules of what is seen:
:mod:`.monitor_frames`.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import event_types as et
from .messages import Image
from .monitor_frames import (
    Box,
    Entry,
    Shot,
    ShotCache,
    TargetBoxFn,
    Viewing,
    aged_references,
    box_to_sent,
    history_labels,
    image_points,
    image_record,
    marked_entry,
    monitor_image,
    point_camera,
    reference_images,
    reference_record,
)
from .monitor_log import MonitorLog
from .monitor_watch import WatchedAction
from .transport import Subscription
from .vision import MonitorImage

# one camera's frame as taken for an action: the camera, the shot and the target's mark
Taken = tuple[str, Shot, "Box | None"]
ToolSpec = Callable[[str], "Mapping[str, Any] | None"]


@dataclass(frozen=True)
class FramingRules:
    """What the framing keeps and draws: ``history`` frames per camera, the target's mark
    (``mark_target``) and the start frames first (``reference``)."""

    history: int
    mark_target: bool
    reference: bool

    @property
    def kept(self) -> int:
        return max(1, self.history)


@dataclass
class ActionFrames:
    """One action's frames: its history per camera, how many times frames were taken, and its
    reference frames once made."""

    history: dict[str, collections.deque[Entry]] = field(default_factory=dict)
    taken: int = 0
    reference: list[MonitorImage] | None = None


@dataclass(frozen=True)
class TickImages:
    """What one tick sends: the images (reference first, then each camera's history, oldest
    first), their log records, and the files they are saved as."""

    images: tuple[MonitorImage, ...]
    records: list[dict[str, Any]]
    shots: list[Shot]

    @property
    def files(self) -> list[tuple[str, bytes]]:
        refs = [(r.file, r.data) for r in self.images if r.reference]
        return [(s.file_name, s.data) for s in self.shots] + refs

    @property
    def has_reference(self) -> bool:
        return any(i.reference for i in self.images)


class MonitorFraming:
    """Takes, marks and keeps the frames of each watched action."""

    def __init__(self, frames: Mapping[str, Subscription[Any]], cameras: Sequence[str],
                 viewing: Viewing, rules: FramingRules, *, target_box: TargetBoxFn | None,
                 tool_spec: ToolSpec, log: MonitorLog) -> None:
        self._frames = frames
        self._cameras = list(cameras)
        self._viewing = viewing
        self._rules = rules
        self.target_box = target_box
        self._tool_spec = tool_spec
        self._log = log
        self.shots = ShotCache(viewing, 4 * max(1, len(self._cameras)) * rules.kept)
        self._actions: dict[str, ActionFrames] = {}

    def watch(self, action_id: str) -> None:
        self._actions[action_id] = ActionFrames()

    def forget(self, action_id: str) -> None:
        self._actions.pop(action_id, None)

    def _of(self, action_id: str) -> ActionFrames:
        return self._actions.setdefault(action_id, ActionFrames())

    def _mark(self, act: WatchedAction, cam: str, shot: Shot) -> Box | None:
        if not self._rules.mark_target or self.target_box is None:
            return None
        try:
            box = self.target_box(act.action_id, act.trackers, cam, shot.frame)
        except Exception as e:
            self._log.event(et.MonitorError(action_id=act.action_id,
                            error=f"target_box raised {type(e).__name__}: {e}"))
            return None
        return None if box is None else box_to_sent(box, shot.scaling)

    def take(self, act: WatchedAction) -> list[Taken]:
        """Each camera's latest frame with the target's mark (cameras with no frame yet are
        left out)."""
        out: list[Taken] = []
        for cam, sub in self._frames.items():
            frame = sub.latest()
            if not isinstance(frame, Image):
                continue
            shot = self.shots.shot(cam, frame)
            out.append((cam, shot, self._mark(act, cam, shot)))
        return out

    def keep(self, action_id: str, taken: Sequence[Taken]) -> bool:
        """Add the frames to the action's history.  True when they are only kept, not judged:
        the first frames with ``history > 1``, which have nothing to be compared with yet."""
        frames = self._of(action_id)
        frames.taken += 1
        for cam, shot, mark in taken:
            dq = frames.history.setdefault(cam, collections.deque(maxlen=self._rules.kept))
            dq.append(marked_entry(shot, mark, self._viewing.encoding))
        return self._rules.kept > 1 and frames.taken == 1

    def tick_images(self, act: WatchedAction, now: float) -> TickImages:
        """What a tick sends for the action at ``now``."""
        images: list[MonitorImage] = []
        records: list[dict[str, Any]] = []
        shots: list[Shot] = []
        if self._rules.reference:
            for r in self._references(act, now):
                images.append(r)
                records.append(reference_record(r))
        history = self._of(act.action_id).history
        for cam in self._cameras:
            dq = history.get(cam)
            if not dq:
                continue
            labels = history_labels([e.shot.frame.stamp for e in dq], now)
            for e, label in zip(dq, labels, strict=True):
                age = now - e.shot.frame.stamp
                images.append(monitor_image(e, label, age))
                records.append(image_record(e.shot, e.mark, label, age))
                shots.append(e.shot)
        return TickImages(tuple(images), records, shots)

    def _references(self, act: WatchedAction, now: float) -> list[MonitorImage]:
        frames = self._of(act.action_id)
        if frames.reference is not None:
            return aged_references(frames.reference, now)
        spec = self._tool_spec(act.tool)
        points = {point_camera(spec, self._cameras): image_points(spec, act.params)}
        frames.reference = reference_images(act.action_id, act.start_frames, self._viewing,
                                            points, now)
        return frames.reference
