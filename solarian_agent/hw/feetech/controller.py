"""``ArmController``: the fixed-rate control loop between commands and an arm.

Each ``step()``:

1. reads the arm (one SYNC_READ: positions, speed, load, voltage, temperature, moving, flags);
   a failed read writes nothing (the arm's state is unknown) and counts a fault;
   ``max_consecutive_faults`` in a row trip the e-stop;
2. trips the e-stop on servo status flags (voltage, overheat, overload, ...: a servo whose
   own protection cut its torque is named, never a silent limp arm) and on temperatures
   above ``max_temperature_c``; with a ``HealthMonitor`` (health.py), scales the arm's speed
   down as a servo nears its temperature limit (derating) and says why;
3. e-stop latched → applies ``estop_action`` ("hold": goal = where the arm was when it
   tripped, written every tick; "torque_off": torque released) and nothing else moves the arm
   until ``reset_estop()``; the old target is dropped;
4. no command within ``command_timeout_s`` (0.08 s) → drops the target (never keeps moving
   toward an old one) and ramps the arm joints to rest within the deceleration limit
   (``arm/stopping.py``: smooth, never a jerk), then holds; the jaw keeps its last command,
   so a held object stays squeezed;
5. otherwise moves toward the target through ``clamp_target`` (joint limits, max velocity ×
   dt, max step), from the last goal kept within ``lead_time_s × max_velocity`` of where the
   arm really is, and writes one SYNC_WRITE of goal positions;
6. returns an ``ArmReading`` with readings and diagnostics.

Torque comes on (at start-up, after ``enable_torque()``, on an e-stop reset after
``torque_off``) holding where the arm is, never by a jump: a joint found outside its
calibrated window (moved by hand, sagging with torque off) by more than one step at the step
and speed limits (``min(max_step, max_velocity / rate_hz)``) keeps the whole arm's torque off,
and every reading says which joint, where and why, until it is moved back by hand; a joint
within one step of its window is held at the window's edge, at most one step away.

``step()`` never raises: every error becomes a fault in the reading and the arm goes safe.
The controller works against the small ``ArmPort`` protocol, so the simulator can stand in
for ``FeetechArm``.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from solarian_agent.arm.safety import (
    CommandWatchdog,
    EStopLatch,
    EStopLatchedError,
    UnsafeCommandError,
    WorkspaceGuard,
    clamp_position,
    clamp_target,
    validate_target,
)
from solarian_agent.arm.stopping import SmoothStop, stop_start
from solarian_agent.core.clock import Clock
from solarian_agent.hw.errors import HardwareError
from solarian_agent.hw.feetech.arm import ArmState
from solarian_agent.hw.feetech.calibration import GRIPPER
from solarian_agent.hw.feetech.controller_config import (
    ArmControllerConfig,
    ArmPort,
)
from solarian_agent.hw.feetech.health import HealthMonitor, HealthReport
from solarian_agent.hw.feetech.readings import (
    ArmDiagnostics,
    ArmReading,
    ServoDiagnostic,
    worst_level,
)

EventCallback = Callable[[str, dict[str, Any]], None]


class ArmController:
    """Fixed-rate control of one arm with the e-stop latch and command watchdog applied."""

    def __init__(
        self,
        arm: ArmPort,
        clock: Clock,
        config: ArmControllerConfig | None = None,
        on_event: EventCallback | None = None,
        workspace: WorkspaceGuard | None | bool = True,
        health: HealthMonitor | None = None,
    ) -> None:
        """``workspace``: the tip's workspace box checked through forward kinematics on every
        target and every step (True: the default box over the URDF model; False: off, for
        tests of the joint layer alone).  ``health``: servo health and derating (None: none;
        the arm's speed is then never scaled)."""
        self.arm = arm
        self.clock = clock
        self.config = config or ArmControllerConfig()
        self.limits = arm.limits
        if workspace is True:
            from solarian_agent.arm.kinematics import workspace_guard

            workspace = workspace_guard()
        self.guard: WorkspaceGuard | None = workspace or None
        self.health = health
        self._health: HealthReport | None = None
        self.latch = EStopLatch()
        self.watchdog = CommandWatchdog(self.config.command_timeout_s, clock)
        self._stop = SmoothStop(self.config.stop_decel)  # the ramp to rest after a timeout
        self._goal_v: dict[str, float] = {}  # the goals' speeds of the last tracking step
        self._on_event = on_event
        self._lock = threading.Lock()
        self._target: dict[str, float] | None = None
        self._target_velocity: float | None = None
        self._goal: dict[str, float] | None = None  # last goal written
        self._hold: dict[str, float] | None = None  # goal while holding
        self._estop_applied = False
        self._resume = False
        # the operator released the joints (disable_torque): only enable_torque brings torque
        # back, never an e-stop reset (someone may be guiding the arm by hand)
        self._released = False
        self._last_step: float | None = None
        self._consecutive_faults = 0
        self.latest: ArmReading | None = None
        self.events: deque[tuple[float, str, dict[str, Any]]] = deque(maxlen=200)
        self.steps = 0
        self.overruns = 0
        self._started = False
        self._torque_pending = False  # torque should come on once the arm allows it
        self._torque_refused: tuple[tuple[str, str], ...] = ()  # the joints last said out

    # ------------------------------------------------------------------ commands (any thread)

    def command(self, target: Mapping[str, float], source: str = "agent",
                max_velocity: float | None = None) -> None:
        """Set a new target (joint units; partial targets keep the other joints' goals).

        Raises ``UnsafeCommandError`` (unknown joint, NaN/inf) and ``EStopLatchedError``;
        nothing is stored in either case.  Feeds the watchdog."""
        checked = validate_target(self.limits, target)
        if self.guard is not None and any(j in checked for j in self.guard.joints):
            current = {**self.positions(), **(self._target or {})}
            if all(j in {**current, **checked} for j in self.guard.joints):
                self.guard.check_target(checked, current)
        if max_velocity is not None and not (math.isfinite(max_velocity) and max_velocity >= 0):
            raise UnsafeCommandError(f"max_velocity {max_velocity!r} must be finite and >= 0",
                                     value=max_velocity)
        self.latch.check()
        with self._lock:
            merged = dict(self._target or {})
            merged.update(checked)
            self._target = merged
            self._target_velocity = max_velocity
            self.watchdog.feed()
            self._stop.cancel()
        self._event("command", {"source": source, "joints": sorted(checked)})

    def hold(self, reason: str = "hold requested") -> None:
        """Drop the target; hold where the arm is at the next step."""
        with self._lock:
            self._target = None
            self._hold = None
            # and forget the last goal: a command before the next step must not send the other
            # joints back to it (up to one lead ahead of a blocked arm)
            self._goal = None
            self.watchdog.clear()
            self._stop.cancel()
        self._event("hold", {"reason": reason})

    def estop(self, reason: str) -> None:
        if self.latch.trip(reason):
            self._event("estop", {"reason": reason})

    def reset_estop(self) -> bool:
        """Release the latch.  The arm resumes holding where it is; no old target survives."""
        with self._lock:
            was = self.latch.reset()
            if was:
                self._target = None
                self._hold = None
                self.watchdog.clear()
                self._resume = True
                self._consecutive_faults = 0
        if was:
            self._event("estop_reset", {})
        return was

    def setpoint(self) -> dict[str, float]:
        """The active target merged over the last goal (for jogging from where we aim)."""
        with self._lock:
            base = dict(self._goal or {})
            if not base and self.latest is not None and self.latest.state is not None:
                base = dict(self.latest.state.positions)
            base.update(self._target or {})
            return base

    @property
    def bus_lost(self) -> bool:
        """The servo bus stopped answering: ``max_consecutive_faults`` failed reads in a row
        (the e-stop tripped on the last of them)."""
        return self._consecutive_faults >= self.config.max_consecutive_faults

    def positions(self) -> dict[str, float]:
        """The last measured positions ({} before the first good read)."""
        r = self.latest
        return {} if r is None or r.state is None else dict(r.state.positions)

    # ------------------------------------------------------------------ the loop

    def step(self) -> ArmReading:
        """One control tick; never raises."""
        now = self.clock.now()
        dt = 0.0 if self._last_step is None else now - self._last_step
        dt = min(max(dt, 0.0), 2.0 * self.config.period_s)  # a stalled loop never jumps
        self._last_step = now
        self.steps += 1
        faults: list[str] = []
        try:
            reading = self._step(now, dt, faults)
        except Exception as e:  # last resort: report, go safe, keep the loop alive
            msg = f"control step failed: {type(e).__name__}: {e}"
            faults.append(msg)
            self.estop(msg)
            if self.config.estop_action == "torque_off":
                # the e-stop branch of _step may never be reached again (the same error
                # every tick): release the joints here, as configured
                try:
                    self._try_torque(False, faults)
                except Exception as e2:
                    faults.append(f"torque off failed: {type(e2).__name__}: {e2}")
            reading = self._reading(now, None, "fault", {}, faults)
        self.latest = reading
        return reading

    def _step(self, now: float, dt: float, faults: list[str]) -> ArmReading:
        cfg = self.config
        try:
            state = self.arm.read_state()
        except HardwareError as e:
            self._consecutive_faults += 1
            faults.append(f"read failed: {e}")
            self._event("fault", {"error": str(e), "consecutive": self._consecutive_faults})
            if self._consecutive_faults >= cfg.max_consecutive_faults:
                self.estop(f"servo bus: {self._consecutive_faults} consecutive failed reads; "
                           f"last: {e}")
                if cfg.estop_action == "torque_off":
                    self._try_torque(False, faults)
            return self._reading(now, None, "fault", {}, faults)
        self._consecutive_faults = 0
        if self.health is not None:
            self._health = self.health.update(state)
            said = self.health.announce(self._health)
            if said is not None:
                self._event("derate", said)

        if cfg.trip_on_servo_flags:
            for f in state.faults:
                self.estop(str(f))
                faults.append(str(f))
        for name, s in state.servos.items():
            if s.temperature_c >= cfg.max_temperature_c:
                msg = (f"{name} (servo {s.servo_id}) at {s.temperature_c:.0f} °C, above "
                       f"{cfg.max_temperature_c:.0f} °C")
                self.estop(msg)
                faults.append(msg)

        if not self._started:
            self._started = True
            self._hold = dict(state.positions)
            self._torque_pending = cfg.enable_torque_on_start

        if self.latch.tripped:
            with self._lock:
                self._target = None
                self.watchdog.clear()
                self._stop.cancel()
                first = not self._estop_applied
                self._estop_applied = True
                if first or self._hold is None:
                    self._hold = dict(state.positions)
                hold = dict(self._hold)
            if cfg.estop_action == "torque_off":
                if first or self.arm.torque_enabled:
                    self._try_torque(False, faults)
                return self._reading(now, state, "estop", {}, faults)
            written = self._write(hold, faults) if self.arm.torque_enabled else {}
            return self._reading(now, state, "estop", written, faults)

        if self._estop_applied or self._resume:
            with self._lock:
                self._estop_applied = False
                self._resume = False
                self._hold = dict(state.positions)
                self._goal = dict(state.positions)
                self._torque_pending = not self._released
        if self._torque_pending and (self.arm.torque_enabled or self._torque_on(state, faults)):
            self._torque_pending = False

        if not self.arm.torque_enabled:
            # joints are free: follow them so that torque-on never jumps to an old goal
            with self._lock:
                self._target = None
                self._hold = dict(state.positions)
                self._goal = dict(state.positions)
            return self._reading(now, state, "torque_off", {}, faults)

        with self._lock:
            target = self._target
            vmax = self._target_velocity
            if target is not None and self.watchdog.expired():
                age = self.watchdog.age()
                self._target = None
                target = None
                # the jaw stays at its last goal, one lead past where a held object stops it:
                # the same squeeze as while tracking, never a jump toward its far target
                self._stop.begin(*stop_start(
                    {**state.positions, **(self._goal or {})}, GRIPPER, None, self._goal_v))
                self._event("watchdog", {
                    "age_s": age, "timeout_s": cfg.command_timeout_s,
                    "action": "ramping to rest, the jaw keeps its command; target dropped"})
            if self._stop.active and dt > 0:
                sp = clamp_position(self.limits, self._stop.step(dt))
                if self.guard is not None and all(j in sp for j in self.guard.joints):
                    sp = {**sp, **self.guard.safe_step(dict(state.positions), sp)}
                self._hold = sp
                if self._stop.done or sp != self._stop.setpoint():
                    self._stop.cancel()  # at rest, or held at a limit or the workspace edge
            if self._hold is None:
                self._hold = dict(state.positions)
            hold = dict(self._hold)
            last_goal = dict(self._goal or hold)

        if target is None:
            goal = {n: hold.get(n, state.positions[n]) for n in state.positions}
            written = self._write(goal, faults)
            return self._reading(now, state, "holding", written, faults)

        # moving: from the last goal, kept close to where the arm really is
        # derating: a servo near its temperature limit slows the whole arm and shortens the
        # lead, so a blocked joint also pushes less (health.py)
        slow = 1.0 if self._health is None else self._health.speed_factor
        lim = self.limits.as_dict()
        base: dict[str, float] = {}
        for n, present in state.positions.items():
            lead = lim[n].max_velocity * cfg.lead_time_s * slow
            g = last_goal.get(n, present)
            base[n] = min(present + lead, max(present - lead, g))
        stepped = clamp_target(self.limits, base, target, dt * slow, vmax)
        goal = {n: stepped.get(n, last_goal.get(n, hold.get(n, base[n])))
                for n in state.positions}
        if self.guard is not None and all(j in goal for j in self.guard.joints):
            # a joint-space path between two safe targets may dip out of the box (into the
            # table): the step that would leave it is not taken, the arm holds at the edge
            safe = self.guard.safe_step(dict(state.positions), goal)
            if safe != goal:
                faults.append("workspace: step held at the workspace boundary")
                goal = safe
        with self._lock:
            self._hold = dict(goal)  # if the stream stops, we hold here, not at the target
            # the commanded speed, the stop's starting speed if the stream stops now
            self._goal_v = {n: min(lim[n].max_velocity, max(-lim[n].max_velocity, (
                goal[n] - last_goal.get(n, goal[n])) / dt)) for n in goal} if dt > 0 else {}
        written = self._write(goal, faults)
        return self._reading(now, state, "tracking", written, faults, target)

    def _write(self, goal: dict[str, float], faults: list[str]) -> dict[str, float]:
        try:
            self.arm.write_goal(goal)
        except (HardwareError, UnsafeCommandError) as e:
            faults.append(f"write failed: {e}")
            self._event("fault", {"error": str(e)})
            return {}
        with self._lock:
            self._goal = dict(goal)
        return goal

    def step_limit(self, joint: str) -> float:
        """The most ``joint`` may move in one write: the step and speed limits."""
        lim = self.limits.joint(joint)
        return min(self.limits.max_step, lim.max_velocity * self.config.period_s)

    def outside_window(self, positions: Mapping[str, float]) -> list[str]:
        """Each joint further outside its calibrated window than one step, described."""
        return [d for _, d in self._outside(positions)]

    def _outside(self, positions: Mapping[str, float]) -> list[tuple[tuple[str, str], str]]:
        """((joint, side), description) of each joint further out than one step."""
        out = []
        for name, p in positions.items():
            lim = self.limits.joint(name)
            over = max(lim.lower - p, p - lim.upper, 0.0)
            if over > self.step_limit(name) + 1e-9:
                side = "above" if p > lim.upper else "below"
                out.append(((name, side), f"{name} at {p:.3f} is {over:.3f} {side} its "
                            f"calibrated window {lim.lower:.3f}..{lim.upper:.3f} (more than "
                            f"one {self.step_limit(name):.3f} step)"))
        return out

    def _torque_on(self, state: ArmState, faults: list[str]) -> bool:
        """Torque on, holding where the arm is (clipped into the windows: at most one step
        away); refused, and said why, while a joint lies further outside its window."""
        far = self._outside(state.positions)
        if far:
            why = ("torque stays off: " + "; ".join(d for _, d in far)
                   + ": move it back inside its window by hand")
            faults.append(why)
            # said again only when other joints (or sides) are out: a reading flickering by a
            # tick changes the text every step and would flood the event log
            which = tuple(k for k, _ in far)
            if which != self._torque_refused:
                self._torque_refused = which
                self._event("torque_refused", {"reason": why})
            return False
        self._torque_refused = ()
        goal = clamp_position(self.limits, state.positions)
        if not self._write(goal, faults):
            return False
        self._try_torque(True, faults)
        with self._lock:
            self._hold = dict(goal)
        return self.arm.torque_enabled

    def _try_torque(self, enabled: bool, faults: list[str]) -> None:
        try:
            self.arm.set_torque(enabled)
        except HardwareError as e:
            faults.append(f"torque {'on' if enabled else 'off'} failed: {e}")
            self._event("fault", {"error": str(e)})

    def enable_torque(self) -> None:
        """Torque on at the next step, holding where the arm is (refused while latched)."""
        self.latch.check()
        with self._lock:
            self._resume = True
            self._released = False
            self._target = None

    def disable_torque(self) -> None:
        """Release the joints now (the arm sags; use for hand-guiding and calibration).  They
        stay released, an e-stop reset included, until :meth:`enable_torque`."""
        with self._lock:
            self._target = None
            self._hold = None  # if the release fails, hold where the arm is, not the old goal
            self._resume = False
            self._released = True
        self._torque_pending = False
        self.arm.set_torque(False)

    def run(self, stop: threading.Event, max_steps: int | None = None) -> None:
        """Step at ``rate_hz`` until ``stop`` is set (or ``max_steps``); never raises."""
        period = self.config.period_s
        next_t = self.clock.now()
        n = 0
        while not stop.is_set() and (max_steps is None or n < max_steps):
            self.step()
            n += 1
            next_t += period
            now = self.clock.now()
            if now > next_t + period:  # overrun: skip missed ticks instead of bursting
                self.overruns += 1
                next_t = now
            self.clock.sleep_until(next_t, stop)

    # ------------------------------------------------------------------ reporting

    def _event(self, kind: str, detail: dict[str, Any]) -> None:
        self.events.append((self.clock.now(), kind, detail))
        if self._on_event is not None:
            try:
                self._on_event(kind, detail)
            except Exception:  # a broken listener must not stop the arm
                pass

    def _reading(self, now: float, state: ArmState | None, mode: str,
                 goal: dict[str, float], faults: list[str],
                 target: dict[str, float] | None = None) -> ArmReading:
        return ArmReading(now, state, mode, dict(goal), dict(target) if target else None,
                          tuple(faults), self._diagnostics(state, faults))

    def _diagnostics(self, state: ArmState | None, faults: list[str]) -> ArmDiagnostics:
        cfg = self.config
        servos: list[ServoDiagnostic] = []
        if state is not None:
            for name, s in state.servos.items():
                level, msgs = "ok", list[str]()
                if s.error_flags:
                    level, msgs = "error", [*msgs, ", ".join(s.error_flags)]
                if s.temperature_c >= cfg.max_temperature_c:
                    level = "error"
                    msgs.append(f"{s.temperature_c:.0f} °C")
                elif s.temperature_c >= cfg.warn_temperature_c:
                    level = worst_level([level, "warn"])
                    msgs.append(f"hot: {s.temperature_c:.0f} °C")
                if s.voltage_v < cfg.warn_voltage_low_v or s.voltage_v > cfg.warn_voltage_high_v:
                    level = worst_level([level, "warn"])
                    msgs.append(f"supply {s.voltage_v:.1f} V")
                if abs(s.load) >= cfg.warn_load:
                    level = worst_level([level, "warn"])
                    msgs.append(f"load {abs(s.load) * 100:.0f}%")
                servos.append(ServoDiagnostic(name, s.servo_id, level, "; ".join(msgs) or "ok",
                                              s.voltage_v, s.temperature_c, s.load, s.moving))
        estop, reason = self.latch.tripped, self.latch.reason
        levels = [s.level for s in servos]
        if faults or state is None:
            levels.append("error")
        if estop:
            levels.append("error")
        derate = "" if self._health is None or state is None else self._health.reason
        if derate:
            levels.append("warn")
        level = worst_level(levels)
        parts = []
        if estop:
            parts.append(f"e-stop latched: {reason}")
        parts.extend(faults)
        parts.extend(f"{s.joint}: {s.message}" for s in servos if s.level != "ok")
        if derate:
            parts.append(f"derating: {derate}")
        bus = getattr(self.arm, "bus", None)
        stats = dict(vars(bus.stats)) if bus is not None and hasattr(bus, "stats") else {}
        return ArmDiagnostics(
            level=level, message="; ".join(parts) or "ok", servos=tuple(servos), estop=estop,
            estop_reason=reason, watchdog_expired=self.watchdog.expired(),
            consecutive_faults=self._consecutive_faults, bus=stats,
            health=() if self._health is None or state is None else self._health.servos,
            speed_factor=1.0 if self._health is None else self._health.speed_factor,
        )


__all__ = [
    "ArmController", "ArmControllerConfig", "ArmDiagnostics", "ArmPort", "ArmReading",
    "EStopLatchedError", "GRIPPER", "ServoDiagnostic",
]
