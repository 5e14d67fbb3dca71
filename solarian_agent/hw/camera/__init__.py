"""Camera drivers: ``OpenCVCamera`` for V4L2 / USB cameras and video files."""

from solarian_agent.hw.camera.opencv import (
    CameraFrame,
    CameraSettings,
    OpenCVCamera,
    OpenCVCameraConfig,
)

__all__ = ["CameraFrame", "CameraSettings", "OpenCVCamera", "OpenCVCameraConfig"]
