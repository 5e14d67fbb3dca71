"""A skill's parameters as the model sees them, and their validation (JSON Schema, the
validators cached per schema): the executor checks every goal with it, the planner every call
before it sends one."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

import jsonschema

from .skill import ToolSpec


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


def schema_error(schema: Mapping[str, Any], args: Mapping[str, Any], name: str) -> str:
    """'' if ``args`` satisfy ``schema``, else a reason naming the tool and the bad field."""
    try:
        validator = _validator(json.dumps(schema, sort_keys=True))
    except jsonschema.SchemaError as e:  # a skill bug, reported, not raised
        return f"tool {name} has an invalid parameter schema: {e.message}"
    err = jsonschema.exceptions.best_match(validator.iter_errors(dict(args)))
    if err is None:
        return ""
    where = "/".join(str(p) for p in err.absolute_path) or "(arguments)"
    return f"invalid arguments for {name} at {where}: {err.message}"


def validate_params(spec: ToolSpec, params: Mapping[str, Any], *, model_facing: bool = False
                    ) -> str:
    """'' if params satisfy the skill's schema, else a reason naming the bad field."""
    return schema_error(tool_schema(spec) if model_facing else spec.parameters, params,
                        spec.name)


__all__ = ["schema_error", "tool_schema", "validate_params"]
