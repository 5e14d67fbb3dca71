"""Leader-arm teleoperation: an SO-101 leader arm on its own bus steers the follower.

The leader (the same STS3215 servos, torque off, moved by hand) is read at the control rate;
its joint positions, in radians from its own calibration (LeRobot's degrees for every joint,
the leader's gripper too, so leader and follower jaws read alike), become the follower's
target through the same path every other command takes: ``clamp_position`` into the
follower's limits, then ``ArmController.command`` (unknown / non-finite joints refused, the
workspace box checked, the e-stop latch checked) and the controller's speed clamp on every
tick.

Safety on top of that:

- the follower only starts following once the leader is close to its pose
  (``engage_within``), so picking up a leader held elsewhere never yanks the follower;
- after an e-stop is reset, or a pause, it has to be engaged again the same way;
- a leader bus that stops answering (``max_missed_reads`` in a row) makes the follower hold.

Every status is a sentence with whole joint names (``LeaderStatus.message``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from solarian_agent.arm.safety import ArmLimits, EStopLatchedError, clamp_position
from solarian_agent.hw.errors import HardwareError
from solarian_agent.hw.teleop import error_sentence, format_positions


class Follower(Protocol):
    """What the leader drives (``ArmController`` satisfies it)."""

    def command(self, target: Mapping[str, float], source: str = "agent",
                max_velocity: float | None = None) -> None: ...

    def hold(self, reason: str = "") -> None: ...

    def positions(self) -> dict[str, float]: ...


@dataclass(frozen=True)
class LeaderConfig:
    engage_within: float = 0.35  # rad (every joint, the jaw too) the leader must be near
    max_missed_reads: int = 5

    def __post_init__(self) -> None:
        if not self.engage_within > 0:
            raise ValueError(f"engage_within must be > 0, got {self.engage_within}")
        if self.max_missed_reads < 1:
            raise ValueError(f"max_missed_reads must be >= 1, got {self.max_missed_reads}")


@dataclass(frozen=True)
class LeaderStatus:
    state: str  # waiting | following | paused | lost | estop | refused
    message: str
    target: dict[str, float] = field(default_factory=dict)


class LeaderFollower:
    def __init__(self, read_leader: Callable[[], Mapping[str, float]], follower: Follower,
                 limits: ArmLimits, config: LeaderConfig | None = None,
                 estop_reason: Callable[[], str | None] | None = None) -> None:
        """``estop_reason``: the follower's latched e-stop reason (None while released), so
        the status says so even before a command is refused."""
        self.read_leader = read_leader
        self.estop_reason = estop_reason
        self.follower = follower
        self.limits = limits
        self.config = config or LeaderConfig()
        self.engaged = False
        self.paused = False
        self.missed = 0
        self.commands = 0

    def pause(self) -> None:
        """Stop following (the follower holds); ``resume`` engages again by alignment."""
        self.paused = True
        self.engaged = False
        self.follower.hold("leader teleop paused")

    def resume(self) -> None:
        self.paused = False

    def disengage(self) -> None:
        self.engaged = False

    def step(self) -> LeaderStatus:
        """One tick: read the leader, command the follower; never raises."""
        try:
            leader = dict(self.read_leader())
        except HardwareError as e:
            self.missed += 1
            if self.missed >= self.config.max_missed_reads:
                if self.missed == self.config.max_missed_reads:
                    self.follower.hold("leader arm not answering")
                self.engaged = False
                return LeaderStatus("lost", f"The leader arm does not answer "
                                            f"({error_sentence(e)}) The follower holds.")
            return LeaderStatus("waiting", f"A leader reading failed: {error_sentence(e)}")
        self.missed = 0
        if self.paused:
            return LeaderStatus("paused", "Paused: the follower holds. Press p to follow again.")
        joints = [n for n in self.limits.names if n in leader]
        if not joints:
            return LeaderStatus("refused", "The leader arm reports none of the follower's "
                                           f"joints ({', '.join(self.limits.names)}).")
        try:
            target = clamp_position(self.limits, {n: leader[n] for n in joints})
        except (ValueError, HardwareError) as e:
            return LeaderStatus("refused", f"The leader's reading was refused: "
                                           f"{error_sentence(e)}")
        reason = self.estop_reason() if self.estop_reason is not None else None
        if reason is not None:
            self.engaged = False
            return self._estop(EStopLatchedError(reason))
        if not self.engaged:
            waiting = self._alignment(target)
            if waiting is not None:
                return waiting
            self.engaged = True
        try:
            self.follower.command(target, source="operator")
        except EStopLatchedError as e:
            self.engaged = False
            return self._estop(e)
        except Exception as e:  # workspace / unsafe command: refused, the follower holds
            return LeaderStatus("refused", f"The follower refused the leader's pose: "
                                           f"{error_sentence(e)}", target)
        self.commands += 1
        return LeaderStatus("following", f"Following: {format_positions(target)}.", target)

    @staticmethod
    def _estop(e: EStopLatchedError) -> LeaderStatus:
        return LeaderStatus("estop", f"{error_sentence(e)} Press z to reset it; then bring the "
                                     "leader to the follower's pose again.")

    def _alignment(self, target: Mapping[str, float]) -> LeaderStatus | None:
        now = self.follower.positions()
        if not now:
            return LeaderStatus("waiting", "Waiting for the follower's first reading.")
        far = []
        for n, v in target.items():
            if n not in now:
                continue
            gap = abs(v - now[n])
            if gap > self.config.engage_within:
                far.append(f"{n} is {gap:.2f} rad away")
        if far:
            return LeaderStatus("waiting", "Bring the leader arm to the follower's pose to "
                                           f"start following: {', '.join(far)}.")
        return None


__all__ = ["Follower", "LeaderConfig", "LeaderFollower", "LeaderStatus"]
