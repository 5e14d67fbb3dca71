"""Where model calls run: off the control path.  The planner and the monitor submit each model
call (and anything that waits on a model) to a :class:`ModelCaller` and only poll the future
from their tick, so the control path never waits on a model."""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable
from typing import TypeVar

R = TypeVar("R")


class ModelCaller:
    """Runs model calls (and anything that waits on a model) off the control path.
    ``submit`` never blocks."""

    def submit(self, fn: Callable[[], R]) -> cf.Future[R]:
        raise NotImplementedError

    def shutdown(self) -> None:
        pass


class ThreadCaller(ModelCaller):
    def __init__(self, workers: int = 4) -> None:
        self._pool = cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="model")

    def submit(self, fn: Callable[[], R]) -> cf.Future[R]:
        return self._pool.submit(fn)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


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


__all__ = ["InlineCaller", "ModelCaller", "ThreadCaller"]
