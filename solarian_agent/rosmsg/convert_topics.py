"""The core's topic and action messages <-> ROS messages (sensors, skills, the agent's
topics): one ``*_to_ros(codec, value)`` and one ``*_from_ros(msg)`` per type, against
duck-typed message classes.  JSON fields (params, data, detail) carry the core's dicts;
malformed JSON coming in raises :class:`~.codec.ConvertError` naming the type and field."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..core import names
from ..core.episode_log import dumps
from ..core.messages import (
    AgentEvent,
    AgentState,
    CameraInfo,
    Generation,
    Heartbeat,
    Image,
    JointCommand,
    JointState,
    MonitorVerdict,
    OperatorEvent,
    SkillFeedback,
    SkillGoal,
    SkillResult,
)
from .codec import Codec, ConvertError, header, time_from_ros, time_to_ros

PKG = "solarian_agent"
T_STRING = "std_msgs/msg/String"
T_SET_BOOL = "std_srvs/srv/SetBool"
T_SEED_TRACKER = f"{PKG}/srv/SeedTracker"
T_SIM_RESET = f"{PKG}/srv/SimReset"
T_SIM_TRUTH = f"{PKG}/msg/SimTruth"
T_INJECT_FAULT = f"{PKG}/srv/InjectFault"


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------
def json_out(value: Any) -> str:
    return dumps(value)


def json_in(text: str, where: str, kind: type = dict, empty: Any = None) -> Any:
    if text == "" and empty is not None:
        return empty
    try:
        value = json.loads(text)
    except (TypeError, ValueError) as e:
        raise ConvertError(f"{where}: not valid JSON ({e}): {str(text)[:80]!r}") from e
    if not isinstance(value, kind):
        raise ConvertError(f"{where}: must be a JSON {kind.__name__}, got "
                           f"{type(value).__name__}")
    return value


def _floats(seq: Any) -> tuple[float, ...]:
    return tuple(float(x) for x in seq)


# ------------------------------------------------------------------------------------------
# sensors
# ------------------------------------------------------------------------------------------
_CHANNELS = {"bgr8": 3, "rgb8": 3, "bgra8": 4, "rgba8": 4, "mono8": 1, "8UC1": 1, "8UC3": 3}


def image_to_ros(c: Codec, img: Image) -> Any:
    data = np.ascontiguousarray(img.data)
    if data.dtype != np.uint8:
        raise ConvertError(f"sensor_msgs/msg/Image: data must be uint8, got {data.dtype}")
    h, w = int(data.shape[0]), int(data.shape[1])
    ch = 1 if data.ndim == 2 else int(data.shape[2])
    enc = img.encoding
    if _CHANNELS.get(enc, ch) != ch:
        raise ConvertError(f"sensor_msgs/msg/Image: encoding {enc} does not fit {ch} channels")
    return c.new(names.T_IMAGE, header=header(c, img.stamp, img.frame_id), height=h, width=w,
                 encoding=enc, is_bigendian=0, step=w * ch, data=data.reshape(-1))


def image_from_ros(msg: Any, seq: int = 0) -> Image:
    """A read-only core Image (bgr8, or mono8 for grey), sharing the message's buffer where
    the layout allows (bgr8 / mono8 without row padding)."""
    enc = str(msg.encoding)
    ch = _CHANNELS.get(enc)
    if ch is None:
        raise ConvertError(f"sensor_msgs/msg/Image.encoding: {enc!r} is not supported "
                           f"(supported: {', '.join(_CHANNELS)})")
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    buf = np.frombuffer(msg.data, dtype=np.uint8)
    if step < w * ch or buf.size < h * step:
        raise ConvertError(f"sensor_msgs/msg/Image: {buf.size} bytes do not hold {h} rows of "
                           f"step {step} for {w}x{ch} pixels")
    rows = buf[:h * step].reshape(h, step)[:, :w * ch]
    arr: np.ndarray
    if ch == 1:
        arr = rows.reshape(h, w)
        out_enc = "mono8"
    else:
        arr = rows.reshape(h, w, ch)
        if enc == "rgb8":
            arr = np.ascontiguousarray(arr[..., ::-1])
        elif enc == "rgba8":
            arr = np.ascontiguousarray(arr[..., 2::-1])
        elif enc == "bgra8":
            arr = np.ascontiguousarray(arr[..., :3])
        out_enc = "bgr8"
    if arr.flags.writeable:
        arr.setflags(write=False)
    return Image(arr, time_from_ros(msg.header.stamp), str(msg.header.frame_id), seq, out_enc)


def camera_info_to_ros(c: Codec, info: CameraInfo) -> Any:
    k = list(_floats(info.k))
    if len(k) != 9:
        raise ConvertError(f"sensor_msgs/msg/CameraInfo.k: needs 9 values, got {len(k)}")
    p = [k[0], k[1], k[2], 0.0, k[3], k[4], k[5], 0.0, k[6], k[7], k[8], 0.0]
    return c.new(names.T_CAMERA_INFO, header=header(c, info.stamp, info.frame_id),
                 height=int(info.height), width=int(info.width),
                 distortion_model=str(info.distortion_model), d=list(_floats(info.d)), k=k,
                 r=[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0], p=p, binning_x=0,
                 binning_y=0)


def camera_info_from_ros(msg: Any) -> CameraInfo:
    return CameraInfo(int(msg.width), int(msg.height), _floats(msg.k), _floats(msg.d),
                      str(msg.header.frame_id), time_from_ros(msg.header.stamp),
                      str(msg.distortion_model))


def joint_state_to_ros(c: Codec, js: JointState) -> Any:
    return c.new(names.T_JOINT_STATE, header=header(c, js.stamp), name=list(js.name),
                 position=list(_floats(js.position)), velocity=list(_floats(js.velocity)),
                 effort=list(_floats(js.effort)))


def joint_state_from_ros(msg: Any) -> JointState:
    return JointState(time_from_ros(msg.header.stamp), tuple(str(n) for n in msg.name),
                      _floats(msg.position), _floats(msg.velocity), _floats(msg.effort))


def joint_command_to_ros(c: Codec, cmd: JointCommand) -> Any:
    if len(cmd.name) != len(cmd.position):
        raise ConvertError(f"{names.T_JOINT_COMMAND}: {len(cmd.name)} names but "
                           f"{len(cmd.position)} positions")
    return c.new(names.T_JOINT_COMMAND, header=header(c, cmd.stamp), name=list(cmd.name),
                 position=list(_floats(cmd.position)), max_velocity=float(cmd.max_velocity),
                 source=str(cmd.source))


def joint_command_from_ros(msg: Any) -> JointCommand:
    name = tuple(str(n) for n in msg.name)
    pos = _floats(msg.position)
    if len(name) != len(pos):
        raise ConvertError(f"{names.T_JOINT_COMMAND}: {len(name)} names but {len(pos)} "
                           "positions")
    if not all(math.isfinite(p) for p in pos) or not math.isfinite(float(msg.max_velocity)):
        raise ConvertError(f"{names.T_JOINT_COMMAND}.position: every value must be finite")
    return JointCommand(time_from_ros(msg.header.stamp), name, pos, float(msg.max_velocity),
                        str(msg.source) or "agent")


_LEVELS = {"OK": 0, "WARN": 1, "ERROR": 2, "STALE": 3}


def diagnostics_to_ros(c: Codec, diag: Mapping[str, Any]) -> Any:
    """``{"stamp": t, "status": [{"name", "level" (0-3 or OK/WARN/ERROR/STALE), "message",
    "hardware_id", "values": {key: value}}]}`` -> diagnostic_msgs/DiagnosticArray."""
    status = []
    for s in diag.get("status", ()):
        level = s.get("level", 0)
        level = _LEVELS.get(str(level).upper(), level) if isinstance(level, str) else int(level)
        status.append(c.new(
            "diagnostic_msgs/msg/DiagnosticStatus", level=bytes([int(level)])
            if c.flavour == "rclpy" else int(level), name=str(s.get("name", "")),
            message=str(s.get("message", "")), hardware_id=str(s.get("hardware_id", "")),
            values=[c.new("diagnostic_msgs/msg/KeyValue", key=str(k), value=str(v))
                    for k, v in dict(s.get("values", {})).items()]))
    return c.new(names.T_DIAGNOSTICS, header=header(c, float(diag.get("stamp", 0.0))),
                 status=status)


def diagnostics_from_ros(msg: Any) -> dict[str, Any]:
    def level(v: Any) -> int:
        return v[0] if isinstance(v, (bytes, bytearray)) else int(v)

    return {"stamp": time_from_ros(msg.header.stamp),
            "status": [{"name": str(s.name), "level": level(s.level),
                        "message": str(s.message), "hardware_id": str(s.hardware_id),
                        "values": {str(kv.key): str(kv.value) for kv in s.values}}
                       for s in msg.status]}


# ------------------------------------------------------------------------------------------
# skills
# ------------------------------------------------------------------------------------------
T_GOAL = f"{names.T_SKILL_ACTION}_Goal"
T_RESULT = f"{names.T_SKILL_ACTION}_Result"
T_FEEDBACK = f"{names.T_SKILL_ACTION}_Feedback"


def skill_goal_to_ros(c: Codec, g: SkillGoal) -> Any:
    return c.new(T_GOAL, tool=str(g.tool), params_json=json_out(dict(g.params)),
                 generation=int(g.generation), action_id=str(g.action_id),
                 observation_id=str(g.observation_id), watch_for=[str(w) for w in g.watch_for])


def skill_goal_from_ros(msg: Any) -> SkillGoal:
    return SkillGoal(str(msg.tool), json_in(str(msg.params_json), f"{T_GOAL}.params_json",
                                             dict, {}),
                     int(msg.generation), str(msg.action_id), str(msg.observation_id),
                     tuple(str(w) for w in msg.watch_for))


def skill_feedback_to_ros(c: Codec, f: SkillFeedback) -> Any:
    return c.new(T_FEEDBACK, action_id=str(f.action_id), phase=str(f.phase),
                 progress=float(f.progress))


def skill_feedback_from_ros(msg: Any) -> SkillFeedback:
    return SkillFeedback(str(msg.action_id), str(msg.phase), float(msg.progress))


def skill_result_to_ros(c: Codec, r: SkillResult) -> Any:
    return c.new(T_RESULT, action_id=str(r.action_id), outcome=str(r.outcome),
                 reason=str(r.reason), data_json=json_out(dict(r.data)))


def skill_result_from_ros(msg: Any) -> SkillResult:
    return SkillResult(str(msg.action_id), str(msg.outcome), str(msg.reason),
                       json_in(str(msg.data_json), f"{T_RESULT}.data_json", dict, {}))


def tool_spec_to_ros(c: Codec, d: Mapping[str, Any]) -> Any:
    return c.new(
        f"{PKG}/msg/ToolSpec", name=str(d["name"]), description=str(d.get("description") or ""),
        parameters_json=json_out(d.get("parameters", {})),
        image_points=[str(p) for p in d.get("image_points", ())],
        examples_json=json_out(list(d.get("examples", ()))),
        ends_by_itself=bool(d.get("ends_by_itself", True)),
        max_duration_s=float(d.get("max_duration_s") or 0.0),
        max_target_area=float(d.get("max_target_area") or 0.0),
        monitor_json=json_out(list(d.get("monitor", ()))), camera=str(d.get("camera") or ""),
        resources=[str(r) for r in d.get("resources", ())])


def tool_spec_from_ros(msg: Any) -> dict[str, Any]:
    where = f"{PKG}/msg/ToolSpec"
    return {
        "name": str(msg.name), "description": str(msg.description) or None,
        "parameters": json_in(str(msg.parameters_json), f"{where}.parameters_json", dict, {}),
        "image_points": [str(p) for p in msg.image_points],
        "examples": json_in(str(msg.examples_json), f"{where}.examples_json", list, []),
        "ends_by_itself": bool(msg.ends_by_itself),
        "max_duration_s": float(msg.max_duration_s) if msg.max_duration_s > 0 else None,
        "max_target_area": float(msg.max_target_area) if msg.max_target_area > 0 else None,
        "monitor": json_in(str(msg.monitor_json), f"{where}.monitor_json", list, []),
        "camera": str(msg.camera) or None, "resources": [str(r) for r in msg.resources],
    }


# ------------------------------------------------------------------------------------------
# agent
# ------------------------------------------------------------------------------------------
def agent_event_to_ros(c: Codec, ev: AgentEvent) -> Any:
    return c.new(names.T_AGENT_EVENT, t=str(ev.t), kind=str(ev.kind),
                 data_json=json_out(dict(ev.data)))


def agent_event_from_ros(msg: Any) -> AgentEvent:
    return AgentEvent(str(msg.t), str(msg.kind),
                      json_in(str(msg.data_json), f"{names.T_AGENT_EVENT}.data_json", dict, {}))


def generation_to_ros(c: Codec, g: Generation) -> Any:
    return c.new(names.T_GENERATION, value=int(g.value), reason=str(g.reason))


def generation_from_ros(msg: Any) -> Generation:
    return Generation(int(msg.value), str(msg.reason))


T_CLOCK = "rosgraph_msgs/msg/Clock"


def clock_to_ros(c: Codec, t: float) -> Any:
    return c.new(T_CLOCK, clock=time_to_ros(c, float(t)))


def clock_from_ros(msg: Any) -> float:
    return time_from_ros(msg.clock)


def heartbeat_to_ros(c: Codec, h: Heartbeat) -> Any:
    return c.new(names.T_HEARTBEAT, stamp=time_to_ros(c, h.stamp), node=str(h.node),
                 status=str(h.status), generation=int(h.generation),
                 instance=str(h.instance))


def heartbeat_from_ros(msg: Any) -> Heartbeat:
    return Heartbeat(time_from_ros(msg.stamp), str(msg.node), str(msg.status),
                     int(msg.generation), str(msg.instance))


def operator_event_to_ros(c: Codec, ev: OperatorEvent) -> Any:
    return c.new(names.T_OPERATOR_EVENT, stamp=time_to_ros(c, ev.stamp), kind=str(ev.kind),
                 detail_json=json_out(dict(ev.detail)))


def operator_event_from_ros(msg: Any) -> OperatorEvent:
    return OperatorEvent(str(msg.kind), json_in(str(msg.detail_json),
                                                 f"{names.T_OPERATOR_EVENT}.detail_json",
                                                 dict, {}),
                         time_from_ros(msg.stamp))


def verdict_to_ros(c: Codec, v: MonitorVerdict) -> Any:
    return c.new(names.T_MONITOR_VERDICT, stamp=time_to_ros(c, v.stamp),
                 action_id=str(v.action_id), tool=str(v.tool), question=str(v.question),
                 value=str(v.value), probability=float(v.probability),
                 decision=str(v.decision), reason=str(v.reason), then=str(v.then),
                 source=str(v.source), generation=int(v.generation))


def verdict_from_ros(msg: Any) -> MonitorVerdict:
    return MonitorVerdict(str(msg.action_id), str(msg.tool), str(msg.question), str(msg.value),
                          float(msg.probability), str(msg.decision), str(msg.reason),
                          time_from_ros(msg.stamp), str(msg.then), str(msg.source) or "monitor",
                          int(msg.generation))


def agent_state_to_ros(c: Codec, s: AgentState) -> Any:
    plan = [c.new(f"{PKG}/msg/PlanStep", step=int(p.get("step", i + 1)),
                  description=str(p.get("description", "")),
                  status=str(p.get("status", "pending")), tool=str(p.get("tool") or ""),
                  args_json="" if p.get("args") is None else json_out(p["args"]),
                  action_id=str(p.get("action_id") or ""))
            for i, p in enumerate(s.plan)]
    actions = [c.new(f"{PKG}/msg/RunningAction", action_id=str(a.get("action_id", "")),
                     tool=str(a.get("tool", "")), params_json=json_out(a.get("params", {})),
                     elapsed_s=float(a.get("elapsed_s", 0.0)))
               for a in s.actions]
    conv = [c.new(f"{PKG}/msg/ChatMessage", role=str(m.get("role", "")),
                  text=str(m.get("text", "")), by=str(m.get("by") or ""))
            for m in s.conversation]
    return c.new(names.T_AGENT_STATE, header=header(c, s.stamp), generation=int(s.generation),
                 status=str(s.status), task=str(s.task), plan=plan, actions=actions,
                 conversation=conv, arm_holder=str(s.arm_holder),
                 nodes=[c.new(f"{PKG}/msg/NodeStatus", node=str(n.get("node", "")),
                              state=str(n.get("state", "")),
                              since_s=float(n.get("since_s", 0.0))) for n in s.nodes])


def agent_state_from_ros(msg: Any) -> AgentState:
    where = names.T_AGENT_STATE
    plan = []
    for p in msg.plan:
        d: dict[str, Any] = {"step": int(p.step), "description": str(p.description),
                             "status": str(p.status)}
        if p.tool:
            d["tool"] = str(p.tool)
        if p.args_json:
            d["args"] = json_in(str(p.args_json), f"{where}.plan[{p.step}].args_json", dict)
        if p.action_id:
            d["action_id"] = str(p.action_id)
        plan.append(d)
    actions = [{"action_id": str(a.action_id), "tool": str(a.tool),
                "params": json_in(str(a.params_json), f"{where}.actions.params_json", dict, {}),
                "elapsed_s": float(a.elapsed_s)} for a in msg.actions]
    conv = []
    for m in msg.conversation:
        e: dict[str, Any] = {"role": str(m.role), "text": str(m.text)}
        if m.by:
            e["by"] = str(m.by)
        conv.append(e)
    return AgentState(int(msg.generation), str(msg.status), str(msg.task), tuple(plan),
                      tuple(actions), tuple(conv), time_from_ros(msg.header.stamp),
                      str(msg.arm_holder),
                      tuple({"node": str(n.node), "state": str(n.state),
                             "since_s": float(n.since_s)} for n in msg.nodes))


def string_to_ros(c: Codec, value: Any) -> Any:
    return c.new(T_STRING, data=value if isinstance(value, str) else json_out(value))


def string_from_ros(msg: Any) -> Any:
    text = str(msg.data)
    try:
        return json.loads(text)
    except ValueError:
        return text
