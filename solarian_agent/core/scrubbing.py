"""Key scrubbing, one rule for every place a secret must not leave: each secret, and its base64
form (as an HTTP Basic auth header or an echoed request body carries it), replaced by a mark.
The model layer scrubs its messages (provider and config errors) with ``***``; the episode log
everything it writes with ``[REDACTED]``.  Its own module so mutation testing (``make mutate``)
covers it without the rest of the plumbing."""

from __future__ import annotations

import base64
from collections.abc import Iterable

MIN_SECRET_CHARS = 4  # shorter values are no keys, and replacing them would garble the text


def scrub(text: str, secrets: Iterable[str], mark: str = "***") -> str:
    """``text`` with every secret (and its base64 form) replaced by ``mark``."""
    for s in secrets:
        if s and len(s) >= MIN_SECRET_CHARS:
            text = text.replace(s, mark)
            text = text.replace(base64.b64encode(s.encode()).decode(), mark)
    return text


__all__ = ["MIN_SECRET_CHARS", "scrub"]
