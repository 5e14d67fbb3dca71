"""The command gate: who holds the arm, who may take it, and a record of everything refused.

Every command that can move the arm carries its source.  The gate lets one source hold the arm
at a time:

* a source of higher priority takes the arm at once (the operator always wins): the gate
  answers with the source it took the arm from, so the caller can announce the takeover
  (``arm_taken``) and the running skill stops;
* a source of lower priority is refused (:class:`ArmHeldError`, reason ``held by <holder>``)
  while the holder's lease lives; the lease lives ``lease_s`` after the holder's last command
  and ends early when the holder releases the arm;
* a source of equal priority is the holder itself (one source, one priority).

The gate knows nothing of joints or limits: those are the safety layer's
(:mod:`solarian_agent.arm.safety`).  It also keeps the refusal record: every refused, clamped
or preempted command as a :class:`Refusal` (source, joint, value asked, limit, reason), the
newest few for the panel, and exact counts summarised once per ``summary_period_s`` so a flood
of bad commands is one line a second with the exact number, never a line per command and never
a lost count.

Time comes from the passed clock (``now`` arguments); nothing here sleeps or reads ``time``.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

from solarian_agent.core.errors import ConfigError
from solarian_agent.paths import find_share_file


class Source(StrEnum):
    """Who sent a command (the default priority order, highest first)."""

    OPERATOR = "operator"  # the panel, keyboard teleop, the leader arm
    EXTERNAL = "external"  # another ROS stack, through arm_controller/joint_trajectory
    AGENT = "agent"  # the skills
    POLICY = "policy"  # a learned policy


class RefusalKind(StrEnum):
    REFUSED = "refused"  # nothing of the command reached the arm
    CLAMPED = "clamped"  # the command reached the arm inside the limits, not as asked
    PREEMPTED = "preempted"  # the holder lost the arm to a source of higher priority


class ArmHeldError(Exception):
    """A command from a source of lower priority while another source holds the arm."""

    def __init__(self, source: str, holder: str, lease_left_s: float) -> None:
        self.source = source
        self.holder = holder
        self.lease_left_s = lease_left_s
        super().__init__(f"held by {holder} (its lease ends in {lease_left_s:.1f} s unless it "
                         f"commands again; {source} has lower priority)")


class UnknownSourceError(Exception):
    """A command whose source the gate has no priority for."""

    def __init__(self, source: str, known: tuple[str, ...]) -> None:
        self.source = source
        super().__init__(f"unknown command source {source!r}; the gate knows {list(known)}")


DEFAULT_PRIORITY = tuple(s.value for s in Source)
DEFAULT_LEASE_S = {"operator": 3.0, "external": 1.0, "agent": 1.0, "policy": 1.0}


@dataclass(frozen=True)
class GateConfig:
    """``gate:`` in config/arm_so101.yaml.  ``priority``: the sources, highest first;
    ``lease_s``: per source, how long it keeps the arm after its last command;
    ``summary_period_s``: refusal summaries at most this often; ``recent``: how many refusals
    the panel is shown."""

    priority: tuple[str, ...] = DEFAULT_PRIORITY
    lease_s: tuple[tuple[str, float], ...] = tuple(DEFAULT_LEASE_S.items())
    summary_period_s: float = 1.0
    recent: int = 20

    def __post_init__(self) -> None:
        if not self.priority or len(set(self.priority)) != len(self.priority):
            raise ConfigError("gate.priority", f"must name each source once, got {self.priority}")
        leases = dict(self.lease_s)
        missing = [s for s in self.priority if s not in leases]
        if missing:
            raise ConfigError("gate.lease_s", f"no lease for {missing}")
        for s, v in leases.items():
            if not (v > 0 and v < float("inf")):
                raise ConfigError(f"gate.lease_s.{s}", f"must be a number > 0, got {v!r}")
        if not self.summary_period_s > 0:
            raise ConfigError("gate.summary_period_s",
                              f"must be > 0, got {self.summary_period_s}")
        if self.recent < 1:
            raise ConfigError("gate.recent", f"must be >= 1, got {self.recent}")

    def rank(self, source: str) -> int:
        """0 is the highest priority."""
        try:
            return self.priority.index(source)
        except ValueError:
            raise UnknownSourceError(source, self.priority) from None

    def lease(self, source: str) -> float:
        return float(dict(self.lease_s)[source])

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None, where: str = "gate") -> GateConfig:
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise ConfigError(where, f"must be a mapping, got {type(data).__name__}")
        unknown = set(data) - {"priority", "lease_s", "summary_period_s", "recent"}
        if unknown:
            raise ConfigError(where, f"unknown keys {sorted(unknown)}")
        try:
            priority = tuple(str(s) for s in data.get("priority", DEFAULT_PRIORITY))
            raw = data.get("lease_s", DEFAULT_LEASE_S)
            if not isinstance(raw, Mapping):
                raise ConfigError(f"{where}.lease_s", "must be a mapping of source: seconds")
            leases = {**DEFAULT_LEASE_S, **{str(k): float(v) for k, v in raw.items()}}
            return cls(priority=priority,
                       lease_s=tuple((s, leases[s]) for s in priority if s in leases),
                       summary_period_s=float(data.get("summary_period_s", 1.0)),
                       recent=int(data.get("recent", 20)))
        except ConfigError as e:
            raise ConfigError(where + e.path.removeprefix("gate"),
                              str(e).removeprefix(f"{e.path}: ")) from None
        except (TypeError, ValueError) as e:
            raise ConfigError(where, str(e)) from None

    @classmethod
    def from_yaml(cls, path: str | Path) -> GateConfig:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f) or {}
        return cls.from_mapping(doc.get("gate"), f"{path}: gate")

    @classmethod
    def shipped(cls) -> GateConfig:
        """``gate:`` of the shipped config/arm_so101.yaml (the simulators' gate, as the real
        arm's); the defaults when the file is not found."""
        path = find_share_file("config", "arm_so101.yaml")
        return cls() if path is None else cls.from_yaml(path)


@dataclass(frozen=True)
class Refusal:
    """One refused, clamped or preempted command.  ``code`` groups it in the summaries
    (``held``, ``limit``, ``workspace``, ``estop``, ``unknown_joint``, ``malformed``, ...)."""

    stamp: float
    source: str
    reason: str
    code: str
    kind: str = RefusalKind.REFUSED
    joint: str = ""
    value: float | None = None
    limit: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"stamp": round(self.stamp, 3), "source": self.source, "kind": str(self.kind),
                "code": self.code, "joint": self.joint, "value": self.value,
                "limit": self.limit, "reason": self.reason}


@dataclass
class RefusalSummary:
    """The refusals of one period: exact counts per (kind, source, code)."""

    start: float
    end: float
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def line(self) -> str:
        parts = ", ".join(f"{k}: {n}" for k, n in sorted(self.counts.items()))
        return (f"{self.total} command(s) refused/clamped/preempted in "
                f"{self.end - self.start:.1f} s ({parts})")


class RefusalLog:
    """The record of refusals: exact totals, the newest ``recent`` ones, and a summary of the
    current period handed out by :meth:`summary_due` at most once per ``period_s``."""

    def __init__(self, period_s: float = 1.0, recent: int = 20) -> None:
        self.period_s = period_s
        self.recent: deque[Refusal] = deque(maxlen=recent)
        self.totals: dict[str, int] = {}
        self._pending: RefusalSummary | None = None
        self._lock = threading.Lock()

    @staticmethod
    def key(r: Refusal) -> str:
        return f"{r.kind} {r.source} {r.code}"

    def add(self, r: Refusal) -> None:
        k = self.key(r)
        with self._lock:
            self.recent.append(r)
            self.totals[k] = self.totals.get(k, 0) + 1
            if self._pending is None:
                self._pending = RefusalSummary(r.stamp, r.stamp)
            self._pending.counts[k] = self._pending.counts.get(k, 0) + 1
            self._pending.end = max(self._pending.end, r.stamp)

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.totals.values())

    def summary_due(self, now: float, force: bool = False) -> RefusalSummary | None:
        """The pending summary once its period is over (or ``force``), else None; a summary
        is handed out once and its counts start afresh, so the summaries add up exactly."""
        with self._lock:
            p = self._pending
            if p is None or (not force and now < p.start + self.period_s):
                return None
            self._pending = None
            p.end = max(p.end, now)
            return p

    def last(self, n: int = 10) -> list[dict[str, Any]]:
        with self._lock:
            return [r.as_dict() for r in list(self.recent)[-n:]]


@dataclass(frozen=True)
class Admission:
    """A command let through: ``taken_from`` is the source it preempted ("" when none)."""

    source: str
    taken_from: str = ""


class CommandGate:
    """One holder at a time, by priority and lease (see the module docstring).  Thread-safe:
    commands arrive on bus threads while the control loop reads the holder."""

    def __init__(self, config: GateConfig | None = None) -> None:
        self.config = config or GateConfig()
        self.log = RefusalLog(self.config.summary_period_s, self.config.recent)
        self._holder = ""
        self._last = 0.0  # the holder's last command
        self._since = 0.0
        self._lock = threading.Lock()
        self.changes = 0

    def _lapse(self, now: float) -> None:
        if self._holder and now - self._last >= self.config.lease(self._holder):
            self._holder = ""
            self.changes += 1

    def admit(self, source: str, now: float) -> Admission:
        """Let a command from ``source`` through, or raise :class:`ArmHeldError` /
        :class:`UnknownSourceError` (recorded as refusals).  A command renews the lease."""
        try:
            rank = self.config.rank(source)
        except UnknownSourceError as e:
            self.log.add(Refusal(now, source, str(e), "unknown_source"))
            raise
        with self._lock:
            self._lapse(now)
            holder = self._holder
            if holder and holder != source and self.config.rank(holder) <= rank:
                left = self.config.lease(holder) - (now - self._last)
                err = ArmHeldError(source, holder, left)
            else:
                err = None
                if holder != source:
                    self._holder, self._since = source, now
                    self.changes += 1
                self._last = now
        if err is not None:
            self.log.add(Refusal(now, source, str(err), "held"))
            raise err
        if holder and holder != source:
            self.log.add(Refusal(now, holder, f"taken by {source}", "preempted",
                                 RefusalKind.PREEMPTED))
            return Admission(source, holder)
        return Admission(source)

    def release(self, source: str, now: float) -> bool:
        """The holder gives the arm up; False when ``source`` does not hold it."""
        with self._lock:
            self._lapse(now)
            if self._holder != source or not source:
                return False
            self._holder = ""
            self.changes += 1
            return True

    def holder(self, now: float) -> str:
        with self._lock:
            self._lapse(now)
            return self._holder

    def status(self, now: float) -> dict[str, Any]:
        """The holder as the panel, ``AgentState`` and the ``arm/gate`` topic show it."""
        with self._lock:
            self._lapse(now)
            h = self._holder
            left = max(0.0, self.config.lease(h) - (now - self._last)) if h else 0.0
            since = self._since if h else None
        return {"holder": h, "since": since, "lease_left_s": round(left, 2),
                "priority": list(self.config.priority), "refused_total": self.log.total,
                "last_refusals": self.log.last(5)}


__all__ = ["DEFAULT_LEASE_S", "DEFAULT_PRIORITY", "Admission", "ArmHeldError", "CommandGate",
           "GateConfig", "Refusal", "RefusalKind", "RefusalLog", "RefusalSummary", "Source",
           "UnknownSourceError"]
