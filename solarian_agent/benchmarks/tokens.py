"""Token counts of the cost benchmarks (:mod:`.cost`, :mod:`.cost_cache`) and ``bench agent``'s
estimates (:mod:`.agent_meter`): the providers' published image formulas and about
:data:`CHARS_PER_TOKEN` characters a text token (an estimate: the tokenizers differ); and the
pick-and-place both cost benchmarks run (:func:`pick_and_place`)."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from ..core.model_api import ModelReply, ModelRequest, TextPart

if TYPE_CHECKING:
    from ..core.config import AgentConfig

CHARS_PER_TOKEN = 4.0
TASK = "put the red cup on the tray"  # the cost suites' pick-and-place


def pick_and_place(config: AgentConfig, seed: int, planner: Any
                   ) -> tuple[str, bool, list[tuple[int, int]]]:
    """:data:`TASK` through the product (the simulated system a user runs) with ``planner``:
    the planner's final status, whether the red cup is on the tray in the simulator's truth,
    and each configured camera's capture size (width, height), which the baselines' frames
    are sized by."""
    from ..system import build_sim_system

    system = build_sim_system(config=config, seed=seed, planner=planner)
    try:
        system.planner.message(TASK)
        system.run_until(lambda: system.planner.status not in ("idle", "running", "paused"),
                         300.0)
        status = str(getattr(system.planner.status, "value", system.planner.status))
        truth = system.world.truth()
        sizes = []
        for cam in config.cameras:
            frame = system.cameras.frame(cam)
            if frame is not None:
                sizes.append((int(frame.data.shape[1]), int(frame.data.shape[0])))
    finally:
        system.shutdown()
    done = status == "succeeded" and truth["objects"]["red_cup"]["location"] == "tray"
    return status, done, sizes


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
