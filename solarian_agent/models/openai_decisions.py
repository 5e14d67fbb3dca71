"""OpenAI's Decisions API (``POST /v1/decisions``, public beta) through the official SDK.

The monitor's typed answers without free text: each question is a *predicate* (a probability
that a statement holds), a *choice* (one of fixed values, with a probability per value) or a
*score* (ordered levels).  The installed ``openai`` SDK offers it as
``client.decisions.create(model=..., input=..., questions=...)``.

This provider keeps the :class:`ModelProvider` interface: the request's ``response_schema``
(an object schema, the same one the other providers are asked to fill as JSON) is turned into
questions, one per property, named after it.  Two answer shapes are understood:

* the monitor's (:func:`solarian_agent.perception.vision.answer_schema`): each property an
  object with ``probability`` (and ``reason``), plus a ``value`` enum for a choice.  A predicate
  answers ``{"probability": P(true), "reason": ""}``, a choice ``{"value": v, "probability":
  P(v), "reason": ""}`` — the Decisions API gives probabilities but no reasons;
* scalar properties: ``{"type": "boolean"}`` → a predicate answered ``probability >= 0.5``;
  ``{"enum": [...]}`` (strings or booleans) or ``{"oneOf": [{"const": v, "description": d},
  ...]}`` → a choice answered with its value; ``{"type": "integer", "x-levels": [label |
  {"label", "description"}, ...]}`` → a score answered with the nearest level's index.

A property's ``description`` is the question's instructions (else its name, pointing the model
at the question text in the input); per-value descriptions of a choice come from ``oneOf`` or
``"x-choice-descriptions": {value: description}``.  A schema may instead carry
``"x-decision-questions": [...]``, questions in the API's own shape (each with a ``name``),
sent as they are and answered in the object shape.

A required property that maps to no question (free text, say) is refused with
``ModelError("bad_request")`` naming it; an optional one is left out.  The reply's ``text`` is
the JSON object ``{name: answer}``; :class:`DecisionReply` adds every answer's probabilities and
confidence.  A question the model declines is left out of the text (the API answers the others);
when it declines them all → ``ModelError("refusal")``.  Requests with tools are refused
(``bad_request``): the Decisions API calls none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..core.model_api import Message, ModelError, ModelReply, ModelRequest
from .common import OpenAIProvider
from .plain_json import dig, to_plain
from .usage import openai_usage

BREAKPOINT: dict[str, str] = {"mode": "explicit"}


@dataclass(frozen=True)
class DecisionAnswer:
    name: str
    type: str  # predicate | choice | score | refusal
    value: Any = None
    probability: float | None = None  # predicate: P(true)
    confidence: float | None = None  # choice / score
    probabilities: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class DecisionReply(ModelReply):
    """A :class:`ModelReply` whose ``text`` is ``{name: answer}`` JSON, plus the detail."""

    answers: tuple[DecisionAnswer, ...] = ()

    def answer(self, name: str) -> DecisionAnswer | None:
        return next((a for a in self.answers if a.name == name), None)


class OpenAIDecisionsProvider(OpenAIProvider):
    """``provider: openai_decisions`` — typed monitor answers from ``/v1/decisions``."""

    name = "openai_decisions"

    # ------------------------------------------------------------------ request
    def _build(self, request: ModelRequest) -> dict[str, Any]:
        if request.response_schema is None:
            raise ModelError("bad_request", "openai_decisions answers typed questions only: "
                             "the request has no response_schema", model=self.model)
        if request.tools:
            raise ModelError("bad_request", "openai_decisions calls no tools; the request "
                             f"offers {len(request.tools)}", model=self.model)
        questions = schema_to_questions(request.response_schema)
        items: list[dict[str, Any]] = []
        if request.system:
            items.append({"role": "system", "content": [
                {"type": "input_text", "text": request.system,
                 "prompt_cache_breakpoint": dict(BREAKPOINT)}]})
        items.extend(self._input(request.messages))
        if not items:
            raise ModelError("bad_request", "the request has no messages", model=self.model)
        return {"model": self.model, "input": items, "questions": questions}

    def _input(self, messages: tuple[Message, ...]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for m in messages:
            if m.role == "assistant":
                if m.text().strip():
                    items.append({"role": "assistant", "content": m.text()})
                for c in m.tool_calls:
                    items.append({"type": "function_call", "call_id": c.id, "name": c.name,
                                  "arguments": json.dumps(c.arguments)})
            elif m.role == "tool":
                parts = self._parts(m.content)
                text = m.text()
                if m.is_error:
                    text = f"ERROR: {text}" if text else "ERROR"
                    parts = [{"type": "input_text", "text": text}] + [
                        p for p in parts if p["type"] == "input_image"]
                items.append({"type": "function_call_output", "call_id": m.tool_call_id,
                              "output": parts if any(p["type"] == "input_image" for p in parts)
                              else text})
            else:
                items.append({"role": "user", "content": self._parts(m.content) or "(empty)"})
        return items

    # ------------------------------------------------------------------ transport
    def _send(self, params: dict[str, Any], timeout_s: float, deadline: float) -> Any:
        return to_plain(self._client.decisions.create(**params, timeout=timeout_s))

    # ------------------------------------------------------------------ reply
    def _parse(self, raw: Any, request: ModelRequest) -> DecisionReply:
        answers = raw.get("answers") if isinstance(raw, dict) else None
        if not isinstance(answers, list):
            raise ModelError("malformed", "reply has no answers list", model=self.model)
        if not answers:
            raise ModelError("empty", "reply has no answers", model=self.model)
        schema = request.response_schema or {}
        questions = schema_to_questions(schema)
        if len(answers) != len(questions):
            raise ModelError("malformed", f"{len(answers)} answers for {len(questions)} "
                             "questions", model=self.model)
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        out: dict[str, Any] = {}
        detail: list[DecisionAnswer] = []
        for q, a in zip(questions, answers, strict=True):
            if not isinstance(a, dict):
                raise ModelError("malformed", f"answer to {q['name']!r} is not an object",
                                 model=self.model)
            ans = _read_answer(q, a)
            detail.append(ans)
            if ans.type != "refusal":
                out[q["name"]] = _shaped(ans, props.get(q["name"]) if props else None)
        if not out:
            names = ", ".join(q["name"] for q in questions)
            raise ModelError("refusal", f"the model declined to answer {names}",
                             model=self.model)
        u = raw.get("usage")  # dig: a usage that is no object counts nothing, the reply kept
        usage = openai_usage(dig(u, "input_tokens"), dig(u, "output_tokens"),
                             dig(u, "input_tokens_details", "cached_tokens"),
                             dig(u, "input_tokens_details", "cache_write_tokens"))
        return DecisionReply(text=json.dumps(out), usage=usage,
                             model=str(raw.get("model") or self.model), stop_reason="answered",
                             answers=tuple(detail))


def _shaped(ans: DecisionAnswer, prop: Any) -> Any:
    """The answer in the shape its schema property asks for (see the module docstring)."""
    sub = prop.get("properties") if isinstance(prop, dict) else None
    if not isinstance(sub, dict) and isinstance(prop, dict):
        return ans.value
    keys = set(sub) if isinstance(sub, dict) else {"value", "probability", "reason"}
    obj: dict[str, Any] = {}
    if ans.type == "predicate":
        obj["probability"] = ans.probability
    else:
        obj["value"] = ans.value
        p = ans.probabilities.get(str(ans.value), ans.confidence)
        obj["probability"] = p
        if "confidence" in keys:
            obj["confidence"] = ans.confidence
    if "reason" in keys:
        obj["reason"] = ""
    return obj


def _read_answer(q: dict[str, Any], a: dict[str, Any]) -> DecisionAnswer:
    name, t = q["name"], a.get("type")
    if t == "refusal":
        return DecisionAnswer(name, "refusal")
    if t != q["type"]:
        raise ModelError("malformed", f"answer to {name!r} is a {t}, the question a {q['type']}")
    if t == "predicate":
        p = float(a["probability"])
        return DecisionAnswer(name, t, p >= 0.5, probability=p)
    probs = {str(x.get("value") if t == "choice" else x.get("label")): float(x["probability"])
             for x in a.get("probabilities") or [] if isinstance(x, dict)}
    if t == "choice":
        return DecisionAnswer(name, t, a["choice"], confidence=_float(a.get("confidence")),
                              probabilities=probs)
    levels = list(q.get("levels") or [])
    score = float(a["score"])
    value = int(min(max(round(score), 0), max(len(levels) - 1, 0)))
    return DecisionAnswer(name, t, value, confidence=_float(a.get("confidence")),
                          probabilities=probs)


def _float(v: Any) -> float | None:
    return None if v is None else float(v)


def schema_to_questions(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Decisions API questions for a typed-answer schema (see the module docstring)."""
    verbatim = schema.get("x-decision-questions")
    if verbatim is not None:
        if not isinstance(verbatim, list) or not verbatim or not all(
                isinstance(q, dict) and q.get("name") and q.get("type") for q in verbatim):
            raise ModelError("bad_request", "x-decision-questions must be a non-empty list of "
                             "questions, each with a name and a type")
        return [dict(q) for q in verbatim]
    props = schema.get("properties")
    if not isinstance(props, dict) or not props:
        raise ModelError("bad_request", "response_schema must be an object schema with "
                         "properties for openai_decisions")
    required = set(schema.get("required", []))
    questions: list[dict[str, Any]] = []
    for name, prop in props.items():
        q = _question(name, prop if isinstance(prop, dict) else {})
        if q is None:
            if name in required:
                raise ModelError("bad_request", (
                    f"response_schema property {name!r} is neither a boolean, an enum nor an "
                    "integer with x-levels, so openai_decisions cannot ask it (make it optional "
                    "or use openai_responses)"))
            continue
        questions.append(q)
    if not questions:
        raise ModelError("bad_request", "response_schema has no property openai_decisions "
                         "can ask")
    return questions


def _question(name: str, prop: dict[str, Any]) -> dict[str, Any] | None:
    instructions = str(prop.get("description") or
                       f"Answer the question named {name!r} in the input.")
    sub = prop.get("properties")
    if isinstance(sub, dict) and "probability" in sub:  # the monitor's object shape
        value = sub.get("value")
        if value is None:
            return {"type": "predicate", "name": name, "instructions": instructions}
        if not isinstance(value, dict):
            return None
        q = _question(name, {**value, "description": prop.get("description")
                             or value.get("description")})
        return q if q is not None and q["type"] == "choice" else None
    if "enum" in prop or "oneOf" in prop or "anyOf" in prop:
        descs = prop.get("x-choice-descriptions") or {}
        choices: list[dict[str, Any]] = []
        if "enum" in prop:
            for v in prop["enum"]:
                if not isinstance(v, (str, bool)):
                    return None
                c: dict[str, Any] = {"value": v}
                if str(v) in descs:
                    c["description"] = str(descs[str(v)])
                choices.append(c)
        else:
            for opt in prop.get("oneOf") or prop.get("anyOf") or []:
                if not isinstance(opt, dict) or not isinstance(opt.get("const"), (str, bool)):
                    return None
                c = {"value": opt["const"]}
                if opt.get("description"):
                    c["description"] = str(opt["description"])
                choices.append(c)
        if len(choices) < 2:
            return None
        return {"type": "choice", "name": name, "instructions": instructions,
                "choices": choices}
    if prop.get("type") == "boolean":
        return {"type": "predicate", "name": name, "instructions": instructions}
    levels = prop.get("x-levels")
    if prop.get("type") == "integer" and isinstance(levels, list) and len(levels) >= 2:
        out = []
        for lv in levels:
            if isinstance(lv, dict) and lv.get("label"):
                out.append({k: str(v) for k, v in lv.items() if k in ("label", "description")})
            else:
                out.append({"label": str(lv)})
        return {"type": "score", "name": name, "instructions": instructions, "levels": out}
    return None
