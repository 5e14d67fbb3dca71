"""Plain JSON-like data as it comes back from a model service: parsed without losing a reply to
an over-long integer, made safe to send again, read by key path, and converted from an SDK's
model objects."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from ..core.model_api import ModelError


def json_int(digits: str) -> int | float:
    """An integer literal from a reply's JSON.  Past Python's limit on digits (4,300),
    ``int()`` refuses to convert it and the whole reply would be lost: it becomes a float
    instead (an infinity), which the tool-argument checks refuse by name."""
    try:
        return int(digits)
    except ValueError:
        return float(digits)


def loads(text: str | bytes) -> Any:
    """``json.loads`` for a model service's replies (see :func:`json_int`)."""
    return json.loads(text, parse_int=json_int)


def json_safe(value: Any, depth: int = 0) -> Any:
    """``value`` with every float that is not finite replaced by its name as a string: a
    model's own NaN or Infinity argument, resent as part of its earlier call, must not make
    the next request impossible to encode (JSON has no such numbers)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if depth > 100:
        return value
    if isinstance(value, dict):
        return {k: json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v, depth + 1) for v in value]
    return value


def dig(d: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, Mapping):
            return None
        d = d.get(k)
    return d


def to_plain(obj: Any) -> Any:
    """An SDK model object as plain JSON-like data (dicts pass through)."""
    if isinstance(obj, (dict, list, str, int, float, bool)) or obj is None:
        return obj
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        # warnings off: a reply that does not match the SDK's types is judged by _parse
        return to_dict(warnings=False)
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(warnings=False)
    raise ModelError("malformed", f"unexpected reply object {type(obj).__name__}")

