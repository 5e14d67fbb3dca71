"""What the planner is told about the arm's own health: a slowed arm says so in every wake.

A servo near its temperature limit slows the whole arm (derating, decided by the arm's
controller) without stopping the task; the planner should know, so that a slower motion is not
taken for a stuck one and a long task can be paced.  The arm node's ``diagnostics``
(``DiagnosticArray``, the arm's own status first, named ``arm``) carry the speed factor while
derating lasts and the reason in the status message.  The message is the arm's text, quoted as
data: it is never read as an instruction.  Nothing is said while the arm runs at full speed or
when no arm publishes diagnostics (the simulators do not).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .text import quote

ARM_STATUS = "arm"  # the arm's own entry in its diagnostics


def derating_line(diag: Mapping[str, Any] | None) -> str:
    """The wake line for a slowed arm (``""`` when it runs at full speed or is not known)."""
    if not isinstance(diag, Mapping):
        return ""
    status = diag.get("status")
    if not isinstance(status, (list, tuple)):
        return ""
    arm = next((s for s in status if isinstance(s, Mapping) and s.get("name") == ARM_STATUS),
               None)
    if arm is None:
        return ""
    values = arm.get("values")
    factor = values.get("speed_factor") if isinstance(values, Mapping) else None
    try:
        f = float(factor) if factor is not None else 1.0
    except (TypeError, ValueError):
        return ""
    if not math.isfinite(f) or f >= 1.0:
        return ""
    f = max(0.0, f)
    return (f"Arm: slowed to {100 * f:.0f} % of its speed by its own protection (motions take "
            f"longer; it is not stuck): {quote('arm', arm.get('message', ''), 300)}")


__all__ = ["ARM_STATUS", "derating_line"]
