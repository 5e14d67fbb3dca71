"""The simulated graph: sim world + skills + monitor + planner + robot_state_publisher, with
optional rviz (rviz:=true) and an MCAP bag of every topic (record:=true).

    ros2 launch solarian_agent sim.launch.py [rviz:=true] [record:=true] [seed:=3]

Arguments: see solarian_agent.ros.launch_plan.SIM_ARGS (documented in docs/ros.md).
"""

from solarian_agent.ros import launch_plan


def generate_launch_description():
    return launch_plan.launch_description("sim", __file__)
