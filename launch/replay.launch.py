"""Replay a recorded bag into the monitor to evaluate its questions offline: ros2 bag play
(--clock) of the images, joint_states and skills/events, a skills node for the tool catalogue
(the monitor questions) and the monitor on sim time; record:=true keeps its verdicts.

    ros2 launch solarian_agent replay.launch.py bag:=solarian_20260101_120000

Arguments: see solarian_agent.ros.launch_plan.REPLAY_ARGS (documented in docs/ros.md).
"""

from pathlib import Path

from launch.actions import DeclareLaunchArgument, ExecuteProcess, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription
from solarian_agent.ros import launch_plan

KIND = "replay"


def _share() -> Path:
    try:
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory("solarian_agent"))
    except Exception:  # running from the source tree
        return Path(__file__).resolve().parent.parent


def _setup(context, *args, **kwargs):
    values = {a.name: LaunchConfiguration(a.name).perform(context)
              for a in launch_plan.LAUNCH_ARGS[KIND]}
    plan = launch_plan.PLANS[KIND](values, _share())
    return launch_plan.to_launch_actions(plan, values.get("namespace", ""), Node=Node,
                                         ExecuteProcess=ExecuteProcess)


def generate_launch_description():
    return LaunchDescription(
        [DeclareLaunchArgument(a.name, default_value=a.default, description=a.description)
         for a in launch_plan.LAUNCH_ARGS[KIND]]
        + [OpaqueFunction(function=_setup)])
