"""One-line descriptions of agent events, shared by the chat, the panel and the episode viewer
(episode-log kinds and their data; a malformed record still gets a line).  The lines themselves
are :mod:`solarian_agent.core.event_text`'s, the one renderer every front end uses."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.event_text import compact, describe_record


def describe_event(kind: str, data: Mapping[str, Any]) -> str:
    """A short human line for an agent event (episode-log kinds and their data)."""
    return describe_record(kind, data)


__all__ = ["compact", "describe_event"]
