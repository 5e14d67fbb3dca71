"""Metering a planner model for ``solarian-agent bench agent``: tokens as the
provider's usage fields report them, dollars from a dated price table, latency per call, the
model errors and bad tool calls a failure is explained by, and the per-episode budgets.

Tokens come from the reply's :class:`~solarian_agent.core.model_api.Usage`.  A server that
reports none (the offline ``rules`` planner, many local servers) is estimated instead, and the
episode is labelled ``estimated``: the text at about 4 characters a token and each image by the
provider's published formula (:mod:`.cost`), with the prefix the request shares with the one
before it counted as a cache read, the way a provider's prefix cache bills it.
"""

from __future__ import annotations

import enum
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from ..core.model_api import ImagePart, ModelError, ModelReply, ModelRequest, TextPart, Usage
from .tokens import anthropic_image_tokens, openai_image_tokens, reply_chars, text_tokens

# a provider caches a prefix only from this many tokens on (OpenAI's and Anthropic's minimum)
MIN_CACHED_PREFIX = 1024


class Failure(enum.Enum):
    """Why an episode did not succeed (its string form is what the table and JSON show)."""

    NONE = ""
    BAD_TOOL_CALL = "bad tool call"
    REFUSAL = "refusal"
    TIMEOUT = "timeout"
    HTTP_ERROR = "HTTP error"
    GAVE_UP = "gave up"
    BUDGET = "budget"
    NOT_CONFIRMED = "not confirmed"  # the planner claimed success; verify_state or truth denied


# the price table -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Price:
    """US dollars per million tokens."""

    input: float
    cached_input: float
    output: float
    cache_write: float

    def dollars(self, u: Usage) -> float:
        return (u.input_tokens * self.input + u.cache_read_tokens * self.cached_input
                + u.cache_write_tokens * self.cache_write + u.output_tokens * self.output) / 1e6


@dataclass(frozen=True)
class PriceTable:
    date: str
    models: Mapping[str, Price]
    source: str = ""

    def price(self, model: str) -> Price | None:
        return self.models.get(model)


def default_prices_path() -> Path:
    from ..paths import find_share_file

    path = find_share_file("config", "model_prices.yaml")
    if path is None:
        raise ConfigError("model_prices.yaml", "the price table is not installed; pass "
                                               "--prices PATH")
    return path


def load_prices(path: Path | None = None) -> PriceTable:
    """The price table at ``path`` (default ``config/model_prices.yaml``), validated: every
    model's input, cached_input and output are numbers >= 0; errors name the YAML path."""
    import yaml

    path = path or default_prices_path()
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(str(path), f"cannot read the price table: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("models"), dict):
        raise ConfigError(f"{path}: models", "a mapping of model name to prices is required")
    if not str(doc.get("date") or ""):
        raise ConfigError(f"{path}: date", "the date the prices were read is required")
    models: dict[str, Price] = {}
    for name, p in doc["models"].items():
        where = f"{path}: models.{name}"
        if not isinstance(p, dict):
            raise ConfigError(where, "needs input, cached_input and output")
        vals: dict[str, float] = {}
        for k in ("input", "cached_input", "output", "cache_write"):
            v = p.get(k, p.get("input") if k == "cache_write" else None)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                    or v < 0:
                raise ConfigError(f"{where}.{k}", f"a number of dollars >= 0, not {v!r}")
            vals[k] = float(v)
        unknown = set(p) - set(vals)
        if unknown:
            raise ConfigError(f"{where}.{sorted(unknown)[0]}", "unknown field")
        models[str(name)] = Price(**vals)
    return PriceTable(str(doc["date"]), models, str(doc.get("source") or ""))


# estimates -------------------------------------------------------------------------------------
def _part_chars(p: Any) -> int:
    return len(p.text) if isinstance(p, TextPart) else 0


def prefix_blocks(req: ModelRequest, provider: str) -> list[tuple[str, int]]:
    """The request as a list of (identity, tokens) blocks in the order it is sent: system and
    tools first, then each message part."""
    import json

    from ..models.openai_chat import image_detail

    def f(img: ImagePart) -> int:  # the detail the openai provider sends the image at
        if provider == "anthropic":
            return anthropic_image_tokens(img.width, img.height)
        return openai_image_tokens(img.width, img.height, image_detail(img, "high"))

    blocks = [("system:" + req.system, text_tokens(len(req.system)))]
    for t in req.tools:
        s = t.name + t.description + json.dumps(t.parameters, sort_keys=True)
        blocks.append(("tool:" + s, text_tokens(len(s))))
    for i, m in enumerate(req.messages):
        for p in m.content:
            if isinstance(p, ImagePart):
                blocks.append((f"img:{i}:{p.observation_id}:{p.width}x{p.height}", f(p)))
            else:
                blocks.append((f"txt:{i}:{m.role}:{p.text}", text_tokens(_part_chars(p))))
        for c in m.tool_calls:
            s = c.name + json.dumps(c.arguments, sort_keys=True)
            blocks.append((f"call:{i}:{s}", text_tokens(len(s))))
    return blocks


def estimate_usage(req: ModelRequest, reply: ModelReply, provider: str,
                   previous: ModelRequest | None) -> Usage:
    """Usage as a provider with a prefix cache would bill ``req``: the blocks it shares, from
    the start, with ``previous`` are a cache read (when they reach the providers' minimum of
    :data:`MIN_CACHED_PREFIX` tokens), the rest uncached input."""
    blocks = prefix_blocks(req, provider)
    total = sum(n for _, n in blocks)
    cached = 0
    if previous is not None:
        before = prefix_blocks(previous, provider)
        for (a, n), (b, _) in zip(blocks, before, strict=False):
            if a != b:
                break
            cached += n
    if cached < MIN_CACHED_PREFIX:
        cached = 0
    return Usage(input_tokens=total - cached, output_tokens=text_tokens(reply_chars(reply)),
                 cache_read_tokens=cached)


HOPELESS = frozenset({"bad_request", "auth", "config"})
HOPELESS_IN_ROW = 2


# the meter -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Budget:
    """Per-episode limits: a run stops at whichever comes first (0 = none)."""

    max_turns: int = 0
    max_seconds: float = 0.0
    max_usd: float = 0.0


@dataclass
class CallRecord:
    latency_s: float
    usage: Usage
    estimated: bool
    error: str = ""  # the ModelError kind, when the call failed
    message: str = ""  # and its message
    bad_calls: int = 0  # tool calls with unreadable arguments or unknown names in the reply


@dataclass
class MeteredProvider:
    """Wraps a planner provider: every call's usage (or its estimate), latency and error; the
    episode's dollars; :meth:`over_budget` once a budget is spent."""

    inner: Any
    provider: str  # anthropic | openai | rules: which image formula an estimate uses
    price: Price | None = None
    budget: Budget = field(default_factory=Budget)
    call_timeout_s: float = 0.0  # one call's limit (0: the harness's)
    clock: Callable[[], float] = time.perf_counter
    calls: list[CallRecord] = field(default_factory=list)
    started: float = 0.0
    stopped_by: str = ""
    # other meters whose dollars count against this one's max_usd (the monitor model's: an
    # episode's budget is what the episode spends, planner and monitor together)
    shares_budget_with: list[MeteredProvider] = field(default_factory=list)
    _previous: ModelRequest | None = None

    def __post_init__(self) -> None:
        self.name = self.inner.name
        self.model = self.inner.model
        self.max_image_side = self.inner.max_image_side
        self.started = self.clock()

    @property
    def reads_images(self) -> bool:
        """The inner provider's, asked each time: it may find out its server takes no images
        (the harness then has views described in text)."""
        return bool(self.inner.reads_images)

    def complete(self, request: ModelRequest, *, timeout_s: float) -> ModelReply:
        t0 = self.clock()
        if self.call_timeout_s > 0:
            timeout_s = min(timeout_s, self.call_timeout_s)
        if self.budget.max_seconds > 0:  # a call never runs past the episode's seconds
            left = self.budget.max_seconds - (t0 - self.started)
            timeout_s = max(0.5, min(timeout_s, left))
        try:
            reply: ModelReply = self.inner.complete(request, timeout_s=timeout_s)
        except ModelError as e:
            self.calls.append(CallRecord(self.clock() - t0, Usage(), False, error=e.kind,
                                         message=e.message))
            raise
        latency = self.clock() - t0
        u = reply.usage
        estimated = (u.input_tokens + u.cache_read_tokens + u.cache_write_tokens) == 0
        if estimated:
            u = estimate_usage(request, reply, self.provider, self._previous)
        self._previous = request
        known = {t.name for t in request.tools}
        bad = sum(1 for c in reply.tool_calls if c.parse_error or (known and c.name not in known))
        self.calls.append(CallRecord(latency, u, estimated, bad_calls=bad))
        return reply

    @property
    def usage(self) -> Usage:
        total = Usage()
        for c in self.calls:
            total = total + c.usage
        return total

    @property
    def dollars(self) -> float:
        return self.price.dollars(self.usage) if self.price is not None else 0.0

    @property
    def episode_dollars(self) -> float:
        """This meter's dollars and those of the meters sharing its budget."""
        return self.dollars + sum(m.dollars for m in self.shares_budget_with)

    def hopeless(self) -> bool:
        """True once :data:`HOPELESS_IN_ROW` calls in a row failed with an error no retry
        mends (a 400, a refused key): the episode ends with it instead of idling out."""
        last = self.calls[-HOPELESS_IN_ROW:]
        return len(last) == HOPELESS_IN_ROW and all(c.error in HOPELESS for c in last)

    @property
    def last_error(self) -> str:
        errs = [c for c in self.calls if c.error]
        return f"{errs[-1].error}: {errs[-1].message}" if errs else ""

    def over_budget(self) -> bool:
        """True (and :attr:`stopped_by` says which) once a budget is spent."""
        b = self.budget
        if b.max_turns and len(self.calls) >= b.max_turns:
            self.stopped_by = f"{len(self.calls)} model calls (max {b.max_turns})"
        elif b.max_seconds and self.clock() - self.started >= b.max_seconds:
            self.stopped_by = f"{self.clock() - self.started:.0f} s (max {b.max_seconds:g})"
        elif b.max_usd and self.episode_dollars >= b.max_usd:
            self.stopped_by = f"${self.episode_dollars:.4f} (max ${b.max_usd:g})"
        return bool(self.stopped_by)


def failure_of(success: bool, claimed: bool, status: str, meter: MeteredProvider) -> Failure:
    """Why an episode failed, from how it ended and what its model calls did."""
    if success:
        return Failure.NONE
    last_call = meter.calls[-1].error if meter.calls else ""
    if meter.stopped_by:  # a model that only times out ran out of budget by being slow
        return Failure.TIMEOUT if last_call in ("timeout", "cancelled") else Failure.BUDGET
    if claimed:
        return Failure.NOT_CONFIRMED
    errors = [c.error for c in meter.calls if c.error]
    last = errors[-1] if errors else ""
    if last == "refusal":
        return Failure.REFUSAL
    if last in ("timeout", "cancelled"):
        return Failure.TIMEOUT
    if last in ("rate_limited", "server", "connection", "auth", "bad_request", "config"):
        return Failure.HTTP_ERROR
    ok = [c for c in meter.calls if not c.error]
    if ok and sum(c.bad_calls for c in ok) >= len(ok) / 2:
        return Failure.BAD_TOOL_CALL
    if last in ("malformed", "empty"):
        return Failure.BAD_TOOL_CALL
    return Failure.GAVE_UP


def percentile(xs: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``xs`` by linear interpolation; 0 for none."""
    if not xs:
        return 0.0
    s = sorted(xs)
    k = (len(s) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


__all__ = ["Budget", "CallRecord", "Failure", "MeteredProvider", "Price", "PriceTable",
           "estimate_usage", "failure_of", "load_prices", "percentile", "prefix_blocks"]
