"""solarian_agent.ros: the ROS 2 node graph around the ROS-free core.

ROS-free (import without rclpy; tested on any machine):

* :mod:`.codec` — the node shells' rclpy codec; the message definitions, the conversions core
  types <-> ROS messages, the graph's endpoints (names, types, QoS) and rosbag2 files live in
  :mod:`solarian_agent.rosmsg`, beside them, so the ROS-free front ends use them too;
* :mod:`.components` — what each node runs on its private in-process Bus;
* :mod:`.front_ends` — ``solarian-agent chat`` / ``panel`` with the link their ``--ros`` needs
  (this package imports :mod:`solarian_agent.ui`, never the other way);
* :mod:`.launch_plan` — what the launch files start; :mod:`.bag_play` — a bag played back.

rclpy (only here): :mod:`.bridge` (Bus <-> rclpy), :mod:`.common` (clock, parameters, run
loop), and the node executables ``camera_node``, ``arm_node``, ``sim_node``, ``skills_node``,
``monitor_node``, ``planner_node`` and ``chat``.  Nothing in this package is imported by
``solarian_agent/__init__.py``.
"""
