"""The message conversions as the ROS side uses them: :mod:`solarian_agent.rosmsg.convert`
(core types <-> ROS messages, no rclpy) with both codecs, ``rosbags_codec`` and the node
shells' ``rclpy_codec`` (:mod:`.codec`)."""

from __future__ import annotations

from ..rosmsg.convert import (
    FROM_ROS,
    PKG,
    T_CLOCK,
    T_FEEDBACK,
    T_GOAL,
    T_INJECT_FAULT,
    T_RESULT,
    T_SEED_TRACKER,
    T_SET_BOOL,
    T_SIM_RESET,
    T_SIM_TRUTH,
    T_STRING,
    TO_ROS,
    Codec,
    ConvertError,
    from_ros,
    header,
    rosbags_codec,
    time_from_ros,
    time_to_ros,
    to_ros,
)
from .codec import rclpy_codec

__all__ = ["FROM_ROS", "PKG", "TO_ROS", "T_CLOCK", "T_FEEDBACK", "T_GOAL", "T_INJECT_FAULT",
           "T_RESULT", "T_SEED_TRACKER", "T_SET_BOOL", "T_SIM_RESET", "T_SIM_TRUTH", "T_STRING",
           "Codec", "ConvertError", "from_ros", "header", "rclpy_codec", "rosbags_codec",
           "time_from_ros", "time_to_ros", "to_ros"]
