"""Recording benchmark: bytes per second of a two-camera episode, the bag as the demo records it
(images as ``sensor_msgs/CompressedImage``, MCAP chunks in zstd, split every 5 s) beside the raw
recording the demo made before (``sensor_msgs/Image``, uncompressed chunks), both attached to
the same bus in the same run of the tidy-up demo (seed 7: the rules planner, the cv monitor,
the overhead and wrist cameras at 10 Hz each, 640x480).

Rows: bytes per simulated second of each bag (baseline: the raw one); the camera messages
alone before chunk compression; an estimate for real cameras (the same frames with sensor-like
noise, which JPEG and zstd squeeze less than clean renders); the writer's JPEG encoding time per
frame on its own thread; the time close takes.  The aim is at most 1.5 MB/s.  Run alone with
``python -m solarian_agent.benchmarks.recording``.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

AIM_BYTES_PER_S = 1.5e6
CAMERAS = ("overhead", "wrist")


def _size(bag: Path) -> int:
    return sum(f.stat().st_size for f in bag.iterdir() if f.is_file())


def _camera_bytes(bag: Path) -> tuple[int, float]:
    """(bytes of the camera messages, simulated seconds the bag spans)."""
    from rosbags.rosbag2 import Reader

    cams = 0
    with Reader(bag) as r:
        seconds = r.duration * 1e-9
        for conn, _t, raw in r.messages():
            if any(conn.topic.startswith(f"/{c}/image_raw") for c in CAMERAS):
                cams += len(raw)
    return cams, seconds


def _record(workdir: Path, seed: int) -> dict[str, Any]:
    from ..rosmsg.bag import BagRecorder
    from ..system import build_sim_system

    system = build_sim_system(seed=seed)
    clock = system.clock

    def stamp() -> int:
        return int(clock.epoch() * 1e9)

    new = BagRecorder(workdir / "compressed", clock=stamp)
    raw = BagRecorder(workdir / "raw", clock=stamp, images="raw", compression="none",
                      split_s=3600.0)
    for rec in (new, raw):
        rec.attach(system.bus)
    system.planner.message("put the red cup on the tray and the yellow paper in the bin")
    done = system.run_until(lambda: system.planner.status not in ("idle", "running", "paused"),
                            300.0)
    t0 = time.perf_counter()
    new.close()
    close_s = time.perf_counter() - t0
    raw.close()
    system.shutdown()
    out: dict[str, Any] = {"done": done, "close_s": close_s, "errors": {**new.errors,
                                                                        **raw.errors}}
    for name in ("compressed", "raw"):
        bag = workdir / name
        cams, seconds = _camera_bytes(bag)
        out[name] = {"bytes": _size(bag), "camera_bytes": cams, "seconds": seconds,
                     "files": len(list(bag.glob("*.mcap")))}
    out["frames"] = sum(new.counts.get(f"{c}/image_raw/compressed", 0) for c in CAMERAS)
    out["dropped"] = sum(new.dropped.values())
    return out


def _encode(frames: int = 30) -> tuple[float, float]:
    """The writer's JPEG encoding of a 640x480 simulator frame: (median ms, bytes per second
    at 2 x 10 Hz of the same frames with camera-like noise, sigma 4)."""
    import statistics

    import numpy as np

    from ..arm.kinematics import ArmModel
    from ..core.messages import Image
    from ..rosmsg import convert as cv
    from ..rosmsg.bag import compress_image
    from ..rosmsg.interfaces import typestore
    from ..sim.render import Renderer
    from ..sim.world import World

    arm = ArmModel.default()
    img = Renderer(arm).render("overhead", World(arm, seed=7)).copy()
    codec = cv.rosbags_codec(typestore())
    rng = np.random.default_rng(0)
    times, sizes = [], []
    for i in range(frames):
        t0 = time.perf_counter()
        compress_image(codec, Image(img, float(i), "overhead"))
        times.append((time.perf_counter() - t0) * 1000)
        noisy = np.clip(img + rng.normal(0, 4, img.shape), 0, 255).astype(np.uint8)
        sizes.append(len(compress_image(codec, Image(noisy, float(i), "overhead")).data))
    return statistics.median(times), statistics.mean(sizes) * 2 * 10


def run(quick: bool = False) -> list[dict[str, Any]]:
    from . import one_cv_thread

    workdir = Path(tempfile.mkdtemp(prefix="solarian_bench_bag_"))
    try:
        r = _record(workdir, seed=7)
        with one_cv_thread():
            enc, noisy_bps = _encode(10 if quick else 30)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    new, raw = r["compressed"], r["raw"]
    secs = max(new["seconds"], 1e-9)
    bps, raw_bps = new["bytes"] / secs, raw["bytes"] / max(raw["seconds"], 1e-9)
    note = f"{secs:.1f} simulated s, {r['frames']} frames, {new['files']} split files"
    if not r["done"] or r["errors"] or r["dropped"]:
        note += f"; run done={r['done']}, errors={r['errors']}, dropped={r['dropped']}"
    return [
        {"name": "bag bytes per second (2 cameras, CompressedImage + zstd)", "value": bps,
         "unit": "B/s", "baseline": raw_bps, "note": f"baseline: raw Image; {note}"},
        {"name": "bag size vs raw recording", "value": 100 * bps / raw_bps, "unit": "%",
         "baseline": 100.0, "note": f"aim: at most {AIM_BYTES_PER_S / 1e6:g} MB/s"},
        {"name": "camera messages per second before chunk compression",
         "value": new["camera_bytes"] / secs, "unit": "B/s",
         "baseline": raw["camera_bytes"] / max(raw["seconds"], 1e-9),
         "note": "JPEG (quality 80) vs raw Image; zstd then folds repeated frames"},
        {"name": "estimate: JPEG of noisy frames (sigma 4), 2 x 10 Hz", "value": noisy_bps,
         "unit": "B/s", "baseline": AIM_BYTES_PER_S,
         "note": "no bag: frame sizes only; baseline: the aim"},
        {"name": "JPEG encode per 640x480 frame (writer thread)", "value": enc, "unit": "ms",
         "baseline": 100.0, "note": "baseline: the 10 Hz frame period"},
        {"name": "bag close (last split, metadata)", "value": 1000 * r["close_s"], "unit": "ms",
         "baseline": "", "note": "queue drained, last file finished"},
    ]


if __name__ == "__main__":  # pragma: no cover
    from . import format_table

    print(format_table({"suite": "recording", **row} for row in run()))
