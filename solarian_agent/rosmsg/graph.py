"""The ROS 2 node graph as data, without ROS: every node's endpoints with names, types and QoS.

The node shells (``solarian_agent.ros.*_node``) create exactly the endpoints declared here (the
bridge reads these specs), and the launch files start the nodes listed by
:mod:`solarian_agent.ros.launch_plan`, so the graph contract test can check, without ROS, that
every subscription has a publisher of the same type with compatible QoS, every service and
action client has a server, and the names are those of :mod:`solarian_agent.core.names` that
the in-process run uses.

Endpoint kinds, seen from the node: ``publisher``, ``subscription``, ``service`` (the node
serves it), ``client``, ``action_server``, ``action_client``.  ``bridged`` endpoints are
forwarded between the node's private in-process Bus (where its core component lives) and
rclpy; the others are served by the shell itself (lifecycle, e-stop, the chat client).

QoS: the core's :class:`~solarian_agent.core.transport.QoS` (depth, reliable / best effort,
volatile / transient local), mapped 1:1 onto rclpy profiles with KEEP_LAST history.  Camera
images are best effort (sensor data) and so are their subscriptions; latched topics (agent
state, camera_info, the generation) are transient local.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..core import names
from ..core.transport import LATCHED, SENSOR_DATA, QoS
from . import convert as cv
from .bag_read import COMPRESSED_SUFFIX

KINDS = ("publisher", "subscription", "service", "client", "action_server", "action_client")

RELIABLE = QoS(depth=10)  # reliable, volatile, keep last 10 (rclpy's default profile)
LATEST = QoS(depth=1)
SKILL_EVENTS_QOS = QoS(depth=200)
VERDICTS_QOS = QoS(depth=100)
OPERATOR_QOS = QoS(depth=100)

# names the package adds to core.names for the graph only (the arm's lifecycle extras)
SET_TORQUE = "set_torque"
T_SIM_TRUTH = cv.T_SIM_TRUTH
T_SIM_RESET = cv.T_SIM_RESET
T_INJECT_FAULT = cv.T_INJECT_FAULT
T_SEED_TRACKER = cv.T_SEED_TRACKER
T_SET_BOOL = cv.T_SET_BOOL

# topics an operator's tool publishes (the chat client; a panel or teleop may too): a launch
# graph need not contain their publisher, the package must have one.
EXTERNAL_INPUTS: dict[str, str] = {
    names.OPERATOR_EVENTS: "the operator's tools (chat client and panel: pause, takeover)",
}

# topics a node listens to only in case someone publishes them: a graph without their
# publisher is complete (the skills node without a planner, as replay.launch.py starts it).
OPTIONAL_INPUTS: dict[str, str] = {
    names.AGENT_HEARTBEAT: "the planner, when one runs (its watchdog arms on the first beat)",
    names.NODES_HEARTBEAT: "the graph's other nodes; a planner alone watches none",
    names.DIAGNOSTICS: "the arm node on a real arm (the planner says a slowed arm; the "
                       "simulators publish none)",
    names.ARM_TRAJECTORY: "another ROS stack driving the arm through the command gate (a "
                          "MoveIt plan, a teleop node, a script): source = external",
    names.ESTOP_REQUEST: "an e-stop with its reason, from any ROS node",
    names.ARM_GATE: "the arm driver's command gate (the holder, for agent/state)",
}

DEFAULT_SIM_CAMERAS = ("overhead", "wrist")

# the one absolute name: ROS time (use_sim_time) listens on /clock whatever the namespace
CLOCK = "/clock"
T_CLOCK = "rosgraph_msgs/msg/Clock"
CLOCK_QOS = QoS(depth=1, best_effort=True)  # as rclpy's TimeSource subscribes to it
GLOBAL_NAMES = (CLOCK,)


@dataclass(frozen=True)
class Endpoint:
    kind: str
    name: str
    type: str
    qos: QoS | None = None
    bridged: bool = True

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"endpoint kind {self.kind!r} is not one of {KINDS}")
        if self.name.startswith("/") and self.name not in GLOBAL_NAMES:
            raise ValueError(f"endpoint {self.name!r}: names are relative so namespaces apply")
        if self.kind in ("publisher", "subscription") and self.qos is None:
            raise ValueError(f"topic endpoint {self.name!r} needs a QoS")


@dataclass(frozen=True)
class NodeSpec:
    executable: str
    name: str
    endpoints: tuple[Endpoint, ...]
    lifecycle: bool = False
    description: str = ""
    parameters: dict[str, str] = field(default_factory=dict)  # name -> documentation

    def of(self, kind: str) -> list[Endpoint]:
        return [e for e in self.endpoints if e.kind == kind]


def _pub(name: str, t: str, qos: QoS, bridged: bool = True) -> Endpoint:
    return Endpoint("publisher", name, t, qos, bridged)


def _sub(name: str, t: str, qos: QoS, bridged: bool = True) -> Endpoint:
    return Endpoint("subscription", name, t, qos, bridged)


def _srv(name: str, t: str, bridged: bool = True) -> Endpoint:
    return Endpoint("service", name, t, None, bridged)


def _cli(name: str, t: str, bridged: bool = True) -> Endpoint:
    return Endpoint("client", name, t, None, bridged)


def _beat() -> Endpoint:
    """A node's liveness beat (core/liveness.py): ``ros.common.run`` beats for every node
    whose spec has it, and the planner watches them."""
    return _pub(names.NODES_HEARTBEAT, names.T_HEARTBEAT, RELIABLE)


def _camera_pubs(cameras: Iterable[str]) -> list[Endpoint]:
    out = []
    for c in cameras:
        out.append(_pub(names.image_topic(c), names.T_IMAGE, SENSOR_DATA))
        out.append(_pub(names.camera_info_topic(c), names.T_CAMERA_INFO, LATCHED))
    return out


def _image_subs(cameras: Iterable[str]) -> list[Endpoint]:
    return [_sub(names.image_topic(c), names.T_IMAGE, SENSOR_DATA) for c in cameras]


COMMON_PARAMETERS = {
    "config_file": "YAML file with the agent: block (config/controller.yaml); validated as in "
                   "the core",
    "cameras": "camera names (default: agent.cameras of the config file)",
    "control_period_s": "the node's loop period (default: agent.control_period_s)",
}


# ------------------------------------------------------------------------------------------
# the nodes
# ------------------------------------------------------------------------------------------
def camera_node(camera: str) -> NodeSpec:
    return NodeSpec(
        "camera_node", f"camera_{camera}", (*_camera_pubs([camera]), _beat()),
        description="One camera (OpenCV backend): image_raw (sensor-data QoS) and camera_info.",
        parameters={"camera": "the camera's name (topic prefix)",
                    "source": "device index, /dev/video* path or a video file",
                    "width": "capture width (0 = the device's)",
                    "height": "capture height (0 = the device's)",
                    "fps": "capture rate (0 = the device's)", "frame_id": "TF frame",
                    "k": "3x3 intrinsics, row-major, 9 doubles (else a 60 degree guess)",
                    "d": "distortion coefficients (plumb_bob), doubles",
                    "calibration_file": "the camera's calibration YAML (K, D, size)"})


def calibrate_camera_node(camera: str = "overhead") -> NodeSpec:
    """The touch calibration against a running robot graph (a tool, not a launched node)."""
    return NodeSpec(
        "calibrate_camera", "calibrate_camera",
        (_sub(names.JOINT_STATES, names.T_JOINT_STATE, RELIABLE),
         _sub(names.image_topic(camera), names.T_IMAGE, SENSOR_DATA)),
        description="Touch calibration of a camera's pose against the running graph: the "
                    "tool point from joint_states, one frame from <camera>/image_raw.")


def gate_endpoints() -> tuple[Endpoint, ...]:
    """The command gate on every arm driver (arm/gate_io.py): the holder, latched; the
    standard trajectory input; an e-stop with its reason."""
    return (_pub(names.ARM_GATE, names.T_STRING, LATCHED),
            # a deeper queue than most: a stack may send trajectories in a burst, and a refused
            # one must be counted, not dropped unseen
            _sub(names.ARM_TRAJECTORY, names.T_JOINT_TRAJECTORY, QoS(depth=100)),
            _sub(names.ESTOP_REQUEST, names.T_STRING, RELIABLE))


def arm_node() -> NodeSpec:
    return NodeSpec(
        "arm_node", "arm",
        (
            _pub(names.JOINT_STATES, names.T_JOINT_STATE, RELIABLE),
            _pub(names.DIAGNOSTICS, names.T_DIAGNOSTICS, RELIABLE),
            _sub(names.JOINT_COMMANDS, names.T_JOINT_COMMAND, RELIABLE),
            _pub(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT, RELIABLE),
            _srv(names.ESTOP, names.T_TRIGGER),
            _srv(names.ESTOP_RESET, names.T_TRIGGER),
            *gate_endpoints(),
            _srv(SET_TORQUE, T_SET_BOOL),
            _beat(),
        ),
        lifecycle=True,
        description="The SO-101 hardware interface (Feetech bus), a lifecycle node: configure "
                    "opens the bus and reads the calibration, activate enables torque and starts "
                    "the control loop, deactivate holds, an error goes safe (e-stop latched).",
        parameters={"arm_config": "config/arm_so101.yaml (port, rate, calibration)",
                    "port": "serial port (overrides the YAML)",
                    "command_timeout_s": "the command watchdog (hold when no command arrives)",
                    "estop_action": "hold | torque_off", "simulated_bus": "use the simulated "
                    "servo bus on a pseudo-terminal (tests)"})


def sim_node(cameras: Sequence[str] = DEFAULT_SIM_CAMERAS) -> NodeSpec:
    return NodeSpec(
        "sim_node", "sim_world",
        (
            _pub(names.JOINT_STATES, names.T_JOINT_STATE, RELIABLE),
            *_camera_pubs(cameras),
            _pub(names.SIM_TRUTH, T_SIM_TRUTH, LATCHED),
            _beat(),
            _sub(names.JOINT_COMMANDS, names.T_JOINT_COMMAND, RELIABLE),
            # the simulated arm's e-stop, as on the real one; tripping it is announced as an
            # operator event so the skills stop and no new one starts until the reset
            _pub(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT, RELIABLE),
            _srv(names.ESTOP, names.T_TRIGGER),
            _srv(names.ESTOP_RESET, names.T_TRIGGER),
            *gate_endpoints(),
            _pub(names.DIAGNOSTICS, names.T_DIAGNOSTICS, RELIABLE),
            _srv(names.SIM_RESET, T_SIM_RESET),
            _srv(names.SIM_INJECT_FAULT, T_INJECT_FAULT),
        ),
        description="The tabletop simulator in place of the camera and arm drivers (same topic "
                    "names), plus ground truth, reset and fault injection.",
        parameters={"seed": "the first episode's layout seed",
                    "grasp_fail_p": "probability a grasp fails (injected fault)",
                    "slip_p": "probability a held object slips"})


def skills_node(tools: Sequence[str], cameras: Sequence[str]) -> NodeSpec:
    eps: list[Endpoint] = [Endpoint("action_server", names.skill_action(t),
                                    names.T_SKILL_ACTION) for t in tools]
    eps += [
        _srv(names.TOOL_CATALOGUE, names.T_TOOL_CATALOGUE),
        _srv(names.EXECUTOR_ADVANCE, names.T_ADVANCE_GENERATION),
        _srv(names.SKILL_CONCLUDE, names.T_CONCLUDE),
        _srv(names.SKILL_APPROVE, names.T_AGENT_COMMAND),
        _srv(names.TRACKER_SEED, T_SEED_TRACKER),
        _pub(names.SKILL_EVENTS, names.T_AGENT_EVENT, SKILL_EVENTS_QOS),
        _pub(names.EXECUTOR_GENERATION, names.T_GENERATION, LATCHED),
        _pub(names.JOINT_COMMANDS, names.T_JOINT_COMMAND, RELIABLE),
        _sub(names.JOINT_STATES, names.T_JOINT_STATE, LATEST),
        _sub(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT, OPERATOR_QOS),
        _sub(names.AGENT_HEARTBEAT, names.T_HEARTBEAT, LATEST),
        *_image_subs(cameras),
        _beat(),
    ]
    return NodeSpec(
        "skills_node", "skills", tuple(eps),
        description="The skill executor: one action server per tool (skills/<tool>), one goal "
                    "at a time per arm, the generation checked on every goal, cancels honoured "
                    "at the next control tick; the tool catalogue and tracker seeding.",
        parameters={"tool_set": "tidy (the tidy-up tools) | toy (test tools)",
                    "pick": "pick_object: scripted | policy (the learned pick policy)",
                    "planner_timeout_s": "stop the running skills (the arm holds) when the "
                                         "planner's agent/heartbeat has been missing this "
                                         "long (0 = never)",
                    "service_timeout_s": "the longest a service call waits"})


def monitor_node(cameras: Sequence[str]) -> NodeSpec:
    return NodeSpec(
        "monitor_node", "monitor",
        (
            _pub(names.MONITOR_VERDICTS, names.T_MONITOR_VERDICT, VERDICTS_QOS),
            *_image_subs(cameras),
            _sub(names.JOINT_STATES, names.T_JOINT_STATE, LATEST),
            _sub(names.SKILL_EVENTS, names.T_AGENT_EVENT, SKILL_EVENTS_QOS),
            _cli(names.TOOL_CATALOGUE, names.T_TOOL_CATALOGUE),
            _beat(),
        ),
        description="The monitor engine: samples the cameras and joint states at its period, "
                    "judges running actions with the vision model, publishes verdicts.")


def planner_node(cameras: Sequence[str], tools: Sequence[str]) -> NodeSpec:
    eps: list[Endpoint] = [
        _pub(names.AGENT_STATE, names.T_AGENT_STATE, LATCHED),
        _pub(names.AGENT_EVENTS, names.T_AGENT_EVENT, SKILL_EVENTS_QOS),
        _pub(names.AGENT_VIEW, names.T_IMAGE, LATCHED),
        _pub(names.AGENT_MARKERS, names.T_MARKERS, LATCHED),
        _pub(names.AGENT_HEARTBEAT, names.T_HEARTBEAT, LATEST),
        *_image_subs(cameras),
        _sub(names.JOINT_STATES, names.T_JOINT_STATE, LATEST),
        _sub(names.SKILL_EVENTS, names.T_AGENT_EVENT, SKILL_EVENTS_QOS),
        _sub(names.MONITOR_VERDICTS, names.T_MONITOR_VERDICT, VERDICTS_QOS),
        _sub(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT, OPERATOR_QOS),
        _sub(names.EXECUTOR_GENERATION, names.T_GENERATION, LATCHED),
        _sub(names.DIAGNOSTICS, names.T_DIAGNOSTICS, LATEST),
        _sub(names.ARM_GATE, names.T_STRING, LATCHED),
        _sub(names.NODES_HEARTBEAT, names.T_HEARTBEAT, RELIABLE),
        _srv(names.AGENT_MESSAGE, names.T_AGENT_COMMAND),
        _srv(names.AGENT_CANCEL, names.T_AGENT_COMMAND),
        _srv(names.AGENT_RESET, names.T_AGENT_COMMAND),
        _srv(names.OBSERVE_SCENE, names.T_OBSERVE_SCENE),
        _cli(names.TOOL_CATALOGUE, names.T_TOOL_CATALOGUE),
        _cli(names.EXECUTOR_ADVANCE, names.T_ADVANCE_GENERATION),
        _cli(names.SKILL_CONCLUDE, names.T_CONCLUDE),
    ]
    eps += [Endpoint("action_client", names.skill_action(t), names.T_SKILL_ACTION)
            for t in tools]
    return NodeSpec(
        "planner_node", "planner", tuple(eps),
        description="The planner harness with its model: chat and operator input, agent state "
                    "(transient local), events, agent/view, rviz markers of the plan's targets; "
                    "sends skill goals carrying the generation.",
        parameters={"tools": "skill tools to create action clients for (default: ask "
                              "skills/catalogue at start-up)",
                    "log_root": "episode log directory ('' = no logs)",
                    "catalogue_timeout_s": "how long to wait for skills/catalogue at start-up"})


def _ui_endpoints(cameras: Sequence[str]) -> tuple[Endpoint, ...]:
    """What an operator's front end reads and calls (:class:`~solarian_agent.ui.link.AgentLink`
    over ROS, ``ros/ui_link.py``): bridged onto the link's private Bus, except its operator
    events, published straight to the graph (a bridged publisher and subscription of the same
    topic would loop the link's own messages back)."""
    return (
        _sub(names.AGENT_STATE, names.T_AGENT_STATE, LATCHED),
        _sub(names.AGENT_EVENTS, names.T_AGENT_EVENT, SKILL_EVENTS_QOS),
        _sub(names.MONITOR_VERDICTS, names.T_MONITOR_VERDICT, VERDICTS_QOS),
        _sub(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT, OPERATOR_QOS),
        _sub(names.ARM_GATE, names.T_STRING, LATCHED),
        *_image_subs(cameras),
        *((_sub(names.AGENT_VIEW, names.T_IMAGE, LATCHED),) if cameras else ()),
        _cli(names.AGENT_MESSAGE, names.T_AGENT_COMMAND),
        _cli(names.AGENT_CANCEL, names.T_AGENT_COMMAND),
        _cli(names.AGENT_RESET, names.T_AGENT_COMMAND),
        _cli(names.ESTOP, names.T_TRIGGER),
        _cli(names.ESTOP_RESET, names.T_TRIGGER),
        _cli(names.SKILL_APPROVE, names.T_AGENT_COMMAND),
        _pub(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT, OPERATOR_QOS, bridged=False),
    )


def chat_node() -> NodeSpec:
    return NodeSpec(
        "chat", "chat", _ui_endpoints(()),
        description="A terminal chat client against the running graph: type a task; /cancel, "
                    "/reset, /pause, /resume, /takeover [note], /estop, /estop-reset, /state, "
                    "/help, /quit.")


def panel_node(cameras: Sequence[str] = DEFAULT_SIM_CAMERAS) -> NodeSpec:
    return NodeSpec(
        "panel", "panel", _ui_endpoints(cameras),
        description="The operator panel (a web page) attached to the running graph: plan, "
                    "conversation, cameras and agent/view; Pause / Resume, Take over, Cancel, "
                    "Reset and E-STOP.",
        parameters={"host": "address to listen on (beyond loopback an access token is "
                            "needed: $SOLARIAN_PANEL_TOKEN, else one is generated and logged)",
                    "port": "TCP port (0 = any free one)",
                    "allow_hosts": "more Host names the panel answers to, comma separated",
                    "service_timeout_s": "the longest a command waits for its service",
                    "profile": "the robot profile whose readiness the page shows ('' = a "
                               "simulator)"})


def played_topic(topic: str) -> str:
    """The graph topic a bag topic is played on (compressed images on their raw topic)."""
    return topic[: -len(COMPRESSED_SUFFIX)] if topic.endswith(COMPRESSED_SUFFIX) else topic


def replay_topic(topic: str) -> tuple[str, QoS]:
    """The type and QoS the graph publishes a replayable topic with (KeyError: not one)."""
    if topic.endswith("/image_raw/compressed"):
        return T_COMPRESSED_IMAGE, SENSOR_DATA
    if topic.endswith("/image_raw"):
        return names.T_IMAGE, SENSOR_DATA
    for name, typename, q in replay_topics(()):
        if name == topic:
            return typename, q
    raise KeyError(topic)


def bag_player_node(topics: Sequence[str], publish_clock: bool = True) -> NodeSpec:
    """The package's ``bag_player``: the bag's topics, compressed images decoded onto their
    raw topic, and ``/clock``."""
    eps: dict[str, Endpoint] = {}
    for t in topics:
        out = played_topic(t)
        typename, q = replay_topic(out)
        eps.setdefault(out, _pub(out, typename, q))
    if publish_clock:
        eps[CLOCK] = _pub(CLOCK, T_CLOCK, CLOCK_QOS)
    return NodeSpec("bag_player", "bag_player", tuple(eps.values()),
                    description="Plays a recorded bag (rosbags) at its recorded times: compressed "
                                "images decoded onto their raw topic, /clock for use_sim_time.",
                    parameters={"bag": "the bag directory", "rate": "playback rate",
                                "delay": "seconds before playback starts",
                                "topics": "topics to play, comma separated ('' = the replay's)",
                                "clock": "publish /clock"})


T_COMPRESSED_IMAGE = "sensor_msgs/msg/CompressedImage"


def replay_topics(cameras: Sequence[str]) -> list[tuple[str, str, QoS]]:
    """What replay.launch.py plays into the monitor (and how the graph published it): raw
    images (a graph recording) and compressed ones (the embedded recorder's, republished raw
    by image_transport), the readings and the skill events."""
    out = [(names.image_topic(c), names.T_IMAGE, SENSOR_DATA) for c in cameras]
    out += [(names.image_topic(c) + "/compressed", T_COMPRESSED_IMAGE, SENSOR_DATA)
            for c in cameras]
    out += [(names.JOINT_STATES, names.T_JOINT_STATE, RELIABLE),
            (names.SKILL_EVENTS, names.T_AGENT_EVENT, SKILL_EVENTS_QOS)]
    return out


SPEC_BUILDERS = {
    "camera_node": camera_node, "arm_node": arm_node, "sim_node": sim_node,
    "skills_node": skills_node, "monitor_node": monitor_node, "planner_node": planner_node,
    "chat": chat_node,
    "panel": panel_node,
    "bag_player": bag_player_node,
    "calibrate_camera": calibrate_camera_node,
}
EXECUTABLES = tuple(SPEC_BUILDERS)


def recorded_topics(cameras: Sequence[str], sim: bool) -> list[str]:
    """Every topic the graph publishes (what record:=true writes to the bag)."""
    topics = [names.JOINT_STATES, names.JOINT_COMMANDS, names.SKILL_EVENTS,
              names.EXECUTOR_GENERATION, names.MONITOR_VERDICTS, names.AGENT_STATE,
              names.AGENT_EVENTS, names.AGENT_VIEW, names.AGENT_MARKERS, names.OPERATOR_EVENTS,
              names.AGENT_HEARTBEAT, names.NODES_HEARTBEAT]
    for c in cameras:
        topics += [names.image_topic(c), names.camera_info_topic(c)]
    # the arm's diagnostics (the simulators' carry the command gate's refusal counts) and the
    # gate's holder: who held the arm and what was refused is on the episode's record
    topics += [names.SIM_TRUTH, names.DIAGNOSTICS] if sim else [names.DIAGNOSTICS]
    topics.append(names.ARM_GATE)
    return topics


def expand(name: str, namespace: str = "") -> str:
    """A relative ROS name in a namespace -> its fully qualified name."""
    if name.startswith("/"):
        return name
    ns = "/" + namespace.strip("/") if namespace.strip("/") else ""
    return f"{ns}/{name}"



__all__ = ["COMPRESSED_SUFFIX", "EXECUTABLES", "EXTERNAL_INPUTS", "LATCHED", "LATEST",
           "OPTIONAL_INPUTS", "RELIABLE",
           "SENSOR_DATA", "Endpoint", "NodeSpec",
           "SPEC_BUILDERS", "arm_node", "bag_player_node", "calibrate_camera_node",
           "camera_node", "chat_node", "panel_node",
           "expand", "monitor_node", "planner_node", "played_topic",
           "recorded_topics", "replay_topic", "replay_topics", "sim_node",
           "skills_node"]
