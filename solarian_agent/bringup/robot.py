"""What bring-up needs of a robot, and the MuJoCo simulator as one.

A :class:`BringupRobot` reads its joints, moves its arm and grabs camera frames; bring-up's
steps use nothing else, so the same steps run on the real arm and on the simulator.  The
simulator also knows the truth (:class:`SimTruth`): the cameras' real intrinsics and poses,
where the board and the marks lie, where the tool point is.  Bring-up never reads it to
calibrate; it is only what the figures in the report are measured against.

:class:`MujocoBringupRobot` is the MuJoCo tabletop cleared for calibration: a ChArUco board
and four marks printed and laid on the table, the wrist camera as mounted on the gripper (the
URDF's ``wrist_camera_optical``), and the board held up to the overhead camera on request, as
a person holds it for the intrinsics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from solarian_agent.arm.kinematics import ArmModel
from solarian_agent.hw.camera.boards import BoardSpec, draw

from .marks import MARK_IDS, draw_mark

DEFAULT_BOARD = "charuco:7x5:30:22"
BOARD_PLACE = (0.22, 0.08, math.radians(11.5))  # x, y (m), yaw (rad) on the table
# where the board is laid, one after another, for the overhead camera's pose
BOARD_PLACES: tuple[tuple[float, float, float], ...] = (
    BOARD_PLACE, (0.10, -0.14, math.radians(-10.0)), (0.12, 0.26, 0.0))
BOARD_LIFT_M = 0.0008  # above the marks: a board laid over a mark hides it
MARK_PLACES: tuple[tuple[float, float], ...] = ((0.14, -0.16), (0.25, -0.17), (0.13, 0.18),
                                                (0.24, 0.19))
MOVE_SPEED_RAD_S = 0.8  # bring-up moves the arm slowly: a person is beside it


class BringupRobot(Protocol):
    arm: ArmModel

    @property
    def cameras(self) -> tuple[str, ...]: ...

    def joints(self) -> np.ndarray:
        """The measured joints (6, rad: the arm's five and the gripper)."""

    def move(self, q5: np.ndarray, timeout_s: float = 15.0) -> bool:
        """Move the arm's five joints to ``q5`` slowly; True when it got there."""

    def grab(self, camera: str) -> np.ndarray:
        """A new BGR frame of ``camera``."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class SimTruth:
    k: dict[str, tuple[float, ...]]  # camera -> its real K
    base_from_camera: dict[str, np.ndarray]  # fixed cameras
    gripper_from_camera: dict[str, np.ndarray]  # cameras on the gripper
    base_from_board: np.ndarray
    marks: dict[int, np.ndarray] = field(default_factory=dict)  # mark id -> centre (base)


class MujocoBringupRobot:
    """The MuJoCo tabletop as the robot (see the module docstring)."""

    def __init__(self, arm: ArmModel | None = None, board: BoardSpec | None = None,
                 seed: int = 0, dt: float = 0.02) -> None:
        from solarian_agent.sim.camera import CAMERA_SPECS
        from solarian_agent.sim.mujoco.prints import TablePrint, face_up_pose
        from solarian_agent.sim.mujoco.render import MujocoRenderer
        from solarian_agent.sim.mujoco.world import MujocoWorld

        self.arm = arm or ArmModel.default()
        self.board = board or BoardSpec.parse(DEFAULT_BOARD)
        self.dt = dt
        img = draw(self.board, px_per_square=80)
        x, y, yaw = BOARD_PLACE
        self.board_pose = face_up_pose(x, y, yaw, BOARD_LIFT_M)
        prints = [TablePrint("board", img.image, img.px_per_m, img.origin_px, self.board_pose)]
        marks: dict[int, np.ndarray] = {}
        for mid, (mx, my) in zip(MARK_IDS, MARK_PLACES, strict=True):
            m = draw_mark(mid)
            pose = face_up_pose(mx, my)
            prints.append(TablePrint(f"mark{mid}", m.image, m.px_per_m, m.origin_px, pose))
            marks[mid] = pose[:3, 3].copy()
        self.world = MujocoWorld(self.arm, seed=seed, prints=tuple(prints))
        self.board_places: dict[int, np.ndarray] = {}  # truth: where the board was laid
        self.world.clear_table()
        self.renderer = MujocoRenderer(self.arm, wrist_close_up=False)
        q = self.world.q
        g = self.arm.frame_pose(q, "gripper_link")
        specs = CAMERA_SPECS
        self.truth = SimTruth(
            k={n: specs[n].k for n in specs},
            base_from_camera={"overhead": self.arm.frame_pose(q, specs["overhead"].frame)},
            gripper_from_camera={"wrist": np.linalg.inv(g) @ self.arm.frame_pose(
                q, specs["wrist"].frame)},
            base_from_board=self.board_pose.copy(), marks=marks)

    @property
    def cameras(self) -> tuple[str, ...]:
        return ("overhead", "wrist")

    def joints(self) -> np.ndarray:
        return np.array(self.world.q, float)

    def tip(self) -> np.ndarray:
        """Where the tool point really is (the physics' site, not the kinematics)."""
        return np.array(self.world.data.site_xpos[self.world._tip], float)

    def move(self, q5: np.ndarray, timeout_s: float = 15.0) -> bool:
        target = np.append(np.asarray(q5, float)[:5], self.world.q[5])
        self.world.command(target, MOVE_SPEED_RAD_S)
        for _ in range(int(timeout_s / self.dt)):
            self.world.step(self.dt)
            if self.world.settled():
                return True
        return False

    def grab(self, camera: str) -> np.ndarray:
        return self.renderer.render(camera, self.world)

    def lay(self, index: int, total: int) -> None:
        """The board laid at its ``index``-th place (:data:`BOARD_PLACES`)."""
        from solarian_agent.sim.mujoco.prints import face_up_pose

        x, y, yaw = BOARD_PLACES[index % len(BOARD_PLACES)]
        pose = face_up_pose(x, y, yaw, BOARD_LIFT_M)
        self.world.set_print_pose("board", pose)
        self.board_places[index] = pose

    def hold_board(self, pose: np.ndarray | None) -> None:
        """The board held at ``pose`` (its frame in the base frame), or laid back down."""
        self.world.set_print_pose("board", self.board_pose if pose is None else pose)

    def close(self) -> None:
        self.renderer.close()




class SimBoardHolder:
    """The simulator's hand: holds the board up to a fixed camera at ``n`` poses spread over
    its image, 45-60 cm away and tilted 30-50 degrees (steep views pin the focal length and
    the image centre), as a person does for the intrinsics."""

    def __init__(self, robot: MujocoBringupRobot, camera: str = "overhead", seed: int = 0
                 ) -> None:
        from solarian_agent.sim.camera import CAMERA_SPECS

        self.robot = robot
        self.spec = CAMERA_SPECS[camera]
        self.cam = robot.truth.base_from_camera[camera]
        self.rng = np.random.default_rng(seed)

    def present(self, index: int, total: int) -> None:
        import cv2

        s, b = self.spec, self.robot.board
        cols = int(math.ceil(math.sqrt(total)))
        gx, gy = index % cols, index // cols
        rows = int(math.ceil(total / cols))
        u = s.width * (0.2 + 0.6 * gx / max(cols - 1, 1))
        v = s.height * (0.2 + 0.6 * gy / max(rows - 1, 1))
        ray = np.array([(u - s.cx) / s.fx, (v - s.cy) / s.fy, 1.0])
        d = 0.45 + 0.15 * self.rng.random()
        centre = self.cam[:3, :3] @ (d * ray / np.linalg.norm(ray)) + self.cam[:3, 3]
        tilt_axis = np.array([math.cos(a := self.rng.uniform(0, 2 * math.pi)), math.sin(a), 0])
        tilt, _ = cv2.Rodrigues(tilt_axis * math.radians(self.rng.uniform(30.0, 50.0)))
        rot = self.cam[:3, :3] @ tilt
        half = np.array([b.cols * b.square_m / 2, b.rows * b.square_m / 2, 0.0])
        pose = np.eye(4)
        pose[:3, :3], pose[:3, 3] = rot, centre - rot @ half
        self.robot.hold_board(pose)

    def put_down(self) -> None:
        self.robot.hold_board(None)


__all__ = ["BOARD_PLACE", "BOARD_PLACES", "DEFAULT_BOARD", "MARK_PLACES", "BringupRobot",
           "MujocoBringupRobot", "SimBoardHolder", "SimTruth"]
