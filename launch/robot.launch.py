"""The real robot: one camera_node per camera + the arm hardware interface (lifecycle) instead of
the sim world, then skills + monitor + planner + robot_state_publisher, optional rviz / bag.

    ros2 launch solarian_agent robot.launch.py cameras:=overhead=0,wrist=2 port:=/dev/ttyACM0

Arguments: see solarian_agent.ros.launch_plan.ROBOT_ARGS (documented in docs/ros.md).
"""

from pathlib import Path

from launch.actions import DeclareLaunchArgument, ExecuteProcess, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription
from solarian_agent.ros import launch_plan

KIND = "robot"


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
