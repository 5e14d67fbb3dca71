"""The monitor's model call for one tick: the request (the questions still active, the reference
and history frames labelled by age, the readings), submitted to the worker so the tick never
waits on a model, polled from the tick, and logged as a ``monitor_tick`` event.  A call that
fails or runs past ``timeout_s`` answers nothing for its tick; it is never replaced by a
made-up answer.  An answer for an action that ended meanwhile is logged as discarded.
"""

from __future__ import annotations

import concurrent.futures as cf
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from .messages import JointState
from .model_api import ModelReply
from .monitor_frames import Shot, history_labels
from .monitor_rules import QuestionSpec
from .vision import MonitorImage, MonitorTickRequest, TickReply

if TYPE_CHECKING:
    from .monitor import MonitorEngine, WatchedAction

Readings = Callable[["JointState | None"], dict[str, dict[str, float]]]


@dataclass
class TickCall:
    tick: int
    future: cf.Future[TickReply]
    request: MonitorTickRequest
    elapsed_s: float
    sent_at: float
    wall0: float
    images: list[dict[str, Any]]
    readings: dict[str, Any]


class TickCalls:
    """Submits, polls and logs the monitor's model calls.  ``self.e``: the engine."""

    def __init__(self, engine: MonitorEngine) -> None:
        self.e = engine
        self.orphans: list[tuple[WatchedAction, TickCall]] = []

    def readings(self) -> dict[str, Any]:
        js = self.e.joints.latest()
        if self.e.readings_fn is not None:
            out = self.e.readings_fn(js if isinstance(js, JointState) else None)
        elif isinstance(js, JointState):
            out = {"joints": {n: round(p, 4) for n, p in zip(js.name, js.position,
                                                              strict=False)}}
        else:
            out = {}
        if self.e.state_fields:
            out = {m: {f: v for f, v in fields.items() if f in self.e.state_fields.get(m, [])}
                   for m, fields in out.items() if m in self.e.state_fields}
        return dict(out)

    def submit(self, act: WatchedAction, active: tuple[QuestionSpec, ...], elapsed: float,
               now: float) -> None:
        images: list[MonitorImage] = []
        records: list[dict[str, Any]] = []
        to_save: list[Shot] = []
        if self.e.config.reference:
            for r in self.e.framing.reference(act, now):
                images.append(r)
                records.append({"camera": r.camera, "label": "reference", "age_s": r.age_s,
                                "file": f"images/{r.file}", "close_up": r.close_up,
                                "size": [r.width, r.height], "reference": True,
                                "seq": r.seq, "mark": None})
        for cam in self.e.cameras:
            dq = act.history.get(cam)
            if not dq:
                continue
            labels = history_labels([e.shot.frame.stamp for e in dq], now)
            for e, label in zip(dq, labels, strict=True):
                age = now - e.shot.frame.stamp
                images.append(self.e.framing.monitor_image(e, label, age))
                records.append(self.e.framing.image_record(e.shot, e.mark, label, age))
                to_save.append(e.shot)
        req = MonitorTickRequest(act.action_id, act.tool, round(elapsed, 3),
                                 tuple(q.question for q in active), tuple(images),
                                 self.readings(), self.e.config.instructions,
                                 marked=any(i.mark is not None for i in images),
                                 reference=bool(self.e.config.reference and act.reference))
        backend = self.e.backend
        assert backend is not None
        timeout = self.e.config.timeout_s
        refs = [r for r in images if r.reference]
        log_fn = self.e.log_fn

        def run() -> TickReply:
            log = log_fn()
            if log is not None:
                for s in to_save:
                    if not log.has_image(s.file_name):
                        log.save_image(s.file_name, s.data)
                for r in refs:
                    if not log.has_image(r.file):
                        log.save_image(r.file, r.data)
            return backend.answer_tick(req, timeout_s=timeout)

        self.e.calls += 1
        fut = cast("cf.Future[TickReply]",
                   self.e.caller.submit(cast("Callable[[], ModelReply]", run)))
        act.call = TickCall(act.ticks, fut, req, elapsed, now, time.monotonic(), records,
                            dict(req.readings))
        self.poll()

    def poll(self) -> None:
        for act in list(self.e.actions.values()):
            call = act.call
            if call is not None and call.future.done():
                act.call = None
                self.handle(act, call, live=not act.concluded)
        for pair in list(self.orphans):
            act, call = pair
            if call.future.done():
                self.orphans.remove(pair)
                self.handle(act, call, live=False)

    def handle(self, act: WatchedAction, call: TickCall, live: bool) -> None:
        latency = time.monotonic() - call.wall0
        reply: TickReply | None = None
        error: dict[str, Any] | None = None
        try:
            reply = call.future.result()
        except Exception as e:
            kind = getattr(e, "kind", "error")
            error = {"kind": str(kind), "message": str(getattr(e, "message", e))[:500]}
            self.e.errors += 1
        verdicts: list[dict[str, Any]] = []
        answers = reply.answers if reply is not None else {}
        if reply is not None and live:
            verdicts = self.e.verdicts.judge(act, call, answers)
        self.e.log_event("monitor_tick", action_id=act.action_id, tool=act.tool, tick=call.tick,
                         elapsed_s=round(call.elapsed_s, 3),
                         questions=[q.name for q in call.request.questions],
                         images=call.images, readings=call.readings,
                         answers={k: a.as_dict() for k, a in answers.items()},
                         problems=list(reply.problems) if reply is not None else [],
                         latency_s=round(reply.latency_s if reply is not None and reply.latency_s
                                         else latency, 4),
                         usage=reply.usage.as_dict() if reply is not None else None,
                         model=(reply.model if reply is not None else "") or
                         getattr(self.e.backend, "model", ""),
                         error=error, verdicts=verdicts,
                         **({} if live else {"discarded": "the action ended or was concluded "
                                                      "before the answer arrived"}))
