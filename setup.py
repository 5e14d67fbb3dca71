"""pip install of solarian_agent without ROS (colcon uses package.xml + CMakeLists.txt)."""

from glob import glob

from setuptools import find_packages, setup

setup(
    name="solarian_agent",
    version="0.1.0",
    description="An LLM robot controller for ROS 2 servo arms with cameras (SO-101 class)",
    packages=find_packages(include=["solarian_agent", "solarian_agent.*"]),
    python_requires=">=3.10",
    include_package_data=True,
    package_data={"solarian_agent": ["py.typed", "data/*", "data/**/*"]},
    data_files=[
        ("share/solarian_agent/config", glob("config/*.yaml") + glob("config/*.rviz")
         + glob("config/*.xml")),
        ("share/solarian_agent/config/skills", glob("config/skills/*.yaml")),
        ("share/solarian_agent/launch", glob("launch/*.py")),
        ("share/solarian_agent/urdf", glob("urdf/*")),
        ("share/solarian_agent/msg", glob("msg/*.msg")),
        ("share/solarian_agent/srv", glob("srv/*.srv")),
        ("share/solarian_agent/action", glob("action/*.action")),
    ],
    install_requires=[
        "numpy>=1.24",
        "pyyaml>=6",
        "jsonschema>=4.17",
        "opencv-python-headless>=4.8",
        "pin>=2.7",
        "rosbags>=0.10",
        "mcap>=1.1",
        "zstandard>=0.22",
        "pyserial>=3.5",
        # the 3D simulator backend (--sim mujoco); imported only when asked for
        "mujoco>=3.3",
        # learned-policy skills: the onnx backend runs the shipped pick policy; onnx builds
        # and checks policy graphs (scripts/train_pick_policy.py, the tests)
        "onnxruntime>=1.17",
        "onnx>=1.15",
    ],
    extras_require={
        "agent": ["anthropic>=0.40", "openai>=1.50"],
        "web": ["starlette>=0.37", "uvicorn>=0.30"],
        # the lerobot policy backend (LeRobot pretrained_model directories; brings torch)
        "lerobot": ["lerobot>=0.3"],
        "dev": [
            "anthropic>=0.40",
            "openai>=1.50",
            "starlette>=0.37",
            "uvicorn>=0.30",
            "pytest>=8",
            "pytest-timeout>=2.2",
            "hypothesis>=6.100",
            "ruff>=0.5",
            "mypy>=1.10",
            "selenium>=4.20",
            "types-PyYAML",
            # `make mutate` (mutation testing; not part of `make test`)
            "mutmut>=3.3,<4",
        ],
    },
    entry_points={
        "console_scripts": [
            "solarian-agent = solarian_agent.cli:main",
            # ROS 2 node entry points (ros2 run uses the wrappers CMake installs instead)
            "solarian-camera-node = solarian_agent.ros.camera_node:main",
            "solarian-arm-node = solarian_agent.ros.arm_node:main",
            "solarian-sim-node = solarian_agent.ros.sim_node:main",
            "solarian-skills-node = solarian_agent.ros.skills_node:main",
            "solarian-monitor-node = solarian_agent.ros.monitor_node:main",
            "solarian-planner-node = solarian_agent.ros.planner_node:main",
            "solarian-chat = solarian_agent.ros.chat:main",
            "solarian-panel = solarian_agent.ros.panel:main",
            "solarian-bag-player = solarian_agent.ros.bag_player:main",
        ],
    },
)
