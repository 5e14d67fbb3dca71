"""Typed, frozen configuration validated on load.

``config/controller.yaml`` holds the ``agent:`` block (planner, monitor, runtime, events ...).
:func:`load_agent_config` turns it into :class:`AgentConfig`; an invalid value raises
:class:`ConfigError` naming its YAML path (``agent.monitor.period_s``) and what is allowed.
API keys are never in YAML: a config names the environment variable (``api_key_env``) and the
key is read from the environment when a provider is built.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

import yaml

from .errors import ConfigError

_S = TypeVar("_S")

T = TypeVar("T")

PLANNER_PROVIDERS = ("anthropic", "openai", "rules", "scripted")
MONITOR_PROVIDERS = ("openai_responses", "openai_decisions", "openai", "anthropic", "cv",
                     "scripted")


def _rng(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False
         ) -> dict[str, Any]:
    return {"lo": lo, "hi": hi, "lo_open": lo_open}


@dataclass(frozen=True)
class ModelEndpointConfig:
    provider: str = "rules"
    model: str = ""
    api_key_env: str | None = None
    base_url: str | None = None
    thinking_budget: int | None = None
    reasoning_effort: str | None = None
    timeout_s: float = field(default=60.0, metadata=_rng(0.0, 3600.0, lo_open=True))
    max_retries: int = field(default=3, metadata=_rng(0, 10))
    max_tokens: int = field(default=4096, metadata=_rng(1, 200_000))
    # provider openai: null sends neither tool_choice nor parallel_tool_calls (the server's
    # defaults; the harness reads any number of calls a turn); false asks for one call a turn
    # (a small model may do better so), true for any number; either is sent with
    # tool_choice "auto", and a server that refuses a field has it left out
    parallel_tool_calls: bool | None = None

    ALLOWED = {"provider": PLANNER_PROVIDERS,
               "reasoning_effort": (None, "minimal", "low", "medium", "high")}


@dataclass(frozen=True)
class MonitorConfig(ModelEndpointConfig):
    provider: str = "cv"
    # a monitor answer is only useful while it is fresh: a short timeout and no retries (the
    # next tick asks again with newer frames)
    timeout_s: float = field(default=15.0, metadata=_rng(0.0, 3600.0, lo_open=True))
    max_retries: int = field(default=0, metadata=_rng(0, 10))
    period_s: float = field(default=1.5, metadata=_rng(0.0, 600.0, lo_open=True))
    history: int = field(default=2, metadata=_rng(1, 16))
    image_max_side: int = field(default=512, metadata=_rng(16, 8192))
    close_ups: dict[str, list[float]] = field(default_factory=dict)
    reference: bool = True
    mark_target: bool = False
    instructions: str = ""

    ALLOWED = {"provider": MONITOR_PROVIDERS,
               "reasoning_effort": (None, "minimal", "low", "medium", "high")}


@dataclass(frozen=True)
class AgentBudgets:
    max_turns: int = field(default=80, metadata=_rng(1, 100_000))
    max_minutes: float = field(default=20.0, metadata=_rng(0.0, 10_000.0, lo_open=True))
    # failures in a row of one plan step before the harness fails the step (the planner must
    # then change the plan or ask the user); refused calls do not count here ...
    retries_per_step: int = field(default=3, metadata=_rng(1, 100))
    # ... they count here: this many refused calls in a row with no action started ends the
    # run as failed, long before max_turns
    max_refused_in_row: int = field(default=8, metadata=_rng(1, 1000))
    # a failing planner model (HTTP 503, a timeout): retried this many times per wake, with an
    # exponential backoff and jitter; then the planner is silent until the next event
    model_retries_per_wake: int = field(default=2, metadata=_rng(0, 20))


@dataclass(frozen=True)
class EventsConfig:
    """The planner's inbound event queue: bounded, with a defined overflow rule, so a burst of
    events can neither grow memory without limit nor silently lose an interrupt."""

    queue_size: int = field(default=256, metadata=_rng(1, 100_000))
    # drop_oldest_routine: the oldest queue/parallel-urgency event is dropped (and counted);
    # interrupts are never dropped.
    overflow: str = "drop_oldest_routine"
    # urgency routing (core/routing.py): a light model for events no rule decides (null: rules
    # only, unmatched events are queued); parallel answers for independent quick questions
    router: ModelEndpointConfig | None = None
    parallel: bool = True
    # a queued user addition waits for the next tool result at most this long
    max_hold_s: float = field(default=120.0, metadata=_rng(0.0, 3600.0, lo_open=True))
    # running tasks report progress to the planner each time it crosses this step (0..1)
    progress_step: float = field(default=0.25, metadata=_rng(0.0, 1.0, lo_open=True))
    max_timers: int = field(default=16, metadata=_rng(1, 1000))

    ALLOWED = {"overflow": ("drop_oldest_routine", "reject_new")}


@dataclass(frozen=True)
class RuntimeConfig:
    """Which vision backend interprets frames (``observe_scene``, descriptions for a planner
    that reads no images; ``none``: no remote vision), and the views sent with every turn."""

    vision: str = "none"
    vision_camera: str = ""
    cameras: list[str] = field(default_factory=list)

    ALLOWED = {"vision": ("none", "openai-responses", "openai", "anthropic", "cv", "scripted")}


@dataclass(frozen=True)
class AgentConfig:
    planner: ModelEndpointConfig = field(default_factory=ModelEndpointConfig)
    monitor: MonitorConfig | None = field(default_factory=MonitorConfig)
    planner_heartbeat_s: float | None = field(default=20.0, metadata=_rng(0.0, 3600.0,
                                                                          lo_open=True))
    budgets: AgentBudgets = field(default_factory=AgentBudgets)
    cameras: list[str] = field(default_factory=list)
    # the cameras a run watches from its start (a fresh view of each with every turn until the
    # planner unwatch()es them); null: every one of ``cameras``.  The others are one look() or
    # watch() away: an image only when the planner asks for it (an image is tokens every turn)
    watch_at_start: list[str] | None = None
    state_fields: dict[str, list[str]] = field(default_factory=dict)
    dry_run: bool = False
    system_prompt: str = ""
    max_images_in_context: int = field(default=4, metadata=_rng(0, 100))
    max_point_age_s: float = field(default=30.0, metadata=_rng(0.0, 3600.0, lo_open=True))
    image_max_side: int = field(default=1024, metadata=_rng(16, 8192))
    image_grid: bool = True
    image_overlays: bool = True
    control_period_s: float = field(default=0.02, metadata=_rng(0.001, 1.0))
    # "skills": every skill goal of the agent waits for the operator's yes (core/approval.py)
    approve: Literal["", "skills"] = ""
    approve_timeout_s: float = field(default=60.0, metadata=_rng(0.0, 3600.0, lo_open=True))
    # a node silent this long is lost (core/liveness.py: at most 2 s); a lost skills node
    # ends the run after node_wait_s
    node_lost_after_s: float = field(default=1.5, metadata=_rng(0.0, 2.0, lo_open=True))
    node_wait_s: float = field(default=60.0, metadata=_rng(0.0, 3600.0, lo_open=True))
    events: EventsConfig = field(default_factory=EventsConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)


def _type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in get_args(tp))
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if origin is not None:
        return getattr(origin, "__name__", str(origin))
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp))


def _convert(tp: Any, value: Any, path: str) -> Any:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if value is None:
            if type(None) in args:
                return None
            raise ConfigError(path, f"must be {_type_name(tp)}, got null")
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _convert(a, value, path)
            except ConfigError as e:
                errors.append(e)
        raise errors[0]
    if origin is Literal:
        if isinstance(value, bool) or value not in get_args(tp):
            raise ConfigError(path, f"must be {_type_name(tp)}, got {value!r}")
        return value
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(value, dict):
            raise ConfigError(path, f"must be a mapping, got {type(value).__name__}")
        return load_dataclass(tp, value, path)
    if origin is list:
        (item,) = get_args(tp)
        if not isinstance(value, list):
            raise ConfigError(path, f"must be a list, got {type(value).__name__}")
        return [_convert(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        kt, vt = get_args(tp)
        if not isinstance(value, dict):
            raise ConfigError(path, f"must be a mapping, got {type(value).__name__}")
        return {_convert(kt, k, f"{path}.{k}"): _convert(vt, v, f"{path}.{k}")
                for k, v in value.items()}
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(path, f"must be true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(path, f"must be an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(path, f"must be a number, got {value!r}")
        if not math.isfinite(float(value)):
            raise ConfigError(path, f"must be a finite number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(path, f"must be a string, got {value!r}")
        return value
    raise ConfigError(path, f"unsupported config type {tp!r}")  # pragma: no cover


def load_dataclass(cls: type[T], data: dict[str, Any], path: str) -> T:
    """Build a frozen config dataclass from a mapping, validating every value."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"{path}.{unknown[0]}",
                          f"unknown key; allowed keys: {', '.join(sorted(fields))}")
    allowed: dict[str, tuple[Any, ...]] = getattr(cls, "ALLOWED", {})
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        fpath = f"{path}.{name}"
        v = _convert(hints[name], value, fpath)
        if name in allowed and v not in allowed[name]:
            shown = ", ".join("null" if a is None else str(a) for a in allowed[name])
            raise ConfigError(fpath, f"{v!r} is not allowed; allowed values: {shown}")
        meta = fields[name].metadata
        if "lo" in meta and isinstance(v, (int, float)) and not isinstance(v, bool):
            lo, hi = meta["lo"], meta["hi"]
            if lo is not None and (v <= lo if meta["lo_open"] else v < lo):
                rel = ">" if meta["lo_open"] else ">="
                raise ConfigError(fpath, f"{v!r} is out of range; must be {rel} {lo}"
                                  + (f" and <= {hi}" if hi is not None else ""))
            if hi is not None and v > hi:
                raise ConfigError(fpath, f"{v!r} is out of range; must be <= {hi}")
        kwargs[name] = v
    obj = cls(**kwargs)
    _post_validate(obj, path)
    return obj


def _post_validate(obj: Any, path: str) -> None:
    if isinstance(obj, AgentConfig) and obj.cameras:
        _check_camera_names(obj, path)
    if isinstance(obj, MonitorConfig):
        for cam, box in obj.close_ups.items():
            p = f"{path}.close_ups.{cam}"
            if len(box) != 4:
                raise ConfigError(p, f"must be [x0, y0, x1, y1], got {len(box)} values")
            x0, y0, x1, y1 = box
            if not (0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1):
                raise ConfigError(p, "must be fractions with 0 <= x0 < x1 <= 1 and "
                                  f"0 <= y0 < y1 <= 1, got {box}")
    if isinstance(obj, ModelEndpointConfig) and obj.api_key_env is not None:
        env = obj.api_key_env
        if not env or not env.replace("_", "").isalnum() or env.startswith(("sk-", "sk_")):
            raise ConfigError(f"{path}.api_key_env",
                              "must name an environment variable (like OPENAI_API_KEY), "
                              "never hold a key")


def _check_camera_names(cfg: AgentConfig, path: str) -> None:
    """Every camera a setting names is one of ``cameras`` (a typo is an error naming it)."""
    known = list(cfg.cameras)
    dup = sorted({c for c in known if known.count(c) > 1})
    if dup:
        raise ConfigError(f"{path}.cameras", f"camera {dup[0]!r} is listed twice")
    shown = ", ".join(known)
    named: list[tuple[str, str]] = []
    if cfg.monitor is not None:
        named += [(f"{path}.monitor.close_ups.{c}", c) for c in cfg.monitor.close_ups]
    if cfg.runtime.vision_camera:
        named.append((f"{path}.runtime.vision_camera", cfg.runtime.vision_camera))
    named += [(f"{path}.runtime.cameras[{i}]", c) for i, c in enumerate(cfg.runtime.cameras)]
    named += [(f"{path}.watch_at_start[{i}]", c)
              for i, c in enumerate(cfg.watch_at_start or [])]
    for where, cam in named:
        if cam not in known:
            raise ConfigError(where, f"no camera is called {cam!r}; cameras ({path}.cameras): "
                                     f"{shown}")


def merge_blocks(cls: type, base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` laid on ``base``, both raw mappings of config dataclass ``cls``: a section (a
    field whose type is a config dataclass) present in both is merged key by key; any other
    value of ``over`` (a scalar, a list, a mapping such as ``close_ups``, null) replaces
    ``base``'s whole."""
    hints = typing.get_type_hints(cls)
    out = dict(base)
    for key, value in over.items():
        section = _section_class(hints.get(key))
        if section is not None and isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_blocks(section, out[key], value)
        else:
            out[key] = value
    return out


def _section_class(tp: Any) -> type | None:
    if tp is None:
        return None
    if get_origin(tp) in (Union, types.UnionType):
        found = [a for a in get_args(tp) if isinstance(a, type) and dataclasses.is_dataclass(a)]
        return found[0] if found else None
    return tp if isinstance(tp, type) and dataclasses.is_dataclass(tp) else None


def _fit_defaults(block: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    """A user who lists their own ``cameras`` keeps the defaults' settings only for cameras
    they list (the shipped wrist close-up does not become an error for a one-camera robot)."""
    if "cameras" not in user or not isinstance(block.get("cameras"), list):
        return block
    cams = set(block["cameras"])
    out = dict(block)
    mon_user: dict[str, Any] = user["monitor"] if isinstance(user.get("monitor"), dict) else {}
    mon = out.get("monitor")
    if isinstance(mon, dict) and "close_ups" not in mon_user and isinstance(
            mon.get("close_ups"), dict):
        out["monitor"] = {**mon, "close_ups": {c: v for c, v in mon["close_ups"].items()
                                               if c in cams}}
    rt_user: dict[str, Any] = user["runtime"] if isinstance(user.get("runtime"), dict) else {}
    rt = out.get("runtime")
    if isinstance(rt, dict):
        rt = dict(rt)
        if "vision_camera" not in rt_user and rt.get("vision_camera") not in cams:
            rt.pop("vision_camera", None)
        if "cameras" not in rt_user and isinstance(rt.get("cameras"), list):
            rt["cameras"] = [c for c in rt["cameras"] if c in cams]
        out["runtime"] = rt
    if "watch_at_start" not in user and isinstance(out.get("watch_at_start"), list):
        # none of the defaults' cameras left: every camera of the user's own is watched
        out["watch_at_start"] = [c for c in out["watch_at_start"] if c in cams] or None
    return out


def read_yaml(path: str | Path, missing: str = "file not found") -> Any:
    """A YAML file's document; ``ConfigError`` naming the file when it is missing (with
    ``missing`` as the reason) or not YAML."""
    try:
        return yaml.safe_load(Path(path).expanduser().read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ConfigError(str(path), missing) from e
    except yaml.YAMLError as e:
        raise ConfigError(str(path), f"not valid YAML: {e}") from e


def write_yaml(path: str | Path, doc: Any, header: str = "") -> Path:
    """Write ``doc`` as YAML under the comment lines ``header``, atomically: a new file is
    renamed over the old, so a crash mid-write never leaves half a calibration behind."""
    p = Path(path).expanduser()
    text = header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=99)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(p)
    return p


def settings_from_mapping(cls: type[_S], data: Any, where: str) -> _S:
    """A frozen settings dataclass with a ``where`` field (its YAML path) from a YAML mapping:
    None gives the defaults; a non-mapping or an unknown key is a ConfigError naming its path
    and the known keys; each value is then checked by the class's own ``__post_init__``."""
    if data is None:
        return cls(where=where)  # type: ignore[call-arg]
    if not isinstance(data, typing.Mapping):
        raise ConfigError(where, f"expected a mapping, got {type(data).__name__}")
    known = {f.name for f in dataclasses.fields(cls)} - {"where"}  # type: ignore[arg-type]
    unknown = sorted(set(map(str, data)) - known)
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}",
                          f"unknown setting; known: {', '.join(sorted(known))}")
    return cls(where=where, **{str(k): v for k, v in data.items()})  # type: ignore[call-arg]


def yaml_block(path: str | Path, key: str, missing: str = "file not found") -> dict[str, Any]:
    """The mapping under the top-level ``key`` of a YAML file (errors name the file)."""
    doc = read_yaml(path, missing)
    block = doc.get(key) if isinstance(doc, dict) else None
    if not isinstance(block, dict):
        raise ConfigError(str(path), f"expected a top-level '{key}:' mapping")
    return block


def load_agent_config(source: str | Path | dict[str, Any], root: str = "agent",
                      defaults: dict[str, Any] | None = None, where: str = "") -> AgentConfig:
    """Load the ``agent:`` block from a YAML file or an already-parsed mapping.

    ``defaults``: a raw ``agent:`` block (the shipped configuration) the source's block is
    laid over (:func:`merge_blocks`), so an empty file, or one that sets only the planner,
    runs with every other default.  A top-level key other than ``root`` is an error naming it
    (``agnet:`` never silently means "all defaults")."""
    if isinstance(source, dict):
        doc: Any = source
        where = where or "<mapping>"
    else:
        where = str(source)
        doc = read_yaml(source)
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ConfigError(root, f"{where} must hold a mapping at the top level")
    if root:
        unknown = sorted(str(k) for k in doc if k != root)
        if unknown:
            raise ConfigError(unknown[0], f"unknown top-level key in {where}; the "
                                          f"configuration is the '{root}:' block")
    block = doc.get(root, {}) if root else doc
    if block is None:
        block = {}
    if not isinstance(block, dict):
        raise ConfigError(root, f"must be a mapping, got {type(block).__name__}")
    if defaults is not None:
        block = lay_over(defaults, block)
    return load_dataclass(AgentConfig, block, root)


def lay_over(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Raw ``agent:`` block ``over`` laid on ``base`` (:func:`merge_blocks`); when ``over``
    lists its own ``cameras``, ``base``'s settings for cameras it does not list are dropped."""
    return _fit_defaults(merge_blocks(AgentConfig, base, over), over)
