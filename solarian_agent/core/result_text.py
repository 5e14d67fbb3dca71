"""A skill's result as the planner reads it in a wake, trimmed to what the planner still
needs: every turn resends it, so a field the planner does not use is tokens spent on every
later turn.

The journal keeps every result whole (``ActionEnded.data``); the planner's text keeps what
it acts on.  Rules:

* bookkeeping keys are dropped: :data:`BOOKKEEPING` (the frame a check read and when: the
  planner compares no frames; it points in the images it is shown, which carry their age);
* a position in pixels of the camera's capture (a check's ``pixel``) and an area are dropped:
  the planner points in the images it is shown, which are sized differently
  (``image_max_side``), so a capture pixel would mislead it; where an object is, for the
  planner, is its ``location`` and the newest image;
* written as YAML's flow style (``{report: {red_cup: {location: tray}}, held: null}``): the
  same data as JSON, read by models as easily, without JSON's quotes, which the quoting of
  outside text (:func:`~solarian_agent.core.text.quote`) would escape, each one twice over.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

BOOKKEEPING = frozenset({"frame_seq", "observed_at", "area_px", "pixel"})


def _trim(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _trim(v) for k, v in value.items() if k not in BOOKKEEPING}
    if isinstance(value, (list, tuple)):
        return [_trim(v) for v in value]
    return value


def result_text(data: Mapping[str, Any]) -> str:
    """``data`` (a skill's result, its ``reason`` already taken out) as one line of YAML flow
    style with the planner's keys only (:func:`read_result` reads it back)."""
    import yaml

    plain = json.loads(json.dumps(_trim(data), default=str))  # what JSON would carry
    return str(yaml.safe_dump(plain, default_flow_style=True, sort_keys=False,
                              width=1_000_000, allow_unicode=True)).strip()


def read_result(text: str) -> dict[str, Any]:
    """A result as :func:`result_text` writes it (or as JSON) back as a mapping; {} if
    ``text`` is no mapping."""
    import yaml

    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return {}
    return dict(value) if isinstance(value, dict) else {}


__all__ = ["BOOKKEEPING", "read_result", "result_text"]
