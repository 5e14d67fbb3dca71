"""The monitor's log: every event it writes (to the episode log when there is one, always to
``recent`` and the ``on_event`` hook), the images saved beside them and the count of errors.

It is the one owner of the episode-log access, so the tick thread and the model worker save
images the same way; an image already in the log is not written twice.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable
from typing import Any

from .clock import Clock
from .episode_log import EpisodeLog, Recorder
from .event_record import TypedEvent

LogSource = Callable[[], "EpisodeLog | None"]
EventHook = Callable[[str, dict[str, Any]], None]

# the events kept in memory (``recent``): enough for a long episode's ticks, bounded so a
# monitor that runs for days does not grow
RECENT_EVENTS = 1000


def log_source(log: EpisodeLog | Recorder | LogSource | None) -> LogSource:
    """The episode log as a function: a recorder's current log, a fixed log, none, or the
    function given."""
    if isinstance(log, Recorder):
        rec = log
        return lambda: rec.current
    if isinstance(log, EpisodeLog):
        fixed = log
        return lambda: fixed
    if log is None:
        return lambda: None
    return log


class MonitorLog:
    """Writes the monitor's events and images and counts its errors."""

    def __init__(self, clock: Clock, source: LogSource, on_event: EventHook | None = None
                 ) -> None:
        self._clock = clock
        self._source = source
        self._on_event = on_event
        self.recent: collections.deque[dict[str, Any]] = collections.deque(maxlen=RECENT_EVENTS)
        self.errors = 0

    def event(self, ev: TypedEvent) -> None:
        """Log one event.  Never raises: a broken log or hook must not stop the monitor."""
        kind, data = ev.kind, ev.to_record()
        log = self._source()
        if log is not None:
            try:
                rec = log.write(ev)
            except Exception:
                rec = {"t": self._clock.wall(), "kind": kind, **data}
        else:
            rec = {"t": self._clock.wall(), "kind": kind, **data}
        self.recent.append(rec)
        if self._on_event is not None:
            try:
                self._on_event(kind, rec)
            except Exception:
                pass

    def count_error(self) -> None:
        self.errors += 1

    def error(self, ev: TypedEvent) -> None:
        """An event that reports an error: counted, then logged."""
        self.count_error()
        self.event(ev)

    def save_images(self, images: Iterable[tuple[str, bytes]]) -> None:
        """Save (file name, encoded bytes) into the episode log, each file once."""
        log = self._source()
        if log is None:
            return
        for name, data in images:
            if not log.has_image(name):
                log.save_image(name, data)
