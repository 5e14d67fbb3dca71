"""solarian_agent.hw: hardware drivers with no ROS imports.

``feetech`` (the STS3215 servo bus and the SO-101 arm), ``camera`` (OpenCV cameras and video
files), ``teleop`` (keyboard jogging) and ``errors`` (the layer's exception hierarchy).  The
ROS node shells in ``solarian_agent.ros`` wrap these classes.
"""
