"""The panel's plumbing: JSON for the page, the control lock, an open page's bounded queue,
the bounded intake from bus threads, and the JPEG preview of a frame."""

from __future__ import annotations

import asyncio
import collections
import json
import math
import threading
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any

import numpy as np

from ..core.messages import Image
from ..core.text import clean


def _jsonable(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return f"<array {o.shape}>"
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    if isinstance(o, bytes):
        return f"<{len(o)} bytes>"
    if is_dataclass(o) and not isinstance(o, type):
        return asdict(o)
    return repr(o)


def dumps(obj: Any) -> str:
    """JSON for the page; a lone surrogate (a model's ``"\ud83d"``) becomes U+FFFD, so a
    stream never fails to encode."""
    return clean(json.dumps(obj, default=_jsonable, ensure_ascii=False, allow_nan=False))


def finite(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def json_safe(obj: Any, depth: int = 0) -> Any:
    """Make a message JSON-safe (NaN -> None, numpy -> python, tuples -> lists, lone
    surrogates -> U+FFFD)."""
    if isinstance(obj, str):
        return clean(obj)
    if depth > 20:
        return clean(repr(obj))
    if isinstance(obj, dict):
        return {clean(str(k)): json_safe(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v, depth + 1) for v in obj]
    if isinstance(obj, np.generic):
        return finite(obj.item())
    return finite(obj)


# ----------------------------------------------------------------------------------------
# control lock and clients
# ----------------------------------------------------------------------------------------
class ControlLock:
    """Which client holds control.  Only touched from the server's event loop."""

    def __init__(self) -> None:
        self.holder: str | None = None

    def acquire(self, client: str, connected: Iterable[str]) -> bool:
        if self.holder is not None and self.holder not in set(connected):
            self.holder = None  # its page is gone
        if self.holder in (None, client):
            self.holder = client
            return True
        return False

    def release(self, client: str) -> bool:
        if self.holder == client:
            self.holder = None
            return True
        return False

    def held_by(self, client: str | None) -> bool:
        return client is not None and self.holder == client


@dataclass
class Client:
    """An open page: ``id`` is public (shown to every viewer), ``token`` its secret."""

    id: str
    token: str = field(repr=False)
    queue: collections.deque[str] = field(default_factory=collections.deque)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    dropped: int = 0
    resync: bool = False
    sent: int = 0

    def push(self, payload: str) -> None:
        if len(self.queue) == self.queue.maxlen:
            self.dropped += 1
            self.resync = True
        self.queue.append(payload)
        self.wake.set()


@dataclass
class Intake:
    """Messages from bus threads to the pump: bounded, drop-oldest, counted."""

    maxlen: int = 2000
    items: collections.deque[tuple[str, Any]] = field(default_factory=collections.deque)
    dropped: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    notify: Callable[[], None] | None = None

    def put(self, kind: str, msg: Any) -> None:
        with self.lock:
            if len(self.items) >= self.maxlen:
                self.items.popleft()
                self.dropped += 1
            self.items.append((kind, msg))
            notify = self.notify
        if notify is not None:
            notify()

    def drain(self) -> list[tuple[str, Any]]:
        with self.lock:
            out = list(self.items)
            self.items.clear()
            return out


def encode_jpeg(img: Image, max_side: int = 640, quality: int = 80) -> bytes:
    from ..perception.images import jpeg_preview

    enc = jpeg_preview(np.asarray(img.data), img.encoding, max_side, quality)
    if enc is None:
        h, w = np.asarray(img.data).shape[:2]
        raise ValueError(f"could not encode a {img.encoding} frame of {w}x{h} as JPEG")
    return enc[0]
