"""A skill's parameters as the model sees them, and their validation (JSON Schema, the
validators cached per schema): the executor checks every goal with it, the planner every call
before it sends one, and every plan step's args.

A reason names the argument that is wrong and quotes the value as a short prefix and its
length (never a megabyte echoed back); NaN, infinities and integers too large for a float,
which JSON Schema's ``number`` lets through (and which end a skill that computes with them),
are refused by name first."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from typing import Any

import jsonschema

from .skill import ToolSpec
from .text import one_line, quote_prefix

MAX_MESSAGE_CHARS = 300


def tool_schema(spec: ToolSpec) -> dict[str, Any]:
    """The schema the model sees: the skill's params, plus ``observation_id`` when it takes
    image points, plus the optional ``watch_for`` conditions."""
    schema = dict(spec.parameters)
    props = dict(schema.get("properties", {}))
    required = list(schema.get("required", []))
    if spec.image_points:
        props["observation_id"] = {
            "type": "string",
            "description": "The id of the image the points were read from (e.g. obs-12).",
        }
        if "observation_id" not in required:
            required.append("observation_id")
    props["watch_for"] = {
        "type": "array", "items": {"type": "string", "minLength": 3, "maxLength": 300},
        "maxItems": 3,
        "description": "Optional conditions the monitor checks from 6 s into the action; each "
                       "must be false while the action goes as it should.",
    }
    schema["properties"] = props
    schema["required"] = required
    schema.setdefault("type", "object")
    return schema


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str) -> Any:
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)  # once per schema, not per call
    return cls(schema)


def _path(parts: Any) -> str:
    return "/".join(one_line(p, 60, quotes=False) for p in parts) or "(arguments)"


def is_bad_number(value: Any) -> bool:
    """True for a NaN or infinity, or an integer that no float can hold (``float()`` of it
    raises): numbers no skill can compute with.  Booleans and non-numbers are not numbers."""
    if isinstance(value, bool):
        return False
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, int):
        try:
            float(value)
        except OverflowError:
            return True
    return False


def describe_bad_number(value: Any) -> str:
    """A short description of a value :func:`is_bad_number` refused (a 400-digit integer is
    not echoed back whole)."""
    if isinstance(value, int) and not isinstance(value, bool):
        # from the bit length: str() of a long integer is slow, and refused past 4,300 digits
        digits = int(abs(value).bit_length() * math.log10(2)) + 1
        return (f"an integer of about {digits} digits is out of range (a number must be "
                "finite and at most about 1.8e308)")
    return f"{value!r} is not a finite number"


def non_finite(value: Any, path: tuple[Any, ...] = (), depth: int = 0
               ) -> tuple[tuple[Any, ...], Any] | None:
    """The path and value of the first NaN, infinity or out-of-range integer inside
    ``value`` (see :func:`is_bad_number`), or None."""
    if is_bad_number(value):
        return path, value
    if depth > 30:
        return None
    items: Any = (value.items() if isinstance(value, Mapping)
                  else enumerate(value) if isinstance(value, (list, tuple)) else ())
    for k, v in items:
        found = non_finite(v, (*path, k), depth + 1)
        if found is not None:
            return found
    return None


def _message(err: Any) -> str:
    """jsonschema's message, or (when it would echo a long value) one that quotes it."""
    msg = str(err.message)
    if len(msg) <= MAX_MESSAGE_CHARS:
        return one_line(msg, MAX_MESSAGE_CHARS, quotes=False)
    inst = err.instance
    if err.validator == "additionalProperties" and isinstance(inst, Mapping):
        known = set((err.schema or {}).get("properties", {}))
        extra = [k for k in inst if k not in known]
        more = f" and {len(extra) - 3} more" if len(extra) > 3 else ""
        return ("additional properties are not allowed: "
                + ", ".join(quote_prefix(k, 40) for k in extra[:3]) + more)
    rule = one_line(json.dumps(err.validator_value, default=str), 100, quotes=False)
    return f"{quote_prefix(inst)} does not satisfy {err.validator} {rule}"


def schema_error(schema: Mapping[str, Any], args: Mapping[str, Any], name: str) -> str:
    """'' if ``args`` satisfy ``schema``, else a reason naming the tool and the bad field."""
    try:
        validator = _validator(json.dumps(schema, sort_keys=True))
    except jsonschema.SchemaError as e:  # a skill bug, reported, not raised
        return f"tool {name} has an invalid parameter schema: {e.message}"
    bad = non_finite(dict(args))
    if bad is not None:
        return (f"invalid arguments for {name} at {_path(bad[0])}: "
                f"{describe_bad_number(bad[1])}")
    err = jsonschema.exceptions.best_match(validator.iter_errors(dict(args)))
    if err is None:
        return ""
    return f"invalid arguments for {name} at {_path(err.absolute_path)}: {_message(err)}"


def validate_params(spec: ToolSpec, params: Mapping[str, Any], *, model_facing: bool = False
                    ) -> str:
    """'' if params satisfy the skill's schema, else a reason naming the bad field."""
    return schema_error(tool_schema(spec) if model_facing else spec.parameters, params,
                        spec.name)


def validate_step_args(spec: ToolSpec, args: Mapping[str, Any]) -> str:
    """A plan step's ``args`` for ``spec``: '' or a reason.  A tool that takes image points
    is pointed when the step runs (the planner reads a fresh image), so its points and
    ``observation_id`` may be left out here; whatever is given is checked."""
    schema = tool_schema(spec)
    if spec.image_points:
        later = {*spec.image_points, "observation_id"}
        schema = {**schema, "required": [r for r in schema.get("required", [])
                                         if r not in later]}
    return schema_error(schema, args, spec.name)


__all__ = ["describe_bad_number", "is_bad_number", "non_finite", "schema_error", "tool_schema",
           "validate_params", "validate_step_args"]
