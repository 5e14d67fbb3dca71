"""Golden request bodies: what each provider sends for one fixed turn, so a change shows in review.

The bodies are recorded by the fake server from the real SDKs and normalised: image payloads
become ``<base64 image/png 64x48>`` (their decoded size), and only headers that describe the
wire format are kept (no SDK version, OS or request ids).  Rewrite the files after an intended
change with::

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q test/models/test_model_golden.py
"""

from __future__ import annotations

import base64
import difflib
import json
import os
import re
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from model_helpers import IMG_A, IMG_B, MONITOR_SCHEMA, PATHS, history, turn

from solarian_agent.core.model_api import Message, ModelRequest
from solarian_agent.testing.fake_model_server import Decision, RecordedRequest, Reply

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
KEEP_HEADERS = ("content-type", "anthropic-version", "anthropic-beta", "authorization",
                "x-api-key")
DATA_URL = re.compile(r"^data:(image/[a-z]+);base64,(.+)$", re.S)


def _size(b64: str) -> str:
    img = cv2.imdecode(np.frombuffer(base64.b64decode(b64), np.uint8), cv2.IMREAD_COLOR)
    return f"{img.shape[1]}x{img.shape[0]}" if img is not None else "undecodable"


def normalise(node: Any) -> Any:
    if isinstance(node, dict):
        if node.get("type") == "base64" and "data" in node:
            return {**node, "data": f"<base64 {node.get('media_type')} "
                                    f"{_size(node['data'])}>"}
        return {k: normalise(v) for k, v in node.items()}
    if isinstance(node, list):
        return [normalise(v) for v in node]
    if isinstance(node, str):
        m = DATA_URL.match(node)
        if m:
            return f"data:{m.group(1)};base64,<{_size(m.group(2))}>"
    return node


def record(req: RecordedRequest) -> dict[str, Any]:
    return {"method": req.method, "path": req.path,
            "headers": {k: v for k, v in sorted(req.headers.items()) if k in KEEP_HEADERS},
            "body": normalise(req.body)}


def check(name: str, got: dict[str, Any]) -> None:
    path = GOLDEN / f"{name}.json"
    text = json.dumps(got, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(f"{path} is missing: run with UPDATE_GOLDEN=1 to record it")
    want = path.read_text(encoding="utf-8")
    if want != text:
        diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True),
                                            f"{path.name} (golden)", f"{path.name} (sent)"))
        pytest.fail(f"the {name} request changed; review and rerun with UPDATE_GOLDEN=1 if "
                    f"intended:\n{diff}")


@pytest.mark.parametrize("provider", ["anthropic", "openai", "openai_responses"])
def test_planner_request_body(make: Any, server: Any, provider: str) -> None:
    server.add(Reply("ok"))
    make(provider, max_tokens=2048).complete(turn(*history()), timeout_s=5)
    (req,) = server.requests
    assert req.path == PATHS[provider]
    check(f"{provider}_request", record(req))


@pytest.mark.parametrize("provider", ["openai_responses", "openai_decisions"])
def test_monitor_request_body(make: Any, server: Any, provider: str) -> None:
    server.add(Reply('{"phase": "held", "dropped": false}') if provider == "openai_responses"
               else Decision(values={"phase": "held", "dropped": False, "grip": 2}))
    schema = MONITOR_SCHEMA if provider == "openai_decisions" else {
        "type": "object", "properties": {k: MONITOR_SCHEMA["properties"][k]
                                         for k in ("phase", "dropped")},
        "required": ["phase", "dropped"], "additionalProperties": False}
    req = ModelRequest("You watch a robot arm pick objects.",
                       (Message.user("Action pick (4.5 s). previous | current", IMG_A, IMG_B),),
                       response_schema=schema, response_name="pick_progress",
                       purpose="monitor", max_tokens=256)
    make(provider, purpose="monitor", reasoning_effort=(
        "low" if provider == "openai_responses" else None)).complete(req, timeout_s=5)
    check(f"{provider}_monitor_request", record(server.requests[0]))
