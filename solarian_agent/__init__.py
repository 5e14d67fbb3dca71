"""solarian_agent: an LLM robot controller for ROS 2 servo arms with cameras.

Only ``solarian_agent.ros`` imports rclpy; everything else runs without ROS.
"""

__version__ = "0.1.0"
