"""Episode logs, laid out as seed 003 describes.

``<root>/<session>/episodes/<episode>/logs/`` holds

* ``events.jsonl``: one JSON object per line with ``t`` (ISO 8601 from the run's clock) and
  ``kind`` (and ``by`` where it applies);
* ``images/``: the images events and turns name;
* ``turns/NNNN.json``: every planner call's input and output, numbered from 0001 per episode;
* ``overlays/<module>.<field>.jsonl``: what the trackers marked on each camera frame.

Every event is written as one line with a single ``write`` and flushed, so a process killed
mid-run leaves ``events.jsonl`` parseable up to the last event.  Turn files and images are written
to a temporary name and renamed, so they are either whole or absent.

Secrets never reach a log: :func:`scrub` replaces any registered secret (the API keys a run's
providers read) wherever it appears, as a last line of defence behind the providers' own care.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from .clock import Clock

_SECRETS: set[str] = set()
_SECRETS_LOCK = threading.Lock()


def register_secret(value: str | None) -> None:
    """Make sure ``value`` never appears in anything the episode log writes."""
    if value and len(value) >= 8:
        with _SECRETS_LOCK:
            _SECRETS.add(value)


def scrub(text: str) -> str:
    with _SECRETS_LOCK:
        secrets = list(_SECRETS)
    for s in secrets:
        if s in text:
            text = text.replace(s, "[REDACTED]")
    return text


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


def dumps(obj: Any) -> str:
    return scrub(json.dumps(obj, default=_json_default, ensure_ascii=False))


def slug(text: str, n: int = 24) -> str:
    s = re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")
    return s[:n] or "run"


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


class EpisodeLog:
    """One episode's log directory.  Thread-safe: planner, monitor and control all append."""

    def __init__(self, directory: Path, clock: Clock, run_id: str = "") -> None:
        self.dir = directory
        self.clock = clock
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

    # events --------------------------------------------------------------------------------
    def event(self, kind: str, by: str | None = None, **data: Any) -> dict[str, Any]:
        rec: dict[str, Any] = {"t": self.clock.wall(), "kind": kind}
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
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._events.close()
            for f in self._overlay_files.values():
                f.close()


class Recorder:
    """Sessions and episodes: ``<root>/<session>/episodes/<episode>/logs``.

    A run id is ``<session>/<episode>`` of the episode it started in.
    """

    def __init__(self, root: Path, clock: Clock, session: str) -> None:
        self.root = Path(root)
        self.clock = clock
        self.session = session
        self.episode_index = 0
        self.current: EpisodeLog | None = None

    def open_episode(self) -> EpisodeLog:
        if self.current is not None:
            self.current.close()
        self.episode_index += 1
        ep = f"{self.episode_index:06d}"
        d = self.root / self.session / "episodes" / ep / "logs"
        self.current = EpisodeLog(d, self.clock, run_id=f"{self.session}/{ep}")
        return self.current

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
