"""A model's tool-call arguments read into a dict, and the strict-schema check OpenAI's strict
mode needs."""

from __future__ import annotations

import json
from typing import Any

from .plain_json import loads
from .sdk_errors import clip


def parse_tool_arguments(raw: Any) -> tuple[dict[str, Any], str]:
    """Tool-call arguments as a dict, or ``({}, error)`` when they are not a JSON object.

    The error names what was wrong so the harness can refuse the call with it; an empty
    argument string means "no arguments".
    """
    if isinstance(raw, dict):
        return dict(raw), ""
    if raw is None:
        return {}, ""
    if not isinstance(raw, str):
        return {}, f"arguments must be a JSON object, got {type(raw).__name__}"
    if not raw.strip():
        return {}, ""
    try:
        obj = loads(raw)
    except json.JSONDecodeError as e:
        return {}, (f"arguments are not valid JSON ({e.msg} at char {e.pos}): "
                    f"{clip(repr(raw), 200)}")
    if not isinstance(obj, dict):
        return {}, f"arguments must be a JSON object, got {type(obj).__name__}: {clip(raw, 200)}"
    return obj, ""


def is_strict_schema(schema: Any) -> bool:
    """True when a JSON Schema meets OpenAI's strict mode (closed objects, all keys required)."""
    if isinstance(schema, list):
        return all(is_strict_schema(s) for s in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        props = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            return False
        if set(schema.get("required", [])) != set(props):
            return False
    for key in ("properties", "$defs", "definitions"):
        sub = schema.get(key)
        if isinstance(sub, dict) and not all(is_strict_schema(v) for v in sub.values()):
            return False
    for key in ("items", "anyOf", "oneOf", "allOf"):
        if key in schema and not is_strict_schema(schema[key]):
            return False
    return True

