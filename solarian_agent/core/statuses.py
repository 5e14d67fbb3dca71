"""The statuses events and states carry, as enums whose members are their wire strings.

Each member is a ``str`` (``RunStatus.IDLE == "idle"``, and it formats and serialises as
``idle``), so the JSON lines, the ROS messages and the text a model reads stay as they were;
``str`` plus :class:`enum.Enum` rather than ``enum.StrEnum`` because the package runs on
Python 3.10.
"""

from __future__ import annotations

import enum


class WireEnum(str, enum.Enum):
    """An enum whose members are their values wherever a string is read."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class RunStatus(WireEnum):
    """The planner's run (its ``agent/state`` status and ``run_ended``'s)."""

    IDLE = "idle"
    RUNNING = "running"
    PAUSED = "paused"
    WAITING_USER = "waiting_user"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    BUDGET_EXHAUSTED = "budget_exhausted"


# the statuses a run ends in, as the wire carries them (a front end compares agent/state's
# plain string against these)
RUN_ENDED = frozenset(str(s.value) for s in (RunStatus.SUCCEEDED, RunStatus.FAILED,
                                             RunStatus.CANCELLED, RunStatus.BUDGET_EXHAUSTED))


class Outcome(WireEnum):
    """How an action (a skill's goal) ended."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"
    TIMED_OUT = "timed_out"
    REFUSED = "refused"


class StepStatus(WireEnum):
    """A plan step in the plan queue."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    SKIPPED = "skipped"
    FAILED = "failed"


class Decision(WireEnum):
    """What a monitor verdict decides ('' when no rule fired)."""

    NONE = ""
    FINISH = "finish"
    FAIL = "fail"
    ESCALATE = "escalate"


__all__ = ["RUN_ENDED", "Decision", "Outcome", "RunStatus", "StepStatus", "WireEnum"]
