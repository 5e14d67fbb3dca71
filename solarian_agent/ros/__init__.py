"""solarian_agent.ros: the ROS 2 node graph around the ROS-free core.

ROS-free (import without rclpy; tested on any machine):

* :mod:`.interfaces`, :mod:`.convert` — the package's msg/ srv/ action/ definitions and the
  conversions core types <-> ROS messages, from :mod:`solarian_agent.rosmsg` (where they live,
  beside bag reading, for the ROS-free front ends too), with the node shells' rclpy codec;
* :mod:`.graph` — every node's endpoints (names, types, QoS) and the graph check;
* :mod:`.components` — what each node runs on its private in-process Bus;
* :mod:`.front_ends` — ``solarian-agent chat`` / ``panel`` with the link their ``--ros`` needs
  (this package imports :mod:`solarian_agent.ui`, never the other way);
* :mod:`.launch_plan` — what the launch files start;
* :mod:`.bag` — rosbag2 (MCAP) writer / reader built on rosbags.

rclpy (only here): :mod:`.bridge` (Bus <-> rclpy), :mod:`.common` (clock, parameters, run
loop), and the node executables ``camera_node``, ``arm_node``, ``sim_node``, ``skills_node``,
``monitor_node``, ``planner_node`` and ``chat``.  Nothing in this package is imported by
``solarian_agent/__init__.py``.
"""
