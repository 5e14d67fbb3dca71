"""solarian_agent.hw: hardware drivers with no ROS imports.

``feetech`` (the STS3215 servo bus, the SO-101 arm and its first-day tools: find-port,
setup-motors, ping, calibrate, import-lerobot, teleop), ``camera`` (OpenCV cameras and video
files, and the camera calibration: files, model, solvers, the calibrate-camera tool),
``teleop`` (keyboard jogging), ``leader`` (leader-arm teleop), ``tables`` (the tools' output)
and ``errors`` (the layer's exception hierarchy).  The ROS node shells in
``solarian_agent.ros`` wrap these classes.
"""
