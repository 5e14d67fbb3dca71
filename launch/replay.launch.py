"""Replay a recorded bag into the monitor to evaluate its questions offline: ros2 bag play
(--clock) of the images, joint_states and skills/events, a skills node for the tool catalogue
(the monitor questions) and the monitor on sim time; record:=true keeps its verdicts.

    ros2 launch solarian_agent replay.launch.py bag:=solarian_20260101_120000

Arguments: see solarian_agent.ros.launch_plan.REPLAY_ARGS (documented in docs/ros.md).
"""

from solarian_agent.ros import launch_plan


def generate_launch_description():
    return launch_plan.launch_description("replay", __file__)
