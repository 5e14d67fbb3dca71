"""Key scrubbing: every message that leaves the model layer (provider errors, config errors)
has each secret, and its base64 form (as an HTTP Basic auth header or an echoed request body
carries it), replaced by ``***``.  Its own module so mutation testing (``make mutate``) covers
it without the rest of the provider plumbing."""

from __future__ import annotations

import base64
from collections.abc import Iterable

MIN_SECRET_CHARS = 4  # shorter values are no keys, and replacing them would garble the text


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret (and its base64 form) replaced by ``***``."""
    for s in secrets:
        if s and len(s) >= MIN_SECRET_CHARS:
            text = text.replace(s, "***")
            text = text.replace(base64.b64encode(s.encode()).decode(), "***")
    return text


__all__ = ["MIN_SECRET_CHARS", "scrub"]
