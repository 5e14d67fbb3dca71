"""Bounded retries with exponential backoff and jitter, shared by every HTTP model provider.

Only this layer retries: the SDK clients are built with ``max_retries=0``.  A call is retried
when its :class:`~solarian_agent.core.model_api.ModelError` is ``retryable`` (rate limited, a 5xx,
a timeout, a dropped connection), at most ``RetryPolicy.max_retries`` times, sleeping through
an injectable ``sleep`` so tests never really wait.  A server's ``retry-after`` /
``retry-after-ms`` hint replaces the computed delay; a hint longer than
``RetryPolicy.max_retry_after_s`` ends the call at once instead of stalling the caller.  The
error that finally escapes carries ``attempts`` (how many requests were sent).

One deadline bounds the whole call, retries and waits included: a wait (a computed backoff or
a server's hint) that would end past it ends the call at once.  A call made inside a
:func:`cancel_scope` stops when the scope's event is set: no attempt starts and no wait goes
on after that (the planner sets it when the run ends or the call's reply is discarded, the
model-call worker for every call at shutdown).

Perception calls (``purpose="vision"``) never retry: a call is one captured frame interpreted
once, and looking again is the planner's choice, counted against its acquisition budget, so the
provider gives them a policy with ``max_retries=0``.
"""

from __future__ import annotations

import email.utils
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from ..core.model_api import ModelError, current_cancel

T = TypeVar("T")
log = logging.getLogger(__name__)


class TransientModelError(ModelError):
    """A :class:`ModelError` carrying the server's ``retry-after`` hint, in seconds."""

    def __init__(self, kind: str, message: str, *, model: str = "", attempts: int = 1,
                 retry_after_s: float | None = None) -> None:
        super().__init__(kind, message, model=model, attempts=attempts)
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait between attempts.

    Delay before retry ``i`` (0-based) without a server hint:
    ``min(max_delay_s, base_delay_s * 2**i)`` scaled by a random factor in
    ``[1 - jitter, 1]``.
    """

    max_retries: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 20.0
    max_retry_after_s: float = 60.0
    jitter: float = 0.5

    def delay(self, retry_index: int, retry_after_s: float | None,
              rng: random.Random) -> float | None:
        """Seconds to wait before the next attempt, or None to give up now."""
        if retry_after_s is not None:
            if retry_after_s > self.max_retry_after_s:
                return None
            return max(0.0, retry_after_s)
        d = min(self.max_delay_s, self.base_delay_s * (2.0 ** min(retry_index, 30)))
        return d * (1.0 - self.jitter * rng.random())


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from ``retry-after-ms``, ``retry-after`` (seconds or an HTTP date), else None."""
    if not headers:
        return None
    lower = {str(k).lower(): str(v) for k, v in headers.items()}
    ms = lower.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    ra = lower.get("retry-after")
    if ra is None:
        return None
    try:
        return max(0.0, float(ra))
    except ValueError:
        pass
    parsed = email.utils.parsedate_tz(ra)
    if parsed is None:
        return None
    return max(0.0, float(email.utils.mktime_tz(parsed)) - time.time())


def cancelled_error(label: str, model: str, attempts: int) -> ModelError:
    return ModelError("cancelled", f"{label} was cancelled (its run ended or its reply is no "
                      "longer wanted); no further attempt was made", model=model,
                      attempts=attempts)


def call_with_retries(
    attempt: Callable[[int], T],
    *,
    policy: RetryPolicy,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    model: str = "",
    label: str = "model call",
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """Run ``attempt(n)`` (n = 1, 2, ...) until it returns, retrying retryable ModelErrors.

    Anything other than a :class:`ModelError` propagates unchanged (a provider maps SDK
    exceptions before they get here).  The final error is a fresh ``ModelError`` of the same
    kind with ``attempts`` set.  With ``deadline`` (on ``clock``), no wait runs past it: the
    call gives up instead.  Inside a :func:`cancel_scope`, a set event ends the call before
    the next attempt, and the default ``sleep`` wakes as soon as it is set.
    """
    rng = rng or random.Random()
    cancel = current_cancel()
    wait: Callable[[float], object] = sleep
    if cancel is not None and sleep is time.sleep:
        wait = cancel.wait  # an interruptible wait: a cancel never waits out a retry-after
    n = 0
    while True:
        if cancel is not None and cancel.is_set():
            raise cancelled_error(label, model, n)
        n += 1
        try:
            return attempt(n)
        except ModelError as e:
            err = e
        retry_after = err.retry_after_s if isinstance(err, TransientModelError) else None
        if not err.retryable or n > policy.max_retries:
            raise _final(err, n, model)
        delay = policy.delay(n - 1, retry_after, rng)
        if delay is None:
            raise ModelError(
                err.kind,
                f"{err.message} (the server asked to wait {retry_after:.0f} s, longer than the "
                f"{policy.max_retry_after_s:.0f} s this provider waits)",
                model=err.model or model, attempts=n)
        left = None if deadline is None else deadline - clock()
        if left is not None and delay >= left:
            raise ModelError(
                err.kind,
                f"{err.message} (gave up after {n} attempt{'s' if n > 1 else ''}: the next "
                f"would start in {delay:.1f} s, past the call's deadline, "
                f"{max(0.0, left):.1f} s away)",
                model=err.model or model, attempts=n)
        log.warning("%s failed (%s), attempt %d of %d; retrying in %.2f s",
                    label, err.kind, n, policy.max_retries + 1, delay)
        wait(delay)


def _final(err: ModelError, attempts: int, model: str) -> ModelError:
    message = err.message
    if attempts > 1:
        message = f"{message} (gave up after {attempts} attempts)"
    return ModelError(err.kind, message, model=err.model or model, attempts=attempts)
