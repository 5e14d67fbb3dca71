"""What ``solarian-agent doctor`` reports: one :class:`Finding` per check (or per camera, per
joint where that says more), its :class:`Status`, and the exact command that fixes it.

The fix commands are built here, in one place, so every check names a command the same way
(the port quoted as a shell needs it) and a renamed command is changed once.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from enum import Enum

PROG = "solarian-agent"


class Status(Enum):
    """ok: nothing to do; warn: worth fixing, a task still runs; fail: a task would not run
    (or would run wrong: a camera that points beside the cup)."""

    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Finding:
    """One check's result: which check, its status, what it found (one line, with the
    figures), and for anything wrong the command that fixes it ("" when none is needed)."""

    check: str
    status: Status
    detail: str
    fix: str = ""

    def to_mapping(self) -> dict[str, str]:
        return {"check": self.check, "status": self.status.value, "detail": self.detail,
                "fix": self.fix}


def ok(check: str, detail: str) -> Finding:
    return Finding(check, Status.OK, detail)


def warn(check: str, detail: str, fix: str) -> Finding:
    return Finding(check, Status.WARN, detail, fix)


def fail(check: str, detail: str, fix: str = "") -> Finding:
    return Finding(check, Status.FAIL, detail, fix)


def one_line(text: object) -> str:
    """A message on one line (a YAML error's caret lines and indentation folded)."""
    return " ".join(str(text).split())


# ------------------------------------------------------------------------------ commands
def command(*words: str) -> str:
    """``solarian-agent WORDS...`` in backticks, each word quoted for a POSIX shell."""
    return "`" + " ".join([PROG, *(shlex.quote(w) for w in words)]) + "`"


def bringup(step: str = "") -> str:
    return command("bringup", "--step", step) if step else command("bringup")


def arm(sub: str, port: str, *more: str) -> str:
    return command("arm", sub, "--port", port, *more)


__all__ = ["PROG", "Finding", "Status", "arm", "bringup", "command", "fail", "ok",
           "one_line", "warn"]
