"""Calibration boards: what they are, finding them in an image, and drawing them for print.

Two kinds, both printed flat (measure the printed square with a ruler, not the file):

- ``chessboard``: ``cols`` x ``rows`` *inner* corners (a 9x6 board has 10x7 squares).  Its frame
  (OpenCV's): origin at an inner corner next to a black corner square, x along the first row of
  corners, y along the first column, z = x cross y (into the board: lying face up on the table,
  z points down).  Found with ``findChessboardCornersSB``; the corner order is made canonical
  (the same physical corner is always the origin), which needs a board whose ``cols + rows`` is
  odd (one side an even number of squares, the other odd) for the board-pose extrinsics.
- ``charuco``: ``cols`` x ``rows`` *squares* with ArUco markers of ``dictionary`` in the white
  squares.  Its frame: origin at the printed image's top-left outer corner, x to the right, y
  down the printed image, z into the board.  Corners are identified by the markers, so a board
  partly out of view still counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from solarian_agent.hw.errors import CalibrationError

KINDS = ("chessboard", "charuco")
DICTIONARIES = ("DICT_4X4_50", "DICT_4X4_100", "DICT_5X5_50", "DICT_5X5_100", "DICT_6X6_50",
                "DICT_6X6_250", "DICT_APRILTAG_36h11")


class BoardError(CalibrationError):
    """An invalid board description, or a board that cannot serve the requested use."""


@dataclass(frozen=True)
class BoardSpec:
    kind: str
    cols: int  # chessboard: inner corners along a row; charuco: squares along a row
    rows: int
    square_m: float
    marker_m: float = 0.0  # charuco only
    dictionary: str = "DICT_4X4_50"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise BoardError(f"board kind {self.kind!r} is not one of {', '.join(KINDS)}")
        least = 2 if self.kind == "chessboard" else 3
        if self.cols < least or self.rows < least:
            raise BoardError(f"a {self.kind} needs at least {least}x{least} "
                             f"{'inner corners' if self.kind == 'chessboard' else 'squares'}, "
                             f"got {self.cols}x{self.rows}")
        if not 0.001 <= self.square_m <= 1.0:
            raise BoardError(f"square size {self.square_m * 1000:g} mm is outside 1..1000 mm")
        if self.kind == "charuco":
            if not 0 < self.marker_m < self.square_m:
                raise BoardError(f"the ChArUco marker ({self.marker_m * 1000:g} mm) must be "
                                 f"smaller than the square ({self.square_m * 1000:g} mm)")
            if self.dictionary not in DICTIONARIES:
                raise BoardError(f"dictionary {self.dictionary!r} is not one of "
                                 f"{', '.join(DICTIONARIES)}")

    @classmethod
    def parse(cls, text: str) -> BoardSpec:
        """``chessboard:9x6:25`` (inner corners, square mm) or ``charuco:7x5:40:30`` (squares,
        square mm, marker mm) with an optional ``:DICT_4X4_50``."""
        parts = [p.strip() for p in text.strip().split(":")]
        usage = ("expected chessboard:COLSxROWS:SQUARE_MM or "
                 "charuco:COLSxROWS:SQUARE_MM:MARKER_MM[:DICTIONARY]")
        if len(parts) < 3 or parts[0] not in KINDS:
            raise BoardError(f"board {text!r}: {usage}")
        m = re.fullmatch(r"(\d+)x(\d+)", parts[1])
        if not m:
            raise BoardError(f"board {text!r}: {parts[1]!r} is not COLSxROWS; {usage}")
        try:
            square = float(parts[2]) / 1000.0
            if parts[0] == "chessboard":
                if len(parts) != 3:
                    raise BoardError(f"board {text!r}: {usage}")
                return cls("chessboard", int(m[1]), int(m[2]), square)
            if len(parts) not in (4, 5):
                raise BoardError(f"board {text!r}: {usage}")
            return cls("charuco", int(m[1]), int(m[2]), square, float(parts[3]) / 1000.0,
                       parts[4] if len(parts) == 5 else "DICT_4X4_50")
        except ValueError as e:
            raise BoardError(f"board {text!r}: {e}; {usage}") from None

    def describe(self) -> str:
        if self.kind == "chessboard":
            return f"chessboard {self.cols}x{self.rows}, {self.square_m * 1000:g} mm squares"
        return (f"ChArUco {self.cols}x{self.rows}, {self.square_m * 1000:g} mm squares, "
                f"{self.marker_m * 1000:g} mm {self.dictionary} markers")

    @property
    def unambiguous(self) -> bool:
        """Whether the same physical corner is always found as the origin."""
        return self.kind == "charuco" or (self.cols + self.rows) % 2 == 1

    def object_points(self) -> np.ndarray:
        """Every corner in the board frame (N x 3, metres), in detection order / by id."""
        if self.kind == "charuco":
            return np.asarray(self._charuco().getChessboardCorners(), np.float64).reshape(-1, 3)
        j, i = np.mgrid[0:self.rows, 0:self.cols]
        pts = np.zeros((self.rows * self.cols, 3))
        pts[:, 0] = i.ravel() * self.square_m
        pts[:, 1] = j.ravel() * self.square_m
        return pts

    def _charuco(self) -> object:
        import cv2

        d = cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, self.dictionary))
        return cv2.aruco.CharucoBoard((self.cols, self.rows), self.square_m, self.marker_m, d)


@dataclass(frozen=True)
class Detection:
    """A board found in one image: matching image points (N x 2) and board points (N x 3)."""

    image_points: np.ndarray
    object_points: np.ndarray
    image_size: tuple[int, int]  # width, height


@dataclass(frozen=True)
class BoardImage:
    """A drawn board: ``image`` (grey), and where board point (X, Y) lands in it:
    ``origin_px + (X, Y) * px_per_m``."""

    image: np.ndarray
    px_per_m: float
    origin_px: tuple[float, float]


def _gray(image: np.ndarray) -> np.ndarray:
    import cv2

    img = np.asarray(image)
    if img.ndim == 3:
        return cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
    return img


def detect(board: BoardSpec, image: np.ndarray, min_corners: int = 6) -> Detection | None:
    """The board's corners in ``image`` (BGR or grey), or None when it is not found."""
    gray = _gray(image)
    h, w = gray.shape[:2]
    if board.kind == "chessboard":
        pts = _chessboard(board, gray)
        if pts is None:
            return None
        return Detection(pts, board.object_points(), (w, h))
    import cv2

    detector = cv2.aruco.CharucoDetector(board._charuco())
    corners, ids, _, _ = detector.detectBoard(gray)
    if ids is None or corners is None or len(ids) < min_corners:
        return None
    ids = ids.reshape(-1)
    obj = board.object_points()[ids]
    return Detection(np.asarray(corners, np.float64).reshape(-1, 2), obj, (w, h))


def average(detections: list[Detection]) -> Detection:
    """One detection from several frames of a board that did not move: each corner at its
    mean position over the frames that saw it (pixel noise averages out)."""
    if not detections:
        raise BoardError("no detections to average")
    sizes = {d.image_size for d in detections}
    if len(sizes) != 1:
        raise BoardError(f"the frames differ in size: {sorted(sizes)}")
    sums: dict[tuple[float, ...], list[np.ndarray]] = {}
    for d in detections:
        for uv, xyz in zip(d.image_points, d.object_points, strict=True):
            sums.setdefault(tuple(np.round(xyz, 9)), []).append(uv)
    keys = list(sums)
    return Detection(np.array([np.mean(sums[k], axis=0) for k in keys]),
                     np.array(keys, np.float64), detections[0].image_size)


def _chessboard(board: BoardSpec, gray: np.ndarray) -> np.ndarray | None:
    import cv2

    size = (board.cols, board.rows)
    found, corners = cv2.findChessboardCorners(
        gray, size, flags=cv2.CALIB_CB_ADAPTIVE_THRESH | cv2.CALIB_CB_NORMALIZE_IMAGE)
    if found:
        crit = (cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 50, 1e-4)
        corners = cv2.cornerSubPix(gray, corners, (5, 5), (-1, -1), crit)
    else:  # the sector-based detector finds blurred and unevenly lit boards too (slower)
        found, corners = cv2.findChessboardCornersSB(
            gray, size, flags=cv2.CALIB_CB_NORMALIZE_IMAGE | cv2.CALIB_CB_ACCURACY)
        if not found:
            return None
    grid = np.asarray(corners, np.float64).reshape(board.rows, board.cols, 2)
    return _canonical(grid, gray).reshape(-1, 2)


def _canonical(grid: np.ndarray, gray: np.ndarray) -> np.ndarray:
    """Reorder the corner grid so the board frame is right-handed seen from the front and its
    origin is the corner whose outer diagonal square is black."""
    a, b = grid[0, 1] - grid[0, 0], grid[1, 0] - grid[0, 0]
    if a[0] * b[1] - a[1] * b[0] < 0:  # mirrored: x along the row, y down the columns
        grid = grid[:, ::-1]
    turned = grid[::-1, ::-1]
    if _outer_square(turned, gray) < _outer_square(grid, gray):
        grid = turned
    return np.ascontiguousarray(grid)


def _outer_square(grid: np.ndarray, gray: np.ndarray) -> float:
    c0 = grid[0, 0]
    centre = c0 + 0.5 * (c0 - grid[0, 1]) + 0.5 * (c0 - grid[1, 0])
    r = max(1, int(0.15 * min(np.linalg.norm(grid[0, 1] - c0), np.linalg.norm(grid[1, 0] - c0))))
    h, w = gray.shape[:2]
    x, y = int(round(centre[0])), int(round(centre[1]))
    patch = gray[max(0, y - r):min(h, y + r + 1), max(0, x - r):min(w, x + r + 1)]
    return float(patch.mean()) if patch.size else 255.0


def draw(board: BoardSpec, px_per_square: int = 100, margin_squares: float = 0.5) -> BoardImage:
    """The board as a grey image (white margin), for printing and for rendered test views."""
    import cv2

    s = px_per_square
    margin = int(round(margin_squares * s))
    ppm = s / board.square_m
    if board.kind == "charuco":
        w, h = board.cols * s + 2 * margin, board.rows * s + 2 * margin
        img = board._charuco().generateImage((w, h), marginSize=margin)  # type: ignore[attr-defined]
        # pixel centres are integers: the edge of the first square lies half a pixel before it
        return BoardImage(np.asarray(img, np.uint8), ppm, (margin - 0.5, margin - 0.5))
    nx, ny = board.cols + 1, board.rows + 1
    img = np.full((ny * s + 2 * margin, nx * s + 2 * margin), 255, np.uint8)
    for j in range(ny):
        for i in range(nx):
            if (i + j) % 2 == 0:
                y0, x0 = margin + j * s, margin + i * s
                img[y0:y0 + s, x0:x0 + s] = 0
    cv2.rectangle(img, (0, 0), (img.shape[1] - 1, img.shape[0] - 1), 200, 1)
    return BoardImage(img, ppm, (margin + s - 0.5, margin + s - 0.5))


__all__ = ["BoardError", "BoardImage", "BoardSpec", "DICTIONARIES", "Detection", "KINDS",
           "average", "detect", "draw"]
