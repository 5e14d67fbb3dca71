"""The robot description (URDF text) that rviz and robot_state_publisher display.

``urdf/so101.urdf`` names the published STL meshes as its visuals
(``package://solarian_agent/meshes/so101/<part>.stl``).  The meshes are not committed: ``make
meshes`` (scripts/fetch_meshes.py) puts them in a cache, by default
``~/.cache/solarian_agent/meshes/so101/``, or in ``$SOLARIAN_MESH_DIR``.  This module serves:

* the URDF unchanged when the installed package share has ``meshes/so101/`` with every mesh
  (rviz resolves ``package://`` through the share);
* else the URDF with ``file://`` absolute paths into the cache when the cache has every mesh;
* else the URDF with each link's collision boxes as its visuals, and one logged line that says
  the meshes are missing and how to get them.

Standard library only: scripts/fetch_meshes.py reads the mesh names from here.
"""

from __future__ import annotations

import logging
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

LOG = logging.getLogger(__name__)

MESH_PREFIX = "package://solarian_agent/meshes/so101/"
MESH_DIR_ENV = "SOLARIAN_MESH_DIR"
_DEFAULT_CACHE = Path("~/.cache/solarian_agent/meshes/so101")


@dataclass(frozen=True)
class Description:
    """The URDF text to serve and how its visuals were resolved."""

    urdf: str
    visuals: str  # "package" | "file" | "boxes"


def mesh_dir() -> Path:
    """Where the meshes are cached: ``$SOLARIAN_MESH_DIR`` if set, else the user cache."""
    env = os.environ.get(MESH_DIR_ENV, "").strip()
    return Path(env).expanduser() if env else _DEFAULT_CACHE.expanduser()


def mesh_names(urdf_text: str) -> tuple[str, ...]:
    """The STL file names the URDF's visuals name, sorted, each once."""
    root = ET.fromstring(urdf_text)
    names = set()
    for mesh in root.iter("mesh"):
        uri = mesh.get("filename", "")
        if uri.startswith(MESH_PREFIX):
            names.add(uri[len(MESH_PREFIX):])
    return tuple(sorted(names))


def meshes_present(directory: Path, names: tuple[str, ...]) -> bool:
    """Every named mesh is a non-empty file in ``directory``."""
    return bool(names) and all(
        (directory / n).is_file() and (directory / n).stat().st_size > 0 for n in names)


def describe(urdf_text: str, share: Path | None = None,
             cache: Path | None = None) -> Description:
    """The description to serve for ``urdf_text`` (see the module docstring for the order)."""
    names = mesh_names(urdf_text)
    if share is not None and meshes_present(share / "meshes" / "so101", names):
        return Description(urdf_text, "package")
    cache = mesh_dir() if cache is None else cache
    if meshes_present(cache, names):
        uri = cache.resolve().as_uri() + "/"
        return Description(urdf_text.replace(MESH_PREFIX, uri), "file")
    LOG.warning("the SO-101 meshes are missing (looked in %s); rviz shows the collision boxes: "
                "run `make meshes` to fetch them", cache)
    return Description(boxes_as_visuals(urdf_text), "boxes")


def boxes_as_visuals(urdf_text: str) -> str:
    """The URDF with each link's mesh visuals replaced by its collision shapes."""
    root = ET.fromstring(urdf_text)
    for link in root.iter("link"):
        for visual in list(link.findall("visual")):
            if visual.find("geometry/mesh") is not None:
                link.remove(visual)
        for i, collision in enumerate(link.findall("collision")):
            visual = ET.SubElement(link, "visual", {"name": f"{link.get('name')}_box{i}"})
            for child in collision:
                visual.append(child)
            ET.SubElement(visual, "material", {"name": "printed"})
    return ET.tostring(root, encoding="unicode")
