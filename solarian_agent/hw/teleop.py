"""Keyboard teleop for the terminal: jog joints, open/close the gripper, go home, e-stop.

``key_to_action`` is the pure key → action mapping.  ``KeyboardTeleop`` reads keys from any
file-like input (a raw terminal, a pipe, ``io.StringIO`` in tests); every key produces an
operator event through ``on_operator_event(kind, detail)`` — the harness wires that to
"operator takes over" — and jogs go through the safety clamp before they are sent, so one key
press never asks for more than ``max_velocity × jog_dt`` nor leaves the joint limits.

Default keys (lower case jogs +, the key below it jogs -)::

    shoulder_pan   q / a        wrist_flex   r / f        gripper   o open / c close
    shoulder_lift  w / s        wrist_roll   t / g        home      h
    elbow_flex     e / d                                  hold      space
    e-stop         x            reset e-stop z            quit      Esc or Ctrl-D (end of input)
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from solarian_agent.arm.jaw import SO101_JAW
from solarian_agent.arm.safety import ArmLimits, clamp_position, clamp_target

OperatorEventCallback = Callable[[str, dict[str, Any]], None]

JOG_KEYS: dict[str, tuple[str, int]] = {
    "q": ("shoulder_pan", +1), "a": ("shoulder_pan", -1),
    "w": ("shoulder_lift", +1), "s": ("shoulder_lift", -1),
    "e": ("elbow_flex", +1), "d": ("elbow_flex", -1),
    "r": ("wrist_flex", +1), "f": ("wrist_flex", -1),
    "t": ("wrist_roll", +1), "g": ("wrist_roll", -1),
}
OTHER_KEYS: dict[str, str] = {
    "o": "gripper_open", "c": "gripper_close", "h": "home", " ": "hold",
    "x": "estop", "z": "reset", "\x1b": "quit", "\x04": "quit",
}


@dataclass(frozen=True)
class TeleopAction:
    """What a key means.  ``kind``: jog | gripper | home | hold | estop | reset | quit |
    unknown; ``joint`` and ``direction`` (+1/-1) for jogs and the gripper."""

    kind: str
    joint: str = ""
    direction: int = 0


def key_to_action(key: str) -> TeleopAction:
    """Map one key to its action (case-insensitive; unknown keys map to ``unknown``)."""
    if key in OTHER_KEYS:
        name = OTHER_KEYS[key]
    else:
        k = key.lower()
        if k in JOG_KEYS:
            joint, direction = JOG_KEYS[k]
            return TeleopAction("jog", joint, direction)
        name = OTHER_KEYS.get(k, "")
    if name == "gripper_open":
        return TeleopAction("gripper", "gripper", +1)
    if name == "gripper_close":
        return TeleopAction("gripper", "gripper", -1)
    if name:
        return TeleopAction(name)
    return TeleopAction("unknown")


class TeleopTarget(Protocol):
    """Where jog targets go (``ArmController`` satisfies it)."""

    def setpoint(self) -> dict[str, float]: ...

    def command(self, target: Mapping[str, float], source: str = "agent",
                max_velocity: float | None = None) -> None: ...

    def hold(self, reason: str = "") -> None: ...

    def estop(self, reason: str) -> None: ...

    def reset_estop(self) -> bool: ...


@dataclass
class TeleopConfig:
    jog_step: float = 0.05  # rad per key press
    gripper_step: float = 0.1  # rad of jaw angle per key press (~6 deg, ~7 mm near closed)
    jog_dt: float = 0.1  # s: a key press may ask for at most max_velocity * jog_dt
    home: dict[str, float] = field(default_factory=lambda: {
        "shoulder_pan": 0.0, "shoulder_lift": 0.0, "elbow_flex": 0.0, "wrist_flex": 0.0,
        "wrist_roll": 0.0, "gripper": 0.0})


class KeyboardTeleop:
    def __init__(
        self,
        target: TeleopTarget,
        limits: ArmLimits,
        on_operator_event: OperatorEventCallback,
        config: TeleopConfig | None = None,
    ) -> None:
        self.target = target
        self.limits = limits
        self.on_operator_event = on_operator_event
        self.config = config or TeleopConfig()
        self.keys_handled = 0

    def handle_key(self, key: str) -> TeleopAction:
        """Act on one key and emit its operator event; never raises (errors are reported in
        the event's ``error`` field)."""
        action = key_to_action(key)
        detail: dict[str, Any] = {"key": key, "action": action.kind}
        if action.joint:
            detail["joint"] = action.joint
            detail["direction"] = action.direction
        try:
            if action.kind in ("jog", "gripper"):
                detail["target"] = self._jog(action)
            elif action.kind == "home":
                home = clamp_position(self.limits, {n: v for n, v in self.config.home.items()
                                                    if n in self.limits.names})
                self.target.command(home, source="operator")
                detail["target"] = home
            elif action.kind == "hold":
                self.target.hold("operator hold (teleop)")
            elif action.kind == "estop":
                self.target.estop("operator e-stop (teleop key)")
            elif action.kind == "reset":
                detail["released"] = self.target.reset_estop()
        except Exception as e:  # (SafetyError, ValueError, a faulted controller): the
            # keyboard must stay alive; the error is said as a sentence, its type kept apart
            detail["error"] = error_sentence(e)
            detail["error_type"] = type(e).__name__
        self.keys_handled += 1
        self._emit("teleop_key", detail)
        return action

    def _jog(self, action: TeleopAction) -> dict[str, float]:
        joint = action.joint
        if joint not in self.limits.names:
            raise ValueError(f"teleop: the arm has no joint {joint!r}")
        base = self.target.setpoint()
        if joint not in base or not math.isfinite(base[joint]):
            raise ValueError(f"teleop: position of {joint!r} unknown yet (no reading)")
        step = self.config.gripper_step if action.kind == "gripper" else self.config.jog_step
        want = {joint: base[joint] + action.direction * step}
        safe = clamp_target(self.limits, base, want, self.config.jog_dt)
        self.target.command(safe, source="operator")
        return safe

    def _emit(self, kind: str, detail: dict[str, Any]) -> None:
        try:
            self.on_operator_event(kind, detail)
        except Exception:  # a broken listener must not kill the keyboard loop
            pass

    def run(self, stream: Any, stop: threading.Event | None = None,
            max_keys: int | None = None) -> int:
        """Read keys one at a time from ``stream`` (``read(1)``) until end of input, a quit
        key, ``stop`` or ``max_keys``.  Returns the number of keys handled."""
        n = 0
        while (stop is None or not stop.is_set()) and (max_keys is None or n < max_keys):
            try:
                key = stream.read(1)
            except (OSError, ValueError) as e:
                self._emit("teleop_error", {"error": f"reading keys failed: {e}"})
                break
            if not key:
                break
            if isinstance(key, bytes):
                key = key.decode("latin-1")
            if key in ("\r", "\n"):
                continue
            n += 1
            if self.handle_key(key).kind == "quit":
                break
        return n


def error_sentence(e: BaseException) -> str:
    """An exception as a sentence for a person: its message, capitalised, with a full stop
    (the class name left out)."""
    msg = " ".join(str(e).split()) or type(e).__name__
    msg = msg[0].upper() + msg[1:]
    return msg if msg[-1] in ".!?" else msg + "."


def format_positions(positions: Mapping[str, float]) -> str:
    """Joint positions with whole names in radians; the gripper's jaw angle with its opening
    in mm."""
    parts = []
    for n, v in positions.items():
        parts.append(f"{n} {v:+.2f} rad ({SO101_JAW.opening(v) * 1000:.1f} mm open)"
                     if n == "gripper" else f"{n} {v:+.2f} rad")
    return ", ".join(parts)


_ACTION_WORDS = {"home": "home", "hold": "hold", "estop": "e-stop", "reset": "e-stop reset",
                 "quit": "quit"}


def status_line(detail: Mapping[str, Any], positions: Mapping[str, float] | None) -> str:
    """One teleop event as a line: what the key did, where the arm is, and any error as a
    sentence."""
    kind = str(detail.get("action", ""))
    if kind == "jog":
        what = f"jog {detail.get('joint')} {'+' if detail.get('direction', 0) > 0 else '-'}"
    elif kind == "gripper":
        what = "open the gripper" if detail.get("direction", 0) > 0 else "close the gripper"
    elif kind == "reset":
        what = "e-stop reset" if detail.get("released") else "e-stop reset (it was not latched)"
    elif kind == "unknown":
        what = f"key {detail.get('key', '')!r} does nothing (see the key list)"
    else:
        what = _ACTION_WORDS.get(kind, kind)
    line = f"{what}: {format_positions(positions)}" if positions else f"{what}: no reading yet"
    if detail.get("error"):
        line += f"\n  {detail['error']}"
    return line


@contextlib.contextmanager
def raw_terminal(fd: int | None = None) -> Iterator[None]:
    """Put a terminal in cbreak mode (keys arrive one by one, no echo); restore on exit.
    Does nothing when the input is not a terminal."""
    import termios
    import tty

    if fd is None:
        try:
            fd = sys.stdin.fileno()
        except (AttributeError, OSError, ValueError):  # not a real file (a test's StringIO)
            yield
            return
    if not os.isatty(fd):
        yield
        return
    old = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, old)


HELP = __doc__.split("Default keys", 1)[1] if __doc__ else ""
