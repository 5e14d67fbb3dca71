"""The core's service requests and responses (plain dicts, as the core's ``Bus`` services
take and return them) <-> ROS ``*_Request`` / ``*_Response`` messages: the tables
:data:`SERVICES_TO_ROS` and :data:`SERVICES_FROM_ROS`, merged into :mod:`.convert`'s."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..core import names
from .codec import Codec, time_from_ros, time_to_ros
from .convert_topics import (
    T_INJECT_FAULT,
    T_SEED_TRACKER,
    T_SET_BOOL,
    T_SIM_RESET,
    json_in,
    json_out,
    tool_spec_from_ros,
    tool_spec_to_ros,
)


# ------------------------------------------------------------------------------------------
# services: the core's request / response dicts
# ------------------------------------------------------------------------------------------
def _req(t: str) -> str:
    return f"{t}_Request"


def _resp(t: str) -> str:
    return f"{t}_Response"


def _ok_to(t: str) -> Callable[[Codec, Mapping[str, Any]], Any]:
    def f(c: Codec, d: Mapping[str, Any]) -> Any:
        return c.new(_resp(t), ok=bool(d.get("ok", False)), reason=str(d.get("reason", "")))
    return f


def _ok_from(msg: Any) -> dict[str, Any]:
    return {"ok": bool(msg.ok), "reason": str(msg.reason)}


def _agent_command_from(msg: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"text": str(msg.text)}
    if msg.by:
        d["by"] = str(msg.by)
    return d


def _observe_resp_to(c: Codec, d: Mapping[str, Any]) -> Any:
    return c.new(_resp(names.T_OBSERVE_SCENE), ok=bool(d.get("ok", False)),
                 error=str(d.get("error") or ""), focus=str(d.get("focus") or ""),
                 description=str(d.get("description") or ""),
                 truncated=bool(d.get("truncated", False)),
                 observed_at=time_to_ros(c, float(d.get("observed_at") or 0.0)))


def _observe_resp_from(msg: Any) -> dict[str, Any]:
    return {"ok": bool(msg.ok), "error": str(msg.error), "focus": str(msg.focus),
            "description": str(msg.description), "truncated": bool(msg.truncated),
            "observed_at": time_from_ros(msg.observed_at)}


def _seed_req_to(c: Codec, d: Mapping[str, Any]) -> Any:
    pt = d.get("point") or (0.0, 0.0)
    return c.new(_req(T_SEED_TRACKER), field=str(d.get("field", "")),
                 camera=str(d.get("camera", "")), x=float(pt[0]), y=float(pt[1]),
                 params_json=json_out(dict(d.get("params", {}))), stop=bool(d.get("stop")))


def _seed_req_from(msg: Any) -> dict[str, Any]:
    return {"field": str(msg.field), "camera": str(msg.camera),
            "point": (float(msg.x), float(msg.y)),
            "params": json_in(str(msg.params_json), f"{_req(T_SEED_TRACKER)}.params_json",
                               dict, {}),
            "stop": bool(msg.stop)}


def _seed_resp_to(c: Codec, d: Mapping[str, Any]) -> Any:
    area = d.get("area_fraction")
    box = d.get("box")
    return c.new(_resp(T_SEED_TRACKER), ok=bool(d.get("ok", False)),
                 reason=str(d.get("reason", "")),
                 area_fraction=-1.0 if area is None else float(area),
                 box=[] if box is None else [int(v) for v in box])


def _seed_resp_from(msg: Any) -> dict[str, Any]:
    box = [int(v) for v in msg.box]
    return {"ok": bool(msg.ok), "reason": str(msg.reason),
            "area_fraction": None if msg.area_fraction < 0 else float(msg.area_fraction),
            "box": tuple(box) if len(box) == 4 else None}


def _message(d: Mapping[str, Any]) -> str:
    return str(d.get("message", d.get("reason", "")))


def _sim_reset_req_from(msg: Any) -> dict[str, Any]:
    return {"seed": int(msg.seed) if msg.use_seed else None}


def _trigger_resp_to(t: str) -> Callable[[Codec, Mapping[str, Any]], Any]:
    def f(c: Codec, d: Mapping[str, Any]) -> Any:
        return c.new(_resp(t), success=bool(d.get("success", d.get("ok", False))),
                     message=str(d.get("message", d.get("reason", ""))))
    return f


def _trigger_resp_from(msg: Any) -> dict[str, Any]:
    return {"success": bool(msg.success), "message": str(msg.message)}


ToRos = Callable[[Codec, Any], Any]

FromRos = Callable[[Any], Any]

SERVICES_TO_ROS: dict[str, ToRos] = {
    _req(names.T_AGENT_COMMAND): lambda c, d: c.new(_req(names.T_AGENT_COMMAND),
                                                    text=str(d.get("text", "")),
                                                    by=str(d.get("by", "") or "")),
    _resp(names.T_AGENT_COMMAND): _ok_to(names.T_AGENT_COMMAND),
    _req(names.T_TOOL_CATALOGUE): lambda c, d: c.new(_req(names.T_TOOL_CATALOGUE)),
    _resp(names.T_TOOL_CATALOGUE): lambda c, specs: c.new(
        _resp(names.T_TOOL_CATALOGUE), tools=[tool_spec_to_ros(c, s) for s in specs]),
    _req(names.T_ADVANCE_GENERATION): lambda c, d: c.new(
        _req(names.T_ADVANCE_GENERATION), reason=str(d.get("reason", "")),
        by=str(d.get("by", "") or "")),
    _resp(names.T_ADVANCE_GENERATION): lambda c, g: c.new(_resp(names.T_ADVANCE_GENERATION),
                                                          generation=int(g)),
    _req(names.T_CONCLUDE): lambda c, d: c.new(
        _req(names.T_CONCLUDE), action_id=str(d.get("action_id", "")),
        outcome=str(d.get("outcome", "")), reason=str(d.get("reason", "")),
        generation=int(d.get("generation", -1))),
    _resp(names.T_CONCLUDE): _ok_to(names.T_CONCLUDE),
    _req(names.T_OBSERVE_SCENE): lambda c, d: c.new(_req(names.T_OBSERVE_SCENE),
                                                    focus=str(d.get("focus", ""))),
    _resp(names.T_OBSERVE_SCENE): _observe_resp_to,
    _req(T_SEED_TRACKER): _seed_req_to,
    _resp(T_SEED_TRACKER): _seed_resp_to,
    _req(T_SIM_RESET): lambda c, d: c.new(_req(T_SIM_RESET), seed=int(d.get("seed") or 0),
                                          use_seed=d.get("seed") is not None),
    _resp(T_SIM_RESET): lambda c, d: c.new(_resp(T_SIM_RESET), ok=bool(d.get("ok", False)),
                                           message=_message(d), seed=int(d.get("seed") or 0)),
    _req(T_INJECT_FAULT): lambda c, d: c.new(_req(T_INJECT_FAULT),
                                             request_json=json_out(dict(d))),
    _resp(T_INJECT_FAULT): lambda c, d: c.new(_resp(T_INJECT_FAULT), ok=bool(d.get("ok", False)),
                                              message=_message(d)),
    _req(names.T_TRIGGER): lambda c, d: c.new(_req(names.T_TRIGGER)),
    _resp(names.T_TRIGGER): _trigger_resp_to(names.T_TRIGGER),
    _req(T_SET_BOOL): lambda c, d: c.new(_req(T_SET_BOOL), data=bool(d.get("data"))),
    _resp(T_SET_BOOL): _trigger_resp_to(T_SET_BOOL),
}

SERVICES_FROM_ROS: dict[str, FromRos] = {
    _req(names.T_AGENT_COMMAND): _agent_command_from,
    _resp(names.T_AGENT_COMMAND): _ok_from,
    _req(names.T_TOOL_CATALOGUE): lambda m: {},
    _resp(names.T_TOOL_CATALOGUE): lambda m: [tool_spec_from_ros(t) for t in m.tools],
    _req(names.T_ADVANCE_GENERATION): lambda m: {"reason": str(m.reason),
                                                 **({"by": str(m.by)} if m.by else {})},
    _resp(names.T_ADVANCE_GENERATION): lambda m: int(m.generation),
    _req(names.T_CONCLUDE): lambda m: {"action_id": str(m.action_id),
                                       "outcome": str(m.outcome), "reason": str(m.reason),
                                       "generation": int(m.generation)},
    _resp(names.T_CONCLUDE): _ok_from,
    _req(names.T_OBSERVE_SCENE): lambda m: {"focus": str(m.focus)},
    _resp(names.T_OBSERVE_SCENE): _observe_resp_from,
    _req(T_SEED_TRACKER): _seed_req_from,
    _resp(T_SEED_TRACKER): _seed_resp_from,
    _req(T_SIM_RESET): _sim_reset_req_from,
    _resp(T_SIM_RESET): lambda m: {"ok": bool(m.ok), "message": str(m.message),
                                   "seed": int(m.seed)},
    _req(T_INJECT_FAULT): lambda m: json_in(str(m.request_json),
                                             f"{_req(T_INJECT_FAULT)}.request_json", dict),
    _resp(T_INJECT_FAULT): lambda m: {"ok": bool(m.ok), "message": str(m.message)},
    _req(names.T_TRIGGER): lambda m: {},
    _resp(names.T_TRIGGER): _trigger_resp_from,
    _req(T_SET_BOOL): lambda m: {"data": bool(m.data)},
    _resp(T_SET_BOOL): _trigger_resp_from,
}


__all__ = ["SERVICES_FROM_ROS", "SERVICES_TO_ROS", "FromRos", "ToRos"]
