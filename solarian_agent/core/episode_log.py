"""Episode logs: what the operator and the agent did during each recorded episode, kept beside
the recording so a run can be replayed and its monitor questions measured afterwards.

``<root>/<session>/episodes/<episode>/logs/`` holds

* ``events.jsonl``: one JSON object per line with ``t`` (wall-clock UTC, ISO 8601) and ``kind``
  (and ``by`` where it applies); when a simulator runs, ``sim_t`` is the simulated time in
  seconds since the simulator started, the clock the frames' stamps are on;
* ``images/``: the images events and turns name;
* ``turns/NNNN.json``: every planner call's input and output, numbered from 0001 per episode;
* ``overlays/<module>.<field>.jsonl``: what the trackers marked on each camera frame.

A run never writes into another run's episode: every run opens its own episode directory
(:meth:`Recorder.episode_for_run`), the next free number in its session, and a session is named
by the local date and time plus what ran (:func:`session_name`), so runs in one folder never
share a directory.  Each episode log starts with ``episode_started`` (the task, and the run
clock's reading at that instant, which maps the frames' stamps onto ``t`` and ``sim_t``) and ends
with ``episode_ended``.  ``t`` comes from one wall clock per recorder, shared by every writer.

Every event is written as one line with a single ``write`` and flushed, so a process killed
mid-run leaves ``events.jsonl`` parseable up to the last event.  Turn files and images are written
to a temporary name and renamed, so they are either whole or absent.

Text never makes a write fail: a lone surrogate (a model's ``"\ud83d"``) is written as
U+FFFD.  Every file is strict JSON, which has no NaN or infinity: a float that is not finite
(a model's ``NaN`` argument, a skill's measurement) is written as the string ``"NaN"``,
``"Infinity"`` or ``"-Infinity"``.

Secrets never reach a log: :func:`scrub` replaces any registered secret (the API keys a run's
providers read) wherever it appears, as a last line of defence behind the providers' own care.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from .clock import Clock, FakeClock, SystemClock
from .event_record import TypedEvent
from .event_types import EpisodeEnded, EpisodeStarted
from .scrubbing import scrub as scrub_secrets
from .text import clean

_SECRETS: set[str] = set()
_SECRETS_LOCK = threading.Lock()


def register_secret(value: str | None) -> None:
    """Make sure ``value`` never appears in anything the episode log writes."""
    if value and len(value) >= 8:
        with _SECRETS_LOCK:
            _SECRETS.add(value)


def scrub(text: str) -> str:
    """``text`` with every registered secret, and its base64 form, replaced by [REDACTED]."""
    with _SECRETS_LOCK:
        secrets = list(_SECRETS)
    return scrub_secrets(text, secrets, "[REDACTED]")


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    if isinstance(o, Path):
        return str(o)
    if isinstance(o, bytes):
        return f"<{len(o)} bytes>"
    return repr(o)


MAX_DEPTH = 200  # deeper than this, a value is written as its repr (no reader needs more)


def _strict(o: Any, depth: int = 0) -> Any:
    """``o`` with every float that is not finite replaced by its name as a string, so the
    JSON written holds no bare ``NaN`` / ``Infinity`` (which strict parsers refuse)."""
    if isinstance(o, float):
        if math.isfinite(o):
            return o
        return "NaN" if math.isnan(o) else ("Infinity" if o > 0 else "-Infinity")
    if isinstance(o, (str, int)) or o is None:
        return o
    if depth > MAX_DEPTH:
        return repr(o)
    if isinstance(o, dict):
        return {k: _strict(v, depth + 1) for k, v in o.items()}
    if isinstance(o, (list, tuple, set, frozenset)):
        return [_strict(v, depth + 1) for v in o]
    if isinstance(o, (np.ndarray, np.generic)):
        return _strict(_json_default(o), depth + 1)
    return o


def dumps(obj: Any) -> str:
    return clean(scrub(json.dumps(_strict(obj), default=_json_default, ensure_ascii=False,
                                  allow_nan=False)))


def slug(text: str, n: int = 24) -> str:
    s = re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")
    return s[:n] or "run"


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


class EpisodeLog:
    """One episode's log directory.  Thread-safe: planner, monitor and control all append.

    ``clock`` is the run's clock (deadlines, frame stamps); ``wall`` stamps ``t`` (default: the
    run's clock).  With ``sim_zero`` set the run's clock is a simulator's, and every event also
    carries ``sim_t``: ``clock.now() - sim_zero`` seconds.
    """

    def __init__(self, directory: Path, clock: Clock, run_id: str = "", *,
                 wall: Clock | None = None, sim_zero: float | None = None) -> None:
        self.dir = directory
        self.clock = clock
        self.wall = wall or clock
        self.sim_zero = sim_zero
        self.run_id = run_id
        self.images_dir = directory / "images"
        self.turns_dir = directory / "turns"
        self.overlays_dir = directory / "overlays"
        for d in (self.images_dir, self.turns_dir, self.overlays_dir):
            d.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._events = open(directory / "events.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        self._overlay_files: dict[str, Any] = {}
        self._turn = 0
        self._image_names: set[str] = set()
        self.closed = False
        self.has_run = False  # a run has started (or continued) in this episode

    # events --------------------------------------------------------------------------------
    def stamp(self) -> dict[str, Any]:
        """``t`` (and ``sim_t``) for an event written now."""
        rec: dict[str, Any] = {"t": self.wall.wall()}
        if self.sim_zero is not None:
            rec["sim_t"] = round(self.clock.now() - self.sim_zero, 4)
        return rec

    def event(self, kind: str, by: str | None = None, **data: Any) -> dict[str, Any]:
        rec = self.stamp()
        rec["kind"] = kind
        if by is not None:
            rec["by"] = by
        rec.update(data)
        line = dumps(rec) + "\n"
        with self._lock:
            if self.closed:
                return rec
            self._events.write(line)
            self._events.flush()
        return rec

    def write(self, ev: TypedEvent) -> dict[str, Any]:
        """Write a typed event (its ``by``, when it has one, beside ``t`` and ``kind``)."""
        data = ev.to_record()
        return self.event(ev.kind, by=data.pop("by", None), **data)

    def started(self, task: str = "", **context: Any) -> dict[str, Any]:
        """``episode_started``: the task, and the run clock's reading (``clock.now``) with its
        Unix time (``clock.epoch``) at this event, which put every stamp on the run's clock
        (frames, overlays, joint states) onto ``t`` and ``sim_t``."""
        return self.write(EpisodeStarted(
            episode=self.run_id, task=task,
            clock={"now": round(self.clock.now(), 6), "epoch": round(self.clock.epoch(), 6),
                   "simulated": self.sim_zero is not None}, extra=context))

    # turns ---------------------------------------------------------------------------------
    def next_turn_name(self) -> str:
        with self._lock:
            self._turn += 1
            return f"turns/{self._turn:04d}.json"

    def write_turn(self, name: str, payload: dict[str, Any]) -> None:
        _atomic_write(self.dir / name, (dumps(payload) + "\n").encode("utf-8"))

    # images --------------------------------------------------------------------------------
    def save_image(self, name: str, data: bytes) -> str:
        """Write an encoded image once under ``images/``; returns its path relative to the log."""
        rel = f"images/{name}"
        with self._lock:
            if name in self._image_names:
                return rel
            self._image_names.add(name)
        _atomic_write(self.dir / rel, data)
        return rel

    def has_image(self, name: str) -> bool:
        with self._lock:
            return name in self._image_names

    # overlays ------------------------------------------------------------------------------
    def overlay(self, module: str, field_name: str, record: dict[str, Any]) -> None:
        key = f"{module}.{field_name}"
        line = dumps(record) + "\n"
        with self._lock:
            if self.closed:
                return
            f = self._overlay_files.get(key)
            if f is None:
                f = open(self.overlays_dir / f"{key}.jsonl", "a", encoding="utf-8")  # noqa: SIM115
                self._overlay_files[key] = f
            f.write(line)
            f.flush()

    def close(self) -> None:
        """Write ``episode_ended`` and close the files (again: nothing)."""
        if self.closed:
            return
        try:
            self.write(EpisodeEnded(episode=self.run_id))
        except (OSError, ValueError):  # a full disk or a closed file: the log stays parseable
            pass
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._events.close()
            for f in self._overlay_files.values():
                f.close()


def session_name(what: str, when: _dt.datetime | None = None) -> str:
    """A session directory name: the local date and time, then what ran
    (``2026-11-03_14-22-05_demo_put_the_red_cup``)."""
    when = when or _dt.datetime.now()
    return f"{when:%Y-%m-%d_%H-%M-%S}_{slug(what, 40)}"


class Recorder:
    """Sessions and episodes: ``<root>/<session>/episodes/<episode>/logs``.

    A run id is ``<session>/<episode>`` of the episode it started in.  Episodes are numbered
    from the highest already in the session directory, each created exclusively, so two
    processes logging into one session never share an episode.

    ``wall`` stamps every episode's ``t`` (default: real time, even when the run's clock is a
    simulator's); ``simulated`` adds ``sim_t``, seconds on the run's clock since ``sim_zero``
    (default: when the recorder was made), to every event.  ``context``, if set, adds its
    fields to each ``episode_started`` (what the skills' monitor questions were, say).
    """

    def __init__(self, root: Path, clock: Clock, session: str, *, wall: Clock | None = None,
                 simulated: bool | None = None, sim_zero: float | None = None,
                 context: Callable[[], dict[str, Any]] | None = None) -> None:
        self.root = Path(root)
        self.clock = clock
        self.session = session
        self.wall: Clock = wall or SystemClock()
        if simulated is None:
            simulated = isinstance(clock, FakeClock)
        self.sim_zero = (clock.now() if sim_zero is None else sim_zero) if simulated else None
        self.context = context
        self.episode_index = 0
        self.current: EpisodeLog | None = None
        self._lock = threading.Lock()

    def _claim_episode(self) -> tuple[str, Path]:
        episodes = self.root / self.session / "episodes"
        episodes.mkdir(parents=True, exist_ok=True)
        taken = [int(d.name) for d in episodes.iterdir() if d.name.isdigit()]
        n = max([self.episode_index, *taken], default=0)
        while True:
            n += 1
            ep = f"{n:06d}"
            try:
                (episodes / ep).mkdir()
            except FileExistsError:  # another process took it meanwhile
                continue
            self.episode_index = n
            return ep, episodes / ep / "logs"

    def open_episode(self, task: str = "") -> EpisodeLog:
        """Close the current episode and open the next one."""
        with self._lock:
            if self.current is not None:
                self.current.close()
            ep, d = self._claim_episode()
            log = EpisodeLog(d, self.clock, run_id=f"{self.session}/{ep}", wall=self.wall,
                             sim_zero=self.sim_zero)
            self.current = log
        context: dict[str, Any] = {}
        if self.context is not None:
            try:
                context = dict(self.context())
            except Exception as e:  # what the context adds is a courtesy, never a failure
                context = {"context_error": f"{type(e).__name__}: {e}"}
        log.started(task, **context)
        return log

    def episode_for_run(self, task: str = "") -> EpisodeLog:
        """The episode a new run logs in: the current one when no run has started in it yet
        (one opened ahead of the run, for its bag), else a new one."""
        cur = self.current
        if cur is None or cur.closed or cur.has_run:
            cur = self.open_episode(task)
        cur.has_run = True
        return cur

    def close(self) -> None:
        if self.current is not None:
            self.current.close()


def read_events(path: Path) -> list[dict[str, Any]]:
    """Read ``events.jsonl``; a torn last line (a kill mid-write) is ignored, nothing else is."""
    out: list[dict[str, Any]] = []
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                break
            raise
    return out


def iter_turns(log_dir: Path) -> Iterable[Path]:
    return sorted((Path(log_dir) / "turns").glob("[0-9][0-9][0-9][0-9].json"))
