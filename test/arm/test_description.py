"""The robot description served to rviz: meshes when installed, collision boxes otherwise."""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from solarian_agent.arm.description import (
    MESH_PREFIX,
    boxes_as_visuals,
    describe,
    mesh_dir,
    mesh_names,
)

URDF = (Path(__file__).resolve().parents[2] / "urdf" / "so101.urdf").read_text(encoding="utf-8")
# the parts the URDF's visuals name (the published SO-101 meshes), written out
PARTS = ("base_motor_holder_so101_v1.stl", "base_so101_v2.stl",
         "motor_holder_so101_base_v1.stl", "motor_holder_so101_wrist_v1.stl",
         "moving_jaw_so101_v1.stl", "rotation_pitch_so101_v1.stl", "sts3215_03a_no_horn_v1.stl",
         "sts3215_03a_v1.stl", "under_arm_so101_v1.stl", "upper_arm_so101_v1.stl",
         "waveshare_mounting_plate_so101_v2.stl", "wrist_roll_follower_so101_v1.stl",
         "wrist_roll_pitch_so101_v2.stl")


def _fill(directory: Path, names: tuple[str, ...]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for n in names:
        (directory / n).write_bytes(b"solid x\nendsolid x\n")


def test_mesh_names_are_the_published_parts() -> None:
    assert mesh_names(URDF) == PARTS


def test_mesh_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SOLARIAN_MESH_DIR", str(tmp_path / "m"))
    assert mesh_dir() == tmp_path / "m"
    monkeypatch.delenv("SOLARIAN_MESH_DIR")
    assert mesh_dir() == Path.home() / ".cache" / "solarian_agent" / "meshes" / "so101"


def test_installed_share_keeps_package_uris(tmp_path: Path) -> None:
    _fill(tmp_path / "share" / "meshes" / "so101", PARTS)
    d = describe(URDF, share=tmp_path / "share", cache=tmp_path / "empty")
    assert d.visuals == "package"
    assert d.urdf == URDF


def test_cache_gives_file_uris(tmp_path: Path) -> None:
    _fill(tmp_path / "cache", PARTS)
    d = describe(URDF, share=tmp_path / "share", cache=tmp_path / "cache")
    assert d.visuals == "file"
    assert MESH_PREFIX not in d.urdf
    uris = {m.get("filename") for m in ET.fromstring(d.urdf).iter("mesh")}
    assert uris == {f"file://{(tmp_path / 'cache').resolve()}/{n}" for n in PARTS}


def test_one_missing_mesh_falls_back_to_boxes(tmp_path: Path,
                                              caplog: pytest.LogCaptureFixture) -> None:
    _fill(tmp_path / "cache", PARTS[:-1])
    with caplog.at_level(logging.WARNING):
        d = describe(URDF, share=None, cache=tmp_path / "cache")
    assert d.visuals == "boxes"
    assert [r.getMessage() for r in caplog.records if "make meshes" in r.getMessage()]
    assert len(caplog.records) == 1


def test_boxes_replace_every_mesh_visual_by_the_links_collisions() -> None:
    src = ET.fromstring(URDF)
    out = ET.fromstring(boxes_as_visuals(URDF))
    assert not list(out.iter("mesh"))
    for link_in, link_out in zip(src.iter("link"), out.iter("link"), strict=True):
        # visuals that were boxes already (the cameras) stay, then one per collision box
        kept = [v.find("geometry/box").get("size") for v in link_in.findall("visual")
                if v.find("geometry/box") is not None]
        boxes_in = kept + [c.find("geometry/box").get("size")
                           for c in link_in.findall("collision")]
        boxes_out = [v.find("geometry/box").get("size") for v in link_out.findall("visual")
                     if v.find("geometry/box") is not None]
        assert boxes_out == boxes_in, link_in.get("name")
    # the links with collision boxes keep something to draw: the arm is not invisible
    assert sum(len(link.findall("visual")) for link in out.iter("link")) >= 7
