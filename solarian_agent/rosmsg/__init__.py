"""solarian_agent.rosmsg: ROS messages as data, without rclpy.

* :mod:`.interfaces` — the package's msg/ srv/ action/ definitions, registered with rosbags;
* :mod:`.codec` — ROS type names resolved to ``rosbags`` message classes, and built;
* :mod:`.convert` — core types <-> ROS messages, against duck-typed message classes (topics:
  :mod:`.convert_topics`, :mod:`.convert_markers`; services: :mod:`.convert_services`);
* :mod:`.bag_read` — a rosbag2 bag's messages as the core's values.

Everything here imports without ROS, so the ROS-free front ends (``solarian_agent.ui``: the
episode viewer reads bags) use it as well as the ROS graph (``solarian_agent.ros``, which adds
the rclpy flavour of the codec and writes bags).
"""
