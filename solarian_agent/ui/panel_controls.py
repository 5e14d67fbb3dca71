"""What an operator may do from the panel, and the arm's e-stop as the panel knows it.

Control lock: one page holds it at a time; sending a message, Resume, Take over, Reset and
releasing the e-stop need it (the page's secret token, compared in constant time).  Cancel,
Pause and E-STOP are safety commands: any same-origin viewer may press them, lock or not.

Pause and Take over are operator events (``operator/events``): the executor stops the running
skill at its next control tick, the planner pauses the run and is told what the operator did;
the next message resumes it (Resume sends one).  While the e-stop is latched no message is sent
(the run would resume into refused skills): the page disables its message box with the reason,
and the server refuses a message sent anyway; Cancel, Reset and the e-stop reset still work.

E-stop: followed from the ``estop`` / ``estop_reset`` operator events the arm driver (or the
simulator) publishes, and pushed to every page (``estop`` messages); when nothing serves
``estop`` the button says so (re-checked about once a second).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..core import names
from ..core.messages import OperatorEvent
from .link import AgentLink, Reply, estop_unavailable
from .panel_clients import Client, ControlLock, finite
from .panel_door import same_secret

log = logging.getLogger(__name__)

RESUME_TEXT = "resume"
# what needs the control lock (the rest is open to every same-origin viewer)
LOCKED = ("message", "resume", "takeover", "reset", "estop_reset")


class OperatorControls:
    """The lock, the operator's commands and the e-stop of one panel (the panel's loop only,
    except the ``*_command`` methods, which block and run off the loop).

    It is handed what it acts on, not the panel: the ``link`` to the agent, the open pages
    (``clients``, kept current by the panel), the ``lock``, ``broadcast`` to every page and
    ``run_status`` (the status of the run the pages show)."""

    def __init__(self, link: AgentLink, clients: Mapping[str, Client], lock: ControlLock,
                 broadcast: Callable[[dict[str, Any]], None],
                 run_status: Callable[[], object]) -> None:
        self.link = link
        self.clients = clients
        self.lock = lock
        self.broadcast = broadcast
        self.run_status = run_status
        self.estop: dict[str, Any] = {"available": self._estop_available(), "latched": False,
                                      "reason": "", "t": None}
        self._estop_checked_at = time.monotonic()

    # the lock ----------------------------------------------------------------------------
    def client_for(self, token: object) -> Client | None:
        """The open page whose secret ``token`` is (every page compared, in constant time)."""
        found = None
        for c in list(self.clients.values()):
            if same_secret(token, c.token):
                found = c
        return found

    def holds_lock(self, token: object) -> bool:
        c = self.client_for(token)
        return c is not None and self.lock.held_by(c.id)

    def acquire(self, token: object) -> Reply:
        c = self.client_for(token)
        if c is None:
            return {"ok": False, "reason": "taking control needs your page's token (from its "
                    "event stream's hello)"}
        before = self.lock.holder
        if self.lock.acquire(c.id, self.clients):
            if before != c.id:
                self.broadcast({"type": "lock", "holder": c.id})
            return {"ok": True, "reason": "", "holder": c.id}
        return {"ok": False, "reason": "another viewer holds the control lock",
                "holder": self.lock.holder}

    def release(self, token: object) -> Reply:
        c = self.client_for(token)
        if c is not None and self.lock.release(c.id):
            self.broadcast({"type": "lock", "holder": None})
            return {"ok": True, "reason": ""}
        return {"ok": False, "reason": "you do not hold the control lock"}

    def who(self, token: object) -> str:
        """The viewer a token shows, as the agent is told (never the token)."""
        c = self.client_for(token)
        held = c is not None and self.lock.held_by(c.id)
        who = f"viewer {c.id}" if c is not None else "a viewer"
        return f"{who}, {'holds control' if held else 'without the control lock'}"

    # what may be sent now ----------------------------------------------------------------
    def refusal(self, what: str) -> Reply | None:
        """Why ``what`` (message, resume) cannot be sent now, or None."""
        e = self.estop
        if e.get("latched"):
            reason = f" ({e['reason']})" if e.get("reason") else ""
            return {"ok": False, "estop": True,
                    "reason": f"the e-stop is latched{reason}: every skill would be refused; "
                              "reset the e-stop first"}
        status = self.run_status()
        if what == "resume" and status != "paused":
            return {"ok": False, "reason": f"nothing to resume: the run is "
                                           f"{str(status).replace('_', ' ')}"}
        return None

    def operator_command(self, kind: str, detail: dict[str, Any]) -> Reply:
        """Publish a pause / takeover operator event (blocking: run it off the loop)."""
        fn = getattr(self.link, "operator_event", None)
        if fn is None:
            return {"ok": False, "reason": "this link cannot send operator events"}
        return dict(fn(kind, detail))

    # e-stop ------------------------------------------------------------------------------
    def _estop_available(self) -> bool:
        fn = getattr(self.link, "estop_available", None)
        if fn is None:  # a link without the e-stop methods
            return False
        try:
            return bool(fn())
        except Exception:
            log.debug("estop_available failed", exc_info=True)
            return False

    def _set_estop(self, **change: Any) -> None:
        new = {**self.estop, **change}
        if new != self.estop:
            self.estop = new
            self.broadcast({"type": "estop", "estop": self.estop})

    def refresh(self, every_s: float = 1.0) -> None:
        now = time.monotonic()
        if now - self._estop_checked_at >= every_s:
            self._estop_checked_at = now
            self._set_estop(available=self._estop_available())

    def on_operator(self, ev: OperatorEvent) -> None:
        if ev.kind == "estop":
            reason = str(dict(ev.detail).get("reason", "") or "e-stop pressed")
            self._set_estop(latched=True, reason=reason, t=finite(float(ev.stamp)),
                            available=True)
        elif ev.kind == "estop_reset":
            self._set_estop(latched=False, reason="", t=finite(float(ev.stamp)),
                            available=True)

    def estop_reason(self, token: object, note: str = "") -> str:
        """The reason sent with a viewer's e-stop: it names the viewer its token shows (and
        whether it held the control lock), then the viewer's own words if any."""
        reason = f"operator e-stop from the panel ({self.who(token)})"
        note = " ".join(note.split())[:200]
        return f"{reason}: {note}" if note else reason

    def estop_command(self, reason: str) -> Reply:
        """Latch the e-stop (blocking: run it off the loop)."""
        fn = getattr(self.link, "estop", None)
        return estop_unavailable() if fn is None else dict(fn(reason))

    def estop_reset_command(self) -> Reply:
        """Release the e-stop (blocking: run it off the loop)."""
        fn = getattr(self.link, "estop_reset", None)
        return estop_unavailable(names.ESTOP_RESET) if fn is None else dict(fn())

    def estop_answered(self, r: Reply) -> None:
        """After an e-stop command (in the loop): an unavailable answer updates the button."""
        if r.get("unavailable"):
            self._set_estop(available=False)


__all__ = ["LOCKED", "RESUME_TEXT", "OperatorControls"]
