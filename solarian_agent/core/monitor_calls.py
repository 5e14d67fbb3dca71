"""The monitor's model calls: one in flight per action at most, submitted to the worker so the
tick never waits on a model, polled from the tick, given up after ``timeout_s`` (plus a second
of grace).  A call that fails or runs past its deadline answers nothing for its tick; it is
never replaced by a made-up answer.  The call of an action that ended meanwhile is still
awaited, so its answer is logged (as discarded).
"""

from __future__ import annotations

import concurrent.futures as cf
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

from . import event_types as et
from .event_record import ABSENT
from .model_api import ModelReply
from .model_caller import ModelCaller
from .monitor_log import MonitorLog
from .monitor_watch import WatchedAction
from .vision import MonitorTickRequest, TickReply, VisionBackend

# a call is given up this long after its own timeout: the backend's timeout is the model's,
# the grace covers the worker picking it up and the answer reaching the tick
DEADLINE_GRACE_S = 1.0


@dataclass(frozen=True)
class TickCall:
    """One tick's call in flight: the tick it asks for, the request and what the log records
    of it (the images sent, the readings)."""

    tick: int
    future: cf.Future[TickReply]
    request: MonitorTickRequest
    elapsed_s: float
    sent_at: float
    wall0: float
    images: list[dict[str, Any]]
    readings: dict[str, Any]


@dataclass(frozen=True)
class CallDone:
    """A call that came back: its answer or its error.  ``orphan``: its action had ended."""

    act: WatchedAction
    call: TickCall
    reply: TickReply | None
    error: dict[str, Any] | None
    latency_s: float
    model: str
    orphan: bool

    def record(self, verdicts: list[dict[str, Any]], live: bool) -> dict[str, Any]:
        """The ``monitor_tick`` event's data (:meth:`event`'s record)."""
        return self.event(verdicts, live).to_record()

    def event(self, verdicts: list[dict[str, Any]], live: bool) -> et.MonitorTick:
        """The ``monitor_tick`` event: the call, its answers and the verdicts they produced;
        an answer that was not judged (``live`` False) is marked discarded."""
        reply, call = self.reply, self.call
        answers = reply.answers if reply is not None else {}
        return et.MonitorTick(
            action_id=self.act.action_id, tool=self.act.tool, tick=call.tick,
            elapsed_s=round(call.elapsed_s, 3),
            questions=[q.name for q in call.request.questions],
            images=call.images, readings=call.readings,
            answers={k: a.as_dict() for k, a in answers.items()},
            problems=list(reply.problems) if reply is not None else [],
            latency_s=round(reply.latency_s if reply is not None and reply.latency_s
                            else self.latency_s, 4),
            usage=reply.usage.as_dict() if reply is not None else None,
            model=(reply.model if reply is not None else "") or self.model,
            error=self.error, verdicts=verdicts,
            discarded=ABSENT if live else ("the action ended or was concluded before the "
                                           "answer arrived"))


class TickCalls:
    """The calls in flight, per action, and those of ended actions still awaited; counts the
    calls made and the ticks skipped while one was in flight."""

    def __init__(self, backend: VisionBackend | None, caller: ModelCaller, timeout_s: float,
                 log: MonitorLog) -> None:
        self._backend = backend
        self._caller = caller
        self._timeout_s = timeout_s
        self._log = log
        self._in_flight: dict[str, tuple[WatchedAction, TickCall]] = {}
        self._orphans: list[tuple[WatchedAction, TickCall]] = []
        self.calls = 0
        self.skipped = 0

    def in_flight(self, action_id: str) -> TickCall | None:
        entry = self._in_flight.get(action_id)
        return entry[1] if entry is not None else None

    @property
    def orphans(self) -> int:
        return len(self._orphans)

    def busy(self, act: WatchedAction, tick: int, now: float) -> bool:
        """Whether the action's tick waits for its previous call (the tick is then skipped
        and logged).  A call past its deadline is given up instead: it answers nothing for
        its tick, and this tick goes on."""
        entry = self._in_flight.get(act.action_id)
        if entry is None:
            return False
        call = entry[1]
        if now - call.sent_at > self._timeout_s + DEADLINE_GRACE_S:
            self.orphan(act.action_id)
            self._log.error(et.MonitorTick(action_id=act.action_id, tool=act.tool,
                            tick=call.tick, questions=[q.name for q in call.request.questions],
                            images=call.images, answers={}, verdicts=[],
                            error={"kind": "timeout", "message": f"no answer within "
                                   f"{self._timeout_s:g} s; the tick answers nothing"},
                            elapsed_s=round(call.elapsed_s, 3)))
            return False
        self.skipped += 1
        self._log.event(et.MonitorSkip(action_id=act.action_id, tool=act.tool, tick=tick,
                        reason="the previous call is still in flight"))
        return True

    def orphan(self, action_id: str) -> None:
        """The action ended (or its call was given up): its call is awaited only to be
        logged."""
        entry = self._in_flight.pop(action_id, None)
        if entry is not None:
            self._orphans.append(entry)

    def drop(self, action_id: str) -> None:
        """Forget the action's call without awaiting it (the action started again)."""
        self._in_flight.pop(action_id, None)

    def submit(self, act: WatchedAction, tick: int, request: MonitorTickRequest,
               records: list[dict[str, Any]], files: Sequence[tuple[str, bytes]],
               elapsed_s: float, now: float) -> None:
        """Send the request on the worker; the images are saved there first, off the tick."""
        backend, timeout, log = self._backend, self._timeout_s, self._log
        assert backend is not None, "no vision backend: the monitor asks no questions"

        def run() -> TickReply:
            log.save_images(files)
            return backend.answer_tick(request, timeout_s=timeout)

        self.calls += 1
        fut = cast("cf.Future[TickReply]",
                   self._caller.submit(cast("Callable[[], ModelReply]", run)))
        self._in_flight[act.action_id] = (act, TickCall(
            tick, fut, request, elapsed_s, now, time.monotonic(), records,
            dict(request.readings)))

    def poll(self, order: Iterable[str]) -> Iterator[CallDone]:
        """The calls that came back, the watched actions' in ``order`` first, then the ended
        actions'.  Lazy: each is checked just before it is yielded."""
        for action_id in list(order):
            entry = self._in_flight.get(action_id)
            if entry is not None and entry[1].future.done():
                del self._in_flight[action_id]
                yield self._done(*entry, orphan=False)
        for entry in list(self._orphans):
            if entry[1].future.done():
                self._orphans.remove(entry)
                yield self._done(*entry, orphan=True)

    def _done(self, act: WatchedAction, call: TickCall, *, orphan: bool) -> CallDone:
        latency = time.monotonic() - call.wall0
        reply: TickReply | None = None
        error: dict[str, Any] | None = None
        try:
            reply = call.future.result()
        except Exception as e:
            kind = getattr(e, "kind", "error")
            error = {"kind": str(kind), "message": str(getattr(e, "message", e))[:500]}
            self._log.count_error()
        return CallDone(act, call, reply, error, latency, getattr(self._backend, "model", ""),
                        orphan)

    def shutdown(self) -> None:
        self._caller.shutdown()
