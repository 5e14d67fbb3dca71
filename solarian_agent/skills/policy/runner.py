"""Inference off the control loop, and action chunks executed on it.

A :class:`Worker` runs the backend: :class:`ThreadWorker` on its own thread (one call in
flight, bounded, joined on close) for real time; :class:`InlineWorker` at the submit for
simulated time, where the control loop itself is the clock (as the monitor and the planner run
offline backends inline there).  The control loop only ever submits and polls.

:class:`ChunkRunner` decides, on each control tick, what the arm is told (times from the
injected clock):

* the first chunk is asked for at start; until it arrives nothing is commanded;
* a chunk becomes *active* when it arrives (or when its predecessor's horizon ends); action
  ``k`` of the active chunk is due from ``start + k * period_s`` and is sent once, when due;
* the next chunk is asked for when the active chunk's last horizon action falls due (the
  observation is then one period old when the new chunk takes over);
* at ``start + execution_horizon * period_s`` a chunk that arrived takes over at once;
* a *late* next chunk: ``hold`` holds the arm where it is (once) until it arrives;
  ``finish_chunk`` keeps executing the active chunk's remaining actions at their times, then
  holds.  Either way the chunk takes over the tick it arrives.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from .backends import PolicyBackend
from .config import ChunkSpec

Feeds = dict[str, np.ndarray]


@dataclass
class Inference:
    """One finished call: the outputs (or the error), with what it was asked with."""

    outputs: dict[str, np.ndarray] | None
    error: str
    observed: dict[str, float]
    asked_at: float  # the clock's time at the submit
    seconds: float  # its run time on the worker (perf counter)


class Worker(Protocol):
    @property
    def busy(self) -> bool: ...

    def submit(self, feeds: Feeds, observed: dict[str, float], now: float) -> bool: ...

    def poll(self) -> Inference | None: ...

    def close(self) -> None: ...


def _call(backend: PolicyBackend, feeds: Feeds, observed: dict[str, float], now: float
          ) -> Inference:
    t0 = time.perf_counter()
    try:
        out = backend.run(feeds)
        err = ""
    except Exception as e:  # a backend error fails the skill with the reason
        out, err = None, f"{type(e).__name__}: {e}"
    return Inference(out, err, observed, now, time.perf_counter() - t0)


class InlineWorker:
    def __init__(self, backend: PolicyBackend) -> None:
        self.backend = backend
        self._done: Inference | None = None

    @property
    def busy(self) -> bool:
        return False

    def submit(self, feeds: Feeds, observed: dict[str, float], now: float) -> bool:
        self._done = _call(self.backend, feeds, observed, now)
        return True

    def poll(self) -> Inference | None:
        done, self._done = self._done, None
        return done

    def close(self) -> None:
        self._done = None


class ThreadWorker:
    """One inference thread per running skill; ``close`` joins it within ``join_s``."""

    def __init__(self, backend: PolicyBackend, join_s: float = 2.0) -> None:
        self.backend = backend
        self.join_s = join_s
        self._cv = threading.Condition()
        self._job: tuple[Feeds, dict[str, float], float] | None = None
        self._done: Inference | None = None
        self._running = False
        self._stop = False
        self._thread = threading.Thread(target=self._loop, name="policy-inference", daemon=True)
        self._thread.start()

    @property
    def busy(self) -> bool:
        with self._cv:
            return self._job is not None or self._running

    def submit(self, feeds: Feeds, observed: dict[str, float], now: float) -> bool:
        with self._cv:
            if self._stop or self._job is not None or self._running:
                return False
            self._job = (feeds, observed, now)
            self._cv.notify()
            return True

    def poll(self) -> Inference | None:
        with self._cv:
            done, self._done = self._done, None
            return done

    def wait_idle(self, timeout_s: float) -> bool:
        """Block until no call is in flight (tests and benchmarks; never the control loop)."""
        with self._cv:
            return self._cv.wait_for(lambda: self._job is None and not self._running,
                                     timeout_s)

    def _loop(self) -> None:
        while True:
            with self._cv:
                while self._job is None and not self._stop:
                    self._cv.wait()
                if self._stop:
                    return
                job, self._job = self._job, None
                self._running = True
            assert job is not None
            res = _call(self.backend, *job)
            with self._cv:
                self._running = False
                if not self._stop:
                    self._done = res
                self._cv.notify_all()

    def close(self) -> None:
        with self._cv:
            self._stop = True
            self._job = None
            self._cv.notify_all()
        self._thread.join(self.join_s)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()


@dataclass
class Chunk:
    targets: list[dict[str, float]]
    start: float
    asked_at: float


@dataclass
class Decision:
    """What the arm is told this tick: ``send`` targets, ``hold`` where it is, or nothing."""

    kind: str  # "" | "send" | "hold"
    targets: dict[str, float] = field(default_factory=dict)
    index: int = -1


NOTHING = Decision("")


class ChunkRunner:
    def __init__(self, spec: ChunkSpec, worker: Worker,
                 observe: Callable[[], tuple[Feeds, dict[str, float]]],
                 decode: Callable[[Inference], list[dict[str, float]]]) -> None:
        self.spec = spec
        self.worker = worker
        self.observe = observe
        self.decode = decode
        self.active: Chunk | None = None
        self.ready: tuple[list[dict[str, float]], float] | None = None
        self.asked = False  # a request is out (submitted, not yet polled back)
        self.sent_index = -1
        self.holding = False
        self._late_marked = False
        self.error = ""
        # counts
        self.chunks = 0
        self.late = 0  # horizons that ended without the next chunk
        self.holds = 0
        self.sent = 0
        self.seconds: list[float] = []

    def _ask(self, now: float) -> None:
        if self.asked or self.worker.busy:
            return
        feeds, observed = self.observe()
        if self.worker.submit(feeds, observed, now):
            self.asked = True

    def _collect(self) -> None:
        res = self.worker.poll()
        if res is None:
            return
        self.asked = False
        self.seconds.append(res.seconds)
        if res.error:
            self.error = f"policy inference failed: {res.error}"
            return
        self.ready = (self.decode(res), res.asked_at)

    def _activate(self, now: float) -> None:
        assert self.ready is not None
        targets, asked_at = self.ready
        self.ready = None
        self.active = Chunk(targets, now, asked_at)
        self.sent_index = -1
        self.holding = False
        self._late_marked = False
        self.chunks += 1

    def _hold(self) -> Decision:
        if self.holding:
            return NOTHING
        self.holding = True
        self.holds += 1
        return Decision("hold")

    def start(self, now: float) -> None:
        self._ask(now)

    def tick(self, now: float) -> Decision:
        self._collect()
        if self.error:
            return NOTHING
        sp = self.spec
        if self.active is None:
            if self.ready is None:
                self._ask(now)
                return NOTHING
            self._activate(now)
        assert self.active is not None
        k = int(np.floor((now - self.active.start) / sp.period_s + 1e-9))
        if k >= sp.execution_horizon:
            if self.ready is not None:
                self._activate(now)
                k = 0
            else:
                if not self._late_marked:
                    self._late_marked = True
                    self.late += 1
                self._ask(now)  # (already asked at horizon - 1 unless the worker was busy)
                if sp.late_chunk == "hold" or k >= len(self.active.targets):
                    return self._hold()
        if k >= sp.execution_horizon - 1 and self.ready is None:
            self._ask(now)
        if k == self.sent_index or k >= len(self.active.targets):
            return NOTHING
        self.sent_index = k
        self.sent += 1
        self.holding = False
        return Decision("send", dict(self.active.targets[k]), k)

    def stats(self) -> dict[str, Any]:
        s = self.seconds
        return {"chunks": self.chunks, "late_chunks": self.late, "holds": self.holds,
                "actions_sent": self.sent,
                "inference_ms_mean": round(1000 * float(np.mean(s)), 3) if s else None,
                "inference_ms_max": round(1000 * float(np.max(s)), 3) if s else None}


def make_worker(backend: PolicyBackend, inference: str) -> Worker:
    if inference == "inline":
        return InlineWorker(backend)
    if inference == "thread":
        return ThreadWorker(backend)
    raise ValueError(f"inference must be thread or inline, got {inference!r}")


def chunk_outputs(outputs: Mapping[str, np.ndarray], name: str) -> np.ndarray:
    if name not in outputs:
        raise KeyError(f"the policy returned no output {name!r}")
    return outputs[name]
