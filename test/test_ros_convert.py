"""Message conversion between the core's types and ROS types, without ROS.

The ROS message classes here are the ones ``rosbags`` builds from the package's own
msg/ srv/ action/ files plus the standard Jazzy types; every conversion goes through a real CDR
serialization and back.
"""

from __future__ import annotations

import array
import math

import numpy as np
import pytest

from solarian_agent.arm.trajectory import trajectory_from_lists
from solarian_agent.core import names
from solarian_agent.core.messages import (
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
from solarian_agent.rosmsg import convert as cv
from solarian_agent.rosmsg.interfaces import definitions, interface_files, typestore


@pytest.fixture(scope="module")
def store():
    return typestore()


@pytest.fixture(scope="module")
def codec(store):
    return cv.rosbags_codec(store)


def _frame(h: int = 6, w: int = 8) -> np.ndarray:
    rng = np.random.default_rng(3)
    a = rng.integers(0, 255, (h, w, 3), dtype=np.uint8)
    a.setflags(write=False)
    return a


SPEC = {"name": "pick_object", "description": "Pick the object at a point.",
        "parameters": {"type": "object", "properties": {"point": {"type": "array"}},
                       "required": ["point"]},
        "image_points": ["point"], "examples": [{"point": [1, 2]}], "ends_by_itself": True,
        "max_duration_s": 40.0, "max_target_area": 0.05,
        "monitor": [{"name": "progress", "type": "predicate"}], "camera": "overhead",
        "resources": ["arm"]}

# one core value per ROS type (topics and action parts: dataclasses; services: dicts)
SAMPLES: dict[str, object] = {
    names.T_IMAGE: Image(_frame(), 1000.25, "overhead_camera_optical", 0),
    names.T_CAMERA_INFO: CameraInfo(640, 480, (500.0, 0.0, 320.0, 0.0, 500.0, 240.0, 0.0, 0.0,
                                               1.0), (0.1, -0.05, 0.0, 0.0, 0.0),
                                    "overhead_camera_optical", 12.5),
    names.T_JOINT_STATE: JointState(3.5, ("shoulder_pan", "gripper"), (0.25, 0.03), (0.1, 0.0),
                                    (0.0, 0.5)),
    names.T_JOINT_COMMAND: JointCommand(4.0, ("elbow_flex",), (0.7,), 1.5, "operator"),
    names.T_JOINT_TRAJECTORY: trajectory_from_lists(("shoulder_pan", "gripper"),
                                                    [(0.5, (0.1, 0.2)), (1.25, (0.3, -0.1))]),
    names.T_DIAGNOSTICS: {"stamp": 9.0, "status": [
        {"name": "arm", "level": 1, "message": "warm", "hardware_id": "so101",
         "values": {"temperature_c": "56.0", "mode": "tracking"}}]},
    names.T_MARKERS: [
        {"ns": "plan", "id": 0, "type": "sphere", "frame_id": "world", "stamp": 2.0,
         "position": (0.2, 0.1, 0.01), "scale": (0.03, 0.03, 0.03),
         "color": (1.0, 0.5, 0.0, 1.0), "text": "", "points": [], "lifetime_s": 0.0},
        {"ns": "plan", "id": 1, "type": "line_strip", "frame_id": "world", "stamp": 2.0,
         "position": (0.0, 0.0, 0.0), "scale": (0.01, 0.0, 0.0), "color": (1.0, 1.0, 1.0, 1.0),
         "text": "a", "points": [(0.0, 0.0, 0.0), (0.1, 0.2, 0.0)], "lifetime_s": 1.5},
        {"ns": "plan", "id": 2, "type": "sphere", "frame_id": "world", "stamp": 2.0,
         "position": (0.0, 0.0, 0.0), "scale": (0.02, 0.02, 0.02),
         "color": (1.0, 1.0, 1.0, 1.0), "text": "", "points": [], "lifetime_s": 0.0,
         "delete_all": True},
    ],
    names.T_AGENT_STATE: AgentState(
        generation=3, status="running", task="put the red cup on the tray",
        plan=({"step": 1, "description": "pick the cup", "status": "done",
               "tool": "pick_object", "args": {"point": [412, 300]}, "action_id": "a1"},
              {"step": 2, "description": "check it", "status": "pending"},
              {"step": 3, "description": "go home", "status": "pending", "tool": "home",
               "args": {}}),
        actions=({"action_id": "a2", "tool": "place_at", "params": {"point": [10, 20]},
                  "elapsed_s": 1.25},),
        conversation=({"role": "user", "text": "tidy up", "by": "operator"},
                      {"role": "agent", "text": "On it."}),
        arm_holder="agent",
        nodes=({"node": "skills", "state": "up", "since_s": 12.5},
               {"node": "monitor", "state": "lost", "since_s": 0.75}),
        stamp=55.5),
    names.T_AGENT_EVENT: AgentEvent("2026-01-01T00:00:00.000Z", "skill_ended",
                                    {"action_id": "a1", "outcome": "succeeded",
                                     "data": {"x": [1, 2.5], "ok": True, "none": None}}),
    names.T_MONITOR_VERDICT: MonitorVerdict("a1", "pick_object", "progress", "holding", 0.91,
                                            "finish", "held for 2 ticks", 77.0, "home",
                                            "controller", 4),
    names.T_OPERATOR_EVENT: OperatorEvent("takeover", {"note": "mine", "keys": ["w"]}, 8.0),
    names.T_GENERATION: Generation(5, "operator takeover"),
    names.T_HEARTBEAT: Heartbeat(12.5, "planner", "running", 3, "3f9a1c"),
    cv.T_CLOCK: 1790000123.25,
    cv.T_SIM_TRUTH: {"t": 1.5, "objects": {"red_cup": {"location": "table", "xy": [0.2, 0.1]}},
                     "success": False},
    cv.T_STRING: {"a": 1},
    f"{cv.PKG}/msg/ToolSpec": SPEC,
    cv.T_GOAL: SkillGoal("pick_object", {"point": [412, 300]}, 2, "a7", "obs-12",
                         ("the cup falls over",)),
    cv.T_FEEDBACK: SkillFeedback("a7", "approach", 0.25),
    cv.T_RESULT: SkillResult("a7", "refused", "refused: stale generation 1 (current 2)",
                             {"target_area": 0.01}),
    f"{names.T_AGENT_COMMAND}_Request": {"text": "tidy up", "by": "operator"},
    f"{names.T_AGENT_COMMAND}_Response": {"ok": False, "reason": "empty message"},
    f"{names.T_TOOL_CATALOGUE}_Request": {},
    f"{names.T_TOOL_CATALOGUE}_Response": [SPEC, {**SPEC, "name": "home", "image_points": [],
                                                  "max_duration_s": None,
                                                  "max_target_area": None, "camera": None,
                                                  "examples": [], "monitor": []}],
    f"{names.T_ADVANCE_GENERATION}_Request": {"reason": "cancel", "by": "operator"},
    f"{names.T_ADVANCE_GENERATION}_Response": 7,
    f"{names.T_CONCLUDE}_Request": {"action_id": "a3", "outcome": "failed",
                                    "reason": "dropped", "generation": 2},
    f"{names.T_CONCLUDE}_Response": {"ok": True, "reason": ""},
    f"{names.T_OBSERVE_SCENE}_Request": {"focus": "is the cup on the tray?"},
    f"{names.T_OBSERVE_SCENE}_Response": {"ok": True, "error": "", "focus": "cup on tray",
                                          "description": "The cup is on the tray.",
                                          "truncated": False, "observed_at": 123.5},
    f"{cv.T_SEED_TRACKER}_Request": {"field": "overhead.target", "camera": "overhead",
                                     "point": (412.0, 300.0), "params": {"tol": 18},
                                     "stop": False},
    f"{cv.T_SEED_TRACKER}_Response": {"ok": True, "reason": "", "area_fraction": 0.012,
                                      "box": (400, 290, 425, 311)},
    f"{cv.T_SIM_RESET}_Request": {"seed": 42},
    f"{cv.T_SIM_RESET}_Response": {"ok": True, "message": "world reset with seed 42",
                                   "seed": 42},
    f"{cv.T_INJECT_FAULT}_Request": {"kind": "camera_freeze", "camera": "wrist",
                                     "duration_s": 2.0},
    f"{cv.T_INJECT_FAULT}_Response": {"ok": False, "message": "bad kind"},
    f"{names.T_TRIGGER}_Request": {},
    f"{names.T_TRIGGER}_Response": {"success": True, "message": "e-stop latched"},
    f"{cv.T_SET_BOOL}_Request": {"data": True},
    f"{cv.T_SET_BOOL}_Response": {"success": False, "message": "arm is not configured"},
}


def _cdr_round_trip(store, codec, typename, value):
    msg = cv.to_ros(codec, typename, value)
    raw = store.serialize_cdr(msg, typename)
    back = store.deserialize_cdr(raw, typename)
    return cv.from_ros(typename, back)


def _same(a, b):
    if isinstance(a, Image):
        return (isinstance(b, Image) and np.array_equal(a.data, b.data)
                and math.isclose(a.stamp, b.stamp, abs_tol=1e-9) and a.frame_id == b.frame_id
                and a.encoding == b.encoding)
    return a == b


@pytest.mark.parametrize("typename", sorted(SAMPLES))
def test_cdr_round_trip(store, codec, typename):
    value = SAMPLES[typename]
    back = _cdr_round_trip(store, codec, typename, value)
    assert _same(value, back), f"{typename}: {value!r} came back as {back!r}"


def test_every_conversion_has_a_sample_and_both_directions():
    assert set(cv.TO_ROS) == set(cv.FROM_ROS)
    assert set(cv.TO_ROS) == set(SAMPLES)


def test_every_own_interface_is_converted_or_nested(store):
    own = set(definitions())
    nested = {f"{cv.PKG}/msg/PlanStep", f"{cv.PKG}/msg/RunningAction",
              f"{cv.PKG}/msg/ChatMessage", f"{cv.PKG}/msg/NodeStatus"}
    assert own - set(cv.TO_ROS) == nested
    # and the nested ones ride inside AgentState
    fields = dict(store.fielddefs[names.T_AGENT_STATE][1])
    lists = ("plan", "actions", "conversation", "nodes")
    assert {v[1][0][1] for k, v in fields.items() if k in lists} == nested


def test_interface_files_parse_with_constants(store):
    assert len(interface_files()) >= 19
    result = store.types[cv.T_RESULT]
    assert result.OUTCOME_TIMED_OUT == "timed_out"
    assert store.types[names.T_MONITOR_VERDICT].DECISION_ESCALATE == "escalate"


def test_image_shares_its_buffer_and_is_read_only(store, codec):
    msg = cv.to_ros(codec, names.T_IMAGE, SAMPLES[names.T_IMAGE])
    img = cv.from_ros(names.T_IMAGE, msg)
    assert not img.data.flags.writeable
    assert np.shares_memory(img.data, msg.data)
    assert (msg.height, msg.width, msg.step, msg.encoding) == (6, 8, 24, "bgr8")


def test_image_encodings_and_padding(codec):
    rgb = np.zeros((2, 3, 3), np.uint8)
    rgb[..., 0] = 200  # red in RGB
    padded = np.zeros((2, 12), np.uint8)
    padded[:, :9] = rgb.reshape(2, 9)
    msg = codec.new(names.T_IMAGE, header=cv.header(codec, 1.0, "cam"), height=2, width=3,
                    encoding="rgb8", is_bigendian=0, step=12, data=padded.reshape(-1))
    img = cv.from_ros(names.T_IMAGE, msg)
    assert img.encoding == "bgr8" and img.data.shape == (2, 3, 3)
    assert (img.data[..., 2] == 200).all() and (img.data[..., 0] == 0).all()
    mono = cv.from_ros(names.T_IMAGE, cv.to_ros(codec, names.T_IMAGE, Image(
        np.arange(12, dtype=np.uint8).reshape(3, 4), 0.0, "c", encoding="mono8")))
    assert mono.encoding == "mono8" and mono.data.shape == (3, 4)
    bad = codec.new(names.T_IMAGE, height=2, width=2, encoding="16UC1", step=4,
                    data=np.zeros(8, np.uint8))
    with pytest.raises(cv.ConvertError, match="16UC1"):
        cv.from_ros(names.T_IMAGE, bad)
    short = codec.new(names.T_IMAGE, height=4, width=4, encoding="bgr8", step=12,
                      data=np.zeros(10, np.uint8))
    with pytest.raises(cv.ConvertError, match="do not hold"):
        cv.from_ros(names.T_IMAGE, short)


def test_image_loses_only_seq(store, codec):
    img = Image(_frame(), 5.0, "cam", seq=42)
    back = _cdr_round_trip(store, codec, names.T_IMAGE, img)
    assert back.seq == 0 and _same(img, back)


def test_time_conversion_edges(codec):
    t = cv.time_to_ros(codec, 1.9999999999)
    assert (t.sec, t.nanosec) == (2, 0)
    t = cv.time_to_ros(codec, 1234.5)
    assert (t.sec, t.nanosec) == (1234, 500_000_000)
    assert cv.time_from_ros(t) == 1234.5
    assert cv.time_to_ros(codec, float("nan")).sec == 0


def test_camera_info_projection_from_k(codec):
    msg = cv.to_ros(codec, names.T_CAMERA_INFO, SAMPLES[names.T_CAMERA_INFO])
    assert list(msg.p) == [500.0, 0.0, 320.0, 0.0, 0.0, 500.0, 240.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    assert list(msg.r) == [1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0]
    with pytest.raises(cv.ConvertError, match="9 values"):
        cv.to_ros(codec, names.T_CAMERA_INFO, CameraInfo(1, 1, (1.0,)))


@pytest.mark.parametrize("field, text, words", [
    ("params_json", "{not json", "params_json: not valid JSON"),
    ("params_json", "[1, 2]", "params_json: must be a JSON dict"),
])
def test_bad_json_from_the_graph_names_the_field(codec, field, text, words):
    msg = cv.to_ros(codec, cv.T_GOAL, SAMPLES[cv.T_GOAL])
    setattr(msg, field, text)
    with pytest.raises(cv.ConvertError, match=words):
        cv.from_ros(cv.T_GOAL, msg)


def test_empty_json_fields_mean_empty(codec):
    msg = cv.to_ros(codec, cv.T_GOAL, SAMPLES[cv.T_GOAL])
    msg.params_json = ""
    assert cv.from_ros(cv.T_GOAL, msg).params == {}


def test_joint_command_checks(codec):
    msg = cv.to_ros(codec, names.T_JOINT_COMMAND, SAMPLES[names.T_JOINT_COMMAND])
    msg.position = np.array([1.0, 2.0])
    with pytest.raises(cv.ConvertError, match="1 names but 2 positions"):
        cv.from_ros(names.T_JOINT_COMMAND, msg)
    msg.position = np.array([math.inf])
    with pytest.raises(cv.ConvertError, match="finite"):
        cv.from_ros(names.T_JOINT_COMMAND, msg)
    with pytest.raises(cv.ConvertError, match="1 names but 0 positions"):
        cv.to_ros(codec, names.T_JOINT_COMMAND, JointCommand(0.0, ("a",), ()))


def test_agent_command_without_by_uses_the_service_default(codec):
    msg = cv.to_ros(codec, f"{names.T_AGENT_COMMAND}_Request", {"text": "hi"})
    assert cv.from_ros(f"{names.T_AGENT_COMMAND}_Request", msg) == {"text": "hi"}


def test_seed_tracker_no_mask(store, codec):
    t = f"{cv.T_SEED_TRACKER}_Response"
    d = {"ok": False, "reason": "no frame", "area_fraction": None, "box": None}
    assert _cdr_round_trip(store, codec, t, d) == d


def test_sim_reset_next_seed(store, codec):
    t = f"{cv.T_SIM_RESET}_Request"
    assert _cdr_round_trip(store, codec, t, {"seed": None}) == {"seed": None}
    assert _cdr_round_trip(store, codec, t, {}) == {"seed": None}


def test_unknown_type_and_bad_value():
    codec = cv.rosbags_codec()
    with pytest.raises(cv.ConvertError, match="no conversion to"):
        cv.to_ros(codec, "foo_msgs/msg/Bar", 1)
    with pytest.raises(cv.ConvertError, match="no conversion from"):
        cv.from_ros("foo_msgs/msg/Bar", object())
    with pytest.raises(cv.ConvertError, match="unknown ROS type"):
        codec.new("foo_msgs/msg/Bar")
    with pytest.raises(cv.ConvertError, match="cannot convert"):
        cv.to_ros(codec, names.T_GENERATION, "not a generation")


def test_json_out_is_scrubbed_of_registered_secrets(codec):
    from solarian_agent.core.episode_log import register_secret

    register_secret("sk-test-secret-value-123456")
    ev = AgentEvent("t", "x", {"leak": "key sk-test-secret-value-123456"})
    msg = cv.to_ros(codec, names.T_AGENT_EVENT, ev)
    assert "sk-test-secret-value-123456" not in msg.data_json


# ------------------------------------------------------------------------------------------
# the rclpy flavour, against a stand-in with rosidl's field-type table
# ------------------------------------------------------------------------------------------
class _RclpyLike:
    _fields = {"header": "std_msgs/Header", "name": "sequence<string>",
               "position": "sequence<double>", "data": "sequence<uint8>",
               "k": "double[9]", "box": "sequence<int32>", "label": "string"}

    @classmethod
    def get_fields_and_field_types(cls):
        return dict(cls._fields)


def test_rclpy_coerce_builds_what_rosidl_accepts():
    c = _RclpyLike
    from solarian_agent.ros.codec import rclpy_coerce

    pos = rclpy_coerce(c, "position", (0.5, 1.0))
    assert isinstance(pos, array.array) and pos.typecode == "d" and list(pos) == [0.5, 1.0]
    data = rclpy_coerce(c, "data", np.arange(5, dtype=np.uint8).reshape(1, 5))
    assert isinstance(data, array.array) and data.typecode == "B" and list(data) == [0, 1, 2,
                                                                                      3, 4]
    raw = rclpy_coerce(c, "data", b"\x01\x02")
    assert list(raw) == [1, 2]
    k = rclpy_coerce(c, "k", [1.0] * 9)
    assert isinstance(k, np.ndarray) and k.dtype == np.float64
    assert rclpy_coerce(c, "name", ("a", "b")) == ["a", "b"]
    box = rclpy_coerce(c, "box", [1, 2, 3, 4])
    assert box.typecode == "i"
    assert rclpy_coerce(c, "label", "x") == "x"
    # and what rclpy hands back (array.array) reads as the core expects
    assert cv.from_ros(names.T_JOINT_STATE, type("M", (), {
        "header": type("H", (), {"stamp": type("T", (), {"sec": 1, "nanosec": 0})(),
                                 "frame_id": ""})(),
        "name": ["j"], "position": array.array("d", [0.5]),
        "velocity": array.array("d"), "effort": array.array("d")})()).position == (0.5,)
