"""Token counts of the cost benchmarks (:mod:`.cost`, :mod:`.cost_cache`) and ``bench agent``'s
estimates (:mod:`.agent_meter`): the providers' published image formulas and about
:data:`CHARS_PER_TOKEN` characters a text token (an estimate: the tokenizers differ)."""

from __future__ import annotations

import json
import math

from ..core.model_api import ModelReply, ModelRequest, TextPart

CHARS_PER_TOKEN = 4.0
TASK = "put the red cup on the tray"  # the cost suites' pick-and-place


# the providers' published image formulas ----------------------------------------------------
def anthropic_image_tokens(width: int, height: int) -> int:
    """Anthropic (docs "Vision", image costs): an image whose long edge exceeds 1568 px or
    that would cost more than about 1600 tokens (1092 x 1092 px at 1:1) is first scaled down
    to fit; it then costs width * height / 750 tokens."""
    w, h = float(width), float(height)
    s = min(1.0, 1568.0 / max(w, h), math.sqrt(1600.0 * 750.0 / (w * h)))
    return int(math.ceil((w * s) * (h * s) / 750.0))


def openai_image_tokens(width: int, height: int, detail: str = "high") -> int:
    """OpenAI GPT-4o / GPT-4.1 (docs "Images and vision", calculating costs): ``low`` detail
    costs 85 tokens; ``high`` scales the image to fit a 2048 px square, then so that its
    shortest side is 768 px (never up), and costs 85 + 170 per 512 px tile."""
    if detail == "low":
        return 85
    w, h = float(width), float(height)
    s = min(1.0, 2048.0 / max(w, h))
    w, h = w * s, h * s
    s = min(1.0, 768.0 / min(w, h))
    w, h = w * s, h * s
    return 85 + 170 * math.ceil(w / 512.0) * math.ceil(h / 512.0)


def text_tokens(chars: int) -> int:
    return int(math.ceil(chars / CHARS_PER_TOKEN))


def request_text_chars(req: ModelRequest) -> int:
    n = len(req.system)
    n += sum(len(t.name) + len(t.description) + len(json.dumps(t.parameters))
             for t in req.tools)
    for m in req.messages:
        n += sum(len(p.text) for p in m.content if isinstance(p, TextPart))
        n += sum(len(c.name) + len(json.dumps(c.arguments)) for c in m.tool_calls)
    return n


def reply_chars(reply: ModelReply) -> int:
    return len(reply.text) + sum(len(c.name) + len(json.dumps(c.arguments))
                                 for c in reply.tool_calls)


__all__ = ["CHARS_PER_TOKEN", "TASK", "anthropic_image_tokens", "openai_image_tokens",
           "reply_chars", "request_text_chars", "text_tokens"]
