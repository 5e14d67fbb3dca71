"""Topic, service and action names and ROS type names shared by the embedded run and the graph.

Names are relative (no leading slash) so ROS namespaces and remapping apply to them.
"""

from __future__ import annotations

# sensors / robot
JOINT_STATES = "joint_states"
JOINT_COMMANDS = "joint_commands"
DIAGNOSTICS = "diagnostics"
ESTOP = "estop"
ESTOP_RESET = "estop_reset"
# the command gate (arm/gate.py): the holder (latched JSON), an e-stop with its reason from any
# ROS node, and the command input a ros2_control joint trajectory controller named
# ``arm_controller`` would have, so configs written for one point here
ARM_GATE = "arm/gate"
ESTOP_REQUEST = "estop/request"
ARM_TRAJECTORY = "arm_controller/joint_trajectory"


def image_topic(camera: str) -> str:
    return f"{camera}/image_raw"


def camera_info_topic(camera: str) -> str:
    return f"{camera}/camera_info"


def skill_action(tool: str) -> str:
    return f"skills/{tool}"


# skills
TOOL_CATALOGUE = "skills/catalogue"
EXECUTOR_GENERATION = "skills/generation"
EXECUTOR_ADVANCE = "skills/advance_generation"
SKILL_APPROVE = "skills/approve"  # approve: skills -- the operator's yes or no (core/approval.py)
TRACKER_SEED = "trackers/seed"

# agent
AGENT_STATE = "agent/state"
AGENT_EVENTS = "agent/events"
AGENT_VIEW = "agent/view"
AGENT_MARKERS = "agent/markers"
AGENT_HEARTBEAT = "agent/heartbeat"
NODES_HEARTBEAT = "nodes/heartbeat"  # every node of a multi-process graph (core/liveness.py)
AGENT_MESSAGE = "agent/message"
AGENT_CANCEL = "agent/cancel"
AGENT_RESET = "agent/reset"
OPERATOR_EVENTS = "operator/events"
OBSERVE_SCENE = "agent/observe_scene"
MONITOR_VERDICTS = "monitor/verdicts"

# sim
SIM_RESET = "sim/reset"
SIM_INJECT_FAULT = "sim/inject_fault"
SIM_TRUTH = "sim/ground_truth"

# ROS type names
T_IMAGE = "sensor_msgs/msg/Image"
T_CAMERA_INFO = "sensor_msgs/msg/CameraInfo"
T_JOINT_STATE = "sensor_msgs/msg/JointState"
T_DIAGNOSTICS = "diagnostic_msgs/msg/DiagnosticArray"
T_MARKERS = "visualization_msgs/msg/MarkerArray"
T_TRIGGER = "std_srvs/srv/Trigger"
T_STRING = "std_msgs/msg/String"
T_JOINT_TRAJECTORY = "trajectory_msgs/msg/JointTrajectory"
T_JOINT_COMMAND = "solarian_agent/msg/JointCommand"
T_AGENT_STATE = "solarian_agent/msg/AgentState"
T_AGENT_EVENT = "solarian_agent/msg/AgentEvent"
T_MONITOR_VERDICT = "solarian_agent/msg/MonitorVerdict"
T_OPERATOR_EVENT = "solarian_agent/msg/OperatorEvent"
T_GENERATION = "solarian_agent/msg/Generation"
T_HEARTBEAT = "solarian_agent/msg/Heartbeat"
T_SKILL_ACTION = "solarian_agent/action/Skill"
T_AGENT_COMMAND = "solarian_agent/srv/AgentCommand"
T_OBSERVE_SCENE = "solarian_agent/srv/ObserveScene"
T_TOOL_CATALOGUE = "solarian_agent/srv/ToolCatalogue"
T_ADVANCE_GENERATION = "solarian_agent/srv/AdvanceGeneration"
SKILL_EVENTS = "skills/events"
SKILL_CONCLUDE = "skills/conclude"
T_CONCLUDE = "solarian_agent/srv/ConcludeAction"
T_SIM_TRUTH = "solarian_agent/msg/SimTruth"
T_SIM_RESET = "solarian_agent/srv/SimReset"
T_SIM_INJECT_FAULT = "solarian_agent/srv/InjectFault"
