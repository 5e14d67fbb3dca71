"""Conversion between the core's message types and ROS messages: pure functions, no rclpy.

Every converter is written against duck-typed message classes.  A :class:`Codec` resolves a ROS
type name (``"sensor_msgs/msg/Image"``, ``"solarian_agent/srv/AgentCommand_Request"``,
``"solarian_agent/action/Skill_Goal"``) to its class and builds instances, coercing numeric
arrays to what that flavour of class wants:

* ``rclpy_codec`` (``solarian_agent.ros.codec``) — the classes rosidl generates
  (``array.array`` for sequences, numpy for fixed-size arrays, every field optional); only used
  inside the node shells;
* :func:`rosbags_codec` — the classes ``rosbags`` builds from the same ``msg/ srv/ action/``
  files plus the standard ones (numpy arrays, every field required); used by the bag writer and
  the tests, which round-trip every type through CDR.

The core's side: the dataclasses of :mod:`solarian_agent.core.messages` for topics and actions,
and plain dicts for service requests / responses (what the core's ``Bus`` services take and
return).  JSON fields (params, data, detail) carry the core's dicts; malformed JSON coming in
from the graph raises :class:`ConvertError` naming the type and field.

``to_ros(codec, typename, value)`` and ``from_ros(typename, msg)`` dispatch on the ROS type name
through :data:`TO_ROS` / :data:`FROM_ROS`: the topic and action converters of
:mod:`.convert_topics` and :mod:`.convert_markers`, and the services' of
:mod:`.convert_services`.
"""

from __future__ import annotations

from typing import Any

from ..core import names
from .codec import Codec, ConvertError, header, rosbags_codec, time_from_ros, time_to_ros
from .convert_markers import markers_from_ros, markers_to_ros
from .convert_services import SERVICES_FROM_ROS, SERVICES_TO_ROS, FromRos, ToRos
from .convert_topics import (
    PKG,
    T_CLOCK,
    T_FEEDBACK,
    T_GOAL,
    T_INJECT_FAULT,
    T_RESULT,
    T_SEED_TRACKER,
    T_SET_BOOL,
    T_SIM_RESET,
    T_SIM_TRUTH,
    T_STRING,
    agent_event_from_ros,
    agent_event_to_ros,
    agent_state_from_ros,
    agent_state_to_ros,
    camera_info_from_ros,
    camera_info_to_ros,
    clock_from_ros,
    clock_to_ros,
    diagnostics_from_ros,
    diagnostics_to_ros,
    generation_from_ros,
    generation_to_ros,
    heartbeat_from_ros,
    heartbeat_to_ros,
    image_from_ros,
    image_to_ros,
    joint_command_from_ros,
    joint_command_to_ros,
    joint_state_from_ros,
    joint_state_to_ros,
    json_in,
    json_out,
    operator_event_from_ros,
    operator_event_to_ros,
    skill_feedback_from_ros,
    skill_feedback_to_ros,
    skill_goal_from_ros,
    skill_goal_to_ros,
    skill_result_from_ros,
    skill_result_to_ros,
    string_from_ros,
    string_to_ros,
    tool_spec_from_ros,
    tool_spec_to_ros,
    verdict_from_ros,
    verdict_to_ros,
)
from .convert_trajectory import joint_trajectory_from_ros, joint_trajectory_to_ros

TO_ROS: dict[str, ToRos] = {
    names.T_IMAGE: image_to_ros,
    names.T_CAMERA_INFO: camera_info_to_ros,
    names.T_JOINT_STATE: joint_state_to_ros,
    names.T_JOINT_COMMAND: joint_command_to_ros,
    names.T_DIAGNOSTICS: diagnostics_to_ros,
    names.T_MARKERS: markers_to_ros,
    names.T_JOINT_TRAJECTORY: joint_trajectory_to_ros,
    names.T_AGENT_STATE: agent_state_to_ros,
    names.T_AGENT_EVENT: agent_event_to_ros,
    names.T_MONITOR_VERDICT: verdict_to_ros,
    names.T_OPERATOR_EVENT: operator_event_to_ros,
    names.T_GENERATION: generation_to_ros,
    names.T_HEARTBEAT: heartbeat_to_ros,
    T_CLOCK: clock_to_ros,
    T_STRING: string_to_ros,
    T_SIM_TRUTH: lambda c, d: c.new(T_SIM_TRUTH, truth_json=json_out(d)),
    f"{PKG}/msg/ToolSpec": tool_spec_to_ros,
    T_GOAL: skill_goal_to_ros,
    T_RESULT: skill_result_to_ros,
    T_FEEDBACK: skill_feedback_to_ros,
    **SERVICES_TO_ROS,
}

FROM_ROS: dict[str, FromRos] = {
    names.T_IMAGE: image_from_ros,
    names.T_CAMERA_INFO: camera_info_from_ros,
    names.T_JOINT_STATE: joint_state_from_ros,
    names.T_JOINT_COMMAND: joint_command_from_ros,
    names.T_DIAGNOSTICS: diagnostics_from_ros,
    names.T_MARKERS: markers_from_ros,
    names.T_JOINT_TRAJECTORY: joint_trajectory_from_ros,
    names.T_AGENT_STATE: agent_state_from_ros,
    names.T_AGENT_EVENT: agent_event_from_ros,
    names.T_MONITOR_VERDICT: verdict_from_ros,
    names.T_OPERATOR_EVENT: operator_event_from_ros,
    names.T_GENERATION: generation_from_ros,
    names.T_HEARTBEAT: heartbeat_from_ros,
    T_CLOCK: clock_from_ros,
    T_STRING: string_from_ros,
    T_SIM_TRUTH: lambda m: json_in(str(m.truth_json), f"{T_SIM_TRUTH}.truth_json", dict, {}),
    f"{PKG}/msg/ToolSpec": tool_spec_from_ros,
    T_GOAL: skill_goal_from_ros,
    T_RESULT: skill_result_from_ros,
    T_FEEDBACK: skill_feedback_from_ros,
    **SERVICES_FROM_ROS,
}


def to_ros(c: Codec, typename: str, value: Any) -> Any:
    """The ROS message of ``typename`` for a core value."""
    fn = TO_ROS.get(typename)
    if fn is None:
        raise ConvertError(f"no conversion to {typename}")
    try:
        return fn(c, value)
    except ConvertError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ConvertError(f"{typename}: cannot convert {type(value).__name__}: {e}") from e


def from_ros(typename: str, msg: Any) -> Any:
    """The core value for a ROS message of ``typename``."""
    fn = FROM_ROS.get(typename)
    if fn is None:
        raise ConvertError(f"no conversion from {typename}")
    try:
        return fn(msg)
    except ConvertError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ConvertError(f"{typename}: malformed message: {e}") from e


__all__ = ["FROM_ROS", "PKG", "TO_ROS", "T_CLOCK", "T_FEEDBACK", "T_GOAL", "T_INJECT_FAULT",
           "T_RESULT", "T_SEED_TRACKER", "T_SET_BOOL", "T_SIM_RESET", "T_SIM_TRUTH", "T_STRING",
           "Codec", "ConvertError", "from_ros", "header", "image_from_ros", "image_to_ros",
           "rosbags_codec", "time_from_ros", "time_to_ros", "to_ros"]
