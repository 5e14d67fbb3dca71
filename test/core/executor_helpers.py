"""Test skills and a tracker shared by the executor's tests (a uniquely named module, unlike
``conftest``): a skill that takes an image point and seeds a tracker, and a tracker that
records what it was asked to start and stop."""

from __future__ import annotations

from typing import Any

from solarian_agent.core.executor import TrackerResult
from solarian_agent.core.skill import Skill, TrackerRequest


class Pointed(Skill):
    description = "Takes a point (test skill)."
    parameters = {"type": "object", "properties": {"point": {"type": "array"}},
                  "required": ["point"]}
    image_points = ("point",)
    camera = "cam"

    @classmethod
    def services_for(cls, params: Any) -> list[TrackerRequest]:
        return [TrackerRequest("cam.target", "cam", "point")]

    def tick(self) -> None:
        self.finish()


class RecordingTracker:
    def __init__(self) -> None:
        self.started: list[str] = []
        self.stopped: list[str] = []

    def start(self, req: TrackerRequest, point: tuple[float, float]) -> TrackerResult:
        self.started.append(req.field)
        return TrackerResult(0.01, (1, 2, 3, 4))

    def stop(self, field: str) -> None:
        self.stopped.append(field)
