"""Where model calls run: off the control path.  The planner and the monitor submit each model
call (and anything that waits on a model) to a :class:`ModelCaller` and only poll the future
from their tick, so the control path never waits on a model.

A call's future is a :class:`CallFuture`: ``cancel()`` also stops a call already running at
its next step (no further attempt, no wait for a retry; see
:func:`.model_api.cancel_scope`).  ``shutdown`` cancels every call and never waits for
one: the workers are daemon threads, so a request still in flight cannot hold the process
past its end."""

from __future__ import annotations

import concurrent.futures as cf
import itertools
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from .model_api import cancel_scope

R = TypeVar("R")


class CallFuture(cf.Future[R]):
    """A model call's future; :meth:`cancel` asks a running call to stop as well."""

    def __init__(self) -> None:
        super().__init__()
        self.cancel_event = threading.Event()

    def cancel(self) -> bool:
        self.cancel_event.set()  # a running call stops before its next attempt or wait
        return super().cancel()  # a call not yet started never starts


class ModelCaller:
    """Runs model calls (and anything that waits on a model) off the control path.
    ``submit`` never blocks."""

    def submit(self, fn: Callable[[], R]) -> cf.Future[R]:
        raise NotImplementedError

    def shutdown(self) -> None:
        pass


class ThreadCaller(ModelCaller):
    """Up to ``workers`` daemon threads, started as calls arrive."""

    def __init__(self, workers: int = 4) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self._max = workers
        self._queue: queue.SimpleQueue[tuple[CallFuture[Any], Callable[[], Any]] | None] = (
            queue.SimpleQueue())
        self._threads: list[threading.Thread] = []
        self._live: set[CallFuture[Any]] = set()
        self._idle = 0
        self._lock = threading.Lock()
        self._closed = False
        self._names = itertools.count(1)

    def submit(self, fn: Callable[[], R]) -> cf.Future[R]:
        fut: CallFuture[R] = CallFuture()
        with self._lock:
            if self._closed:
                fut.set_exception(RuntimeError("the model caller is shut down"))
                return fut
            self._live.add(fut)
            self._queue.put((fut, fn))
            if self._idle == 0 and len(self._threads) < self._max:
                t = threading.Thread(target=self._work, name=f"model-{next(self._names)}",
                                     daemon=True)
                self._threads.append(t)
                t.start()
            else:
                self._idle = max(0, self._idle - 1)
        return fut

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fut, fn = item
            try:
                if fut.set_running_or_notify_cancel():
                    with cancel_scope(fut.cancel_event):
                        try:
                            result = fn()
                        except BaseException as e:  # handed to the poller, never lost here
                            fut.set_exception(e)
                        else:
                            fut.set_result(result)
            finally:
                with self._lock:
                    self._live.discard(fut)
                    self._idle += 1

    def shutdown(self) -> None:
        """Cancel every call, queued or running, and return at once."""
        with self._lock:
            self._closed = True
            live = list(self._live)
            for _ in self._threads:
                self._queue.put(None)
        for fut in live:
            fut.cancel()


class InlineCaller(ModelCaller):
    """Completes the call at once (offline providers, deterministic tests); the result is still
    only handled at the next ``tick``, exactly as a threaded call's would be."""

    def submit(self, fn: Callable[[], R]) -> cf.Future[R]:
        fut: cf.Future[R] = cf.Future()
        try:
            fut.set_result(fn())
        except BaseException as e:  # handed over to tick(), which turns it into an error
            fut.set_exception(e)
        return fut


__all__ = ["CallFuture", "InlineCaller", "ModelCaller", "ThreadCaller"]
