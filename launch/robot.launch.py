"""The real robot: one camera_node per camera + the arm hardware interface (lifecycle) instead of
the sim world, then skills + monitor + planner + robot_state_publisher, optional rviz / bag.

    ros2 launch solarian_agent robot.launch.py cameras:=overhead=0,wrist=2 port:=/dev/ttyACM0

Arguments: see solarian_agent.ros.launch_plan.ROBOT_ARGS (documented in docs/ros.md).
"""

from solarian_agent.ros import launch_plan


def generate_launch_description():
    return launch_plan.launch_description("robot", __file__)
