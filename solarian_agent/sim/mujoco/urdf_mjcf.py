"""The arm's MJCF, generated from ``urdf/so101.urdf`` (the file the skills' kinematics read).

Nothing about the arm is written twice: every URDF link becomes a body at its joint's origin,
with the URDF's inertial and its primitive geometry (the URDF references no meshes: boxes and
cylinders are the visual and the collision shapes), a site named after the link on its origin
(so the test compares every frame with Pinocchio's), and revolute / prismatic joints with the
URDF's axis and limits.  Conversions:

* ``rpy`` (fixed-axis roll, pitch, yaw) becomes a quaternion; a URDF cylinder (radius, length)
  becomes an MJCF cylinder (radius, half length); a box's size becomes half sizes.
* A prismatic joint that other joints mimic and whose child has no mass (the URDF's
  ``gripper`` aperture) is not simulated: its mimics (the fingers) are real joints, each with
  a position servo of gear 1 / multiplier, so every one's control and length are the
  aperture in metres; the mimic holds by control (a finger that meets an object first pushes
  it until both squeeze it).
* ``*_optical`` links carry a camera (MuJoCo looks along -z with y up; the optical frame looks
  along +z with y down: a half turn about x).
* Arm geoms collide with the scene, never with each other (contype 2 / conaffinity 1).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from solarian_agent.core.errors import ConfigError

# collision bits: the scene (table, objects, receptacles) is 1, the arm 2; arm-arm pairs fail
# both tests (2 & 1 == 0), arm-scene and scene-scene pairs pass
ARM_CONTYPE, ARM_CONAFFINITY = 2, 1
VISUAL_GROUP, COLLISION_GROUP = 1, 3


@dataclass(frozen=True)
class UrdfShape:
    kind: str  # box | cylinder | sphere
    size: tuple[float, ...]  # URDF: box sizes, (radius, length), (radius,)
    xyz: tuple[float, float, float]
    rpy: tuple[float, float, float]
    material: str = ""
    mesh: str = ""  # kind "mesh": the file name (the URI's last part)


@dataclass(frozen=True)
class UrdfInertial:
    mass: float
    xyz: tuple[float, float, float]
    diag: tuple[float, float, float]


@dataclass(frozen=True)
class UrdfLink:
    name: str
    visuals: tuple[UrdfShape, ...] = ()
    collisions: tuple[UrdfShape, ...] = ()
    inertial: UrdfInertial | None = None


@dataclass(frozen=True)
class UrdfJoint:
    name: str
    kind: str  # revolute | prismatic | fixed | continuous
    parent: str
    child: str
    xyz: tuple[float, float, float]
    rpy: tuple[float, float, float]
    axis: tuple[float, float, float] = (1.0, 0.0, 0.0)
    lower: float = 0.0
    upper: float = 0.0
    effort: float = 0.0
    velocity: float = 0.0
    mimic: tuple[str, float, float] | None = None  # (joint, multiplier, offset)


@dataclass(frozen=True)
class UrdfRobot:
    name: str
    links: dict[str, UrdfLink]
    joints: dict[str, UrdfJoint]
    materials: dict[str, tuple[float, float, float, float]] = field(default_factory=dict)

    def children(self, link: str) -> list[UrdfJoint]:
        return [j for j in self.joints.values() if j.parent == link]

    @property
    def root(self) -> str:
        kids = {j.child for j in self.joints.values()}
        roots = [n for n in self.links if n not in kids]
        if len(roots) != 1:
            raise ConfigError("urdf", f"needs exactly one root link, found {roots}")
        return roots[0]


def _floats(text: str | None, n: int, default: Sequence[float], where: str) -> tuple[float, ...]:
    if text is None:
        return tuple(float(v) for v in default)
    try:
        vals = tuple(float(v) for v in text.split())
    except ValueError:
        raise ConfigError(where, f"expects {n} numbers, got {text!r}") from None
    if len(vals) != n or not all(math.isfinite(v) for v in vals):
        raise ConfigError(where, f"expects {n} finite numbers, got {text!r}")
    return vals


def _origin(el: ET.Element | None, where: str) -> tuple[tuple[float, float, float],
                                                         tuple[float, float, float]]:
    o = el.find("origin") if el is not None else None
    xyz = _floats(o.get("xyz") if o is not None else None, 3, (0, 0, 0), f"{where}.origin.xyz")
    rpy = _floats(o.get("rpy") if o is not None else None, 3, (0, 0, 0), f"{where}.origin.rpy")
    return (xyz[0], xyz[1], xyz[2]), (rpy[0], rpy[1], rpy[2])


def _shape(el: ET.Element, where: str) -> UrdfShape | None:
    geo = el.find("geometry")
    if geo is None or len(geo) == 0:
        return None
    g = geo[0]
    xyz, rpy = _origin(el, where)
    mat = el.find("material")
    material = mat.get("name", "") if mat is not None else ""
    if g.tag == "box":
        size = _floats(g.get("size"), 3, (), f"{where}.box.size")
    elif g.tag == "cylinder":
        size = (float(g.get("radius", "nan")), float(g.get("length", "nan")))
    elif g.tag == "sphere":
        size = (float(g.get("radius", "nan")),)
    elif g.tag == "mesh":
        uri = g.get("filename", "")
        if not uri.endswith(".stl"):
            raise ConfigError(f"{where}.geometry", f"mesh {uri!r} is not an .stl file")
        return UrdfShape("mesh", (), xyz, rpy, material, uri.rsplit("/", 1)[-1])
    else:
        raise ConfigError(f"{where}.geometry", f"{g.tag!r} is not supported; allowed: box, "
                                               "cylinder, sphere, mesh")
    if not all(math.isfinite(v) and v > 0 for v in size):
        raise ConfigError(f"{where}.geometry", f"{g.tag} needs positive sizes, got {size}")
    return UrdfShape(g.tag, size, xyz, rpy, material)


def read_urdf(path: str | Path) -> UrdfRobot:
    """Parse the subset of URDF the package's arm uses (primitives, revolute / prismatic /
    fixed joints, mimic).  A bad value raises :class:`ConfigError` naming the element."""
    try:
        root = ET.parse(str(path)).getroot()
    except (OSError, ET.ParseError) as e:
        raise ConfigError(str(path), f"cannot read the URDF: {e}") from e
    materials: dict[str, tuple[float, float, float, float]] = {}
    for m in root.findall("material"):
        c = m.find("color")
        if c is not None:
            r, g, b, a = _floats(c.get("rgba"), 4, (), f"material[{m.get('name')}].rgba")
            materials[m.get("name", "")] = (r, g, b, a)
    links: dict[str, UrdfLink] = {}
    for ln in root.findall("link"):
        name = ln.get("name", "")
        where = f"link[{name}]"
        vis = tuple(s for i, v in enumerate(ln.findall("visual"))
                    if (s := _shape(v, f"{where}.visual[{i}]")) is not None)
        col = tuple(s for i, c in enumerate(ln.findall("collision"))
                    if (s := _shape(c, f"{where}.collision[{i}]")) is not None)
        inertial = None
        ie = ln.find("inertial")
        if ie is not None:
            xyz, _ = _origin(ie, f"{where}.inertial")
            mass_el, inertia_el = ie.find("mass"), ie.find("inertia")
            mass = float(mass_el.get("value", "nan")) if mass_el is not None else math.nan
            if inertia_el is None or not mass > 0:
                raise ConfigError(f"{where}.inertial", "needs a positive mass and an inertia")
            diag = tuple(float(inertia_el.get(k, "nan")) for k in ("ixx", "iyy", "izz"))
            inertial = UrdfInertial(mass, xyz, (diag[0], diag[1], diag[2]))
        links[name] = UrdfLink(name, vis, col, inertial)
    joints: dict[str, UrdfJoint] = {}
    for j in root.findall("joint"):
        name = j.get("name", "")
        where = f"joint[{name}]"
        parent, child = j.find("parent"), j.find("child")
        if parent is None or child is None:
            raise ConfigError(where, "needs a parent and a child link")
        xyz, rpy = _origin(j, where)
        ax = j.find("axis")
        axis = _floats(ax.get("xyz") if ax is not None else None, 3, (1, 0, 0), f"{where}.axis")
        lim = j.find("limit")
        mim = j.find("mimic")
        mimic = None
        if mim is not None:
            mimic = (mim.get("joint", ""), float(mim.get("multiplier", "1")),
                     float(mim.get("offset", "0")))

        def num(key: str, lim: ET.Element | None = lim) -> float:
            return float(lim.get(key, "0")) if lim is not None else 0.0

        joints[name] = UrdfJoint(name, j.get("type", "fixed"), parent.get("link", ""),
                                 child.get("link", ""), xyz, rpy,
                                 (axis[0], axis[1], axis[2]), num("lower"), num("upper"),
                                 num("effort"), num("velocity"), mimic)
    for jt in joints.values():
        for link in (jt.parent, jt.child):
            if link not in links:
                raise ConfigError(f"joint[{jt.name}]", f"names an unknown link {link!r}")
    return UrdfRobot(root.get("name", "robot"), links, joints, materials)


# ------------------------------------------------------------------------------- rotations
def rpy_matrix(rpy: Sequence[float]) -> np.ndarray:
    """URDF's fixed-axis roll-pitch-yaw: R = Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = (float(v) for v in rpy)
    cr, sr, cp, sp, cy, sy = (math.cos(r), math.sin(r), math.cos(p), math.sin(p),
                              math.cos(y), math.sin(y))
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    out: np.ndarray = rz @ ry @ rx
    return out


def matrix_quat(m: np.ndarray) -> tuple[float, float, float, float]:
    """A rotation matrix as a unit quaternion (w, x, y, z), w >= 0."""
    m = np.asarray(m, dtype=float)
    tr = float(np.trace(m))
    if tr > 0:
        s = 2.0 * math.sqrt(tr + 1.0)
        q = (0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s)
    else:
        i = int(np.argmax(np.diag(m)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * math.sqrt(max(1e-12, 1.0 + m[i, i] - m[j, j] - m[k, k]))
        v = [0.0, 0.0, 0.0]
        v[i] = 0.25 * s
        v[j] = (m[j, i] + m[i, j]) / s
        v[k] = (m[k, i] + m[i, k]) / s
        q = ((m[k, j] - m[j, k]) / s, v[0], v[1], v[2])
    n = math.sqrt(sum(c * c for c in q))
    w, x, y, z = (c / n for c in q)
    if w < 0:
        w, x, y, z = -w, -x, -y, -z
    return w, x, y, z


def fmt(vals: Sequence[float]) -> str:
    return " ".join(f"{float(v):.9g}" for v in vals)


def quat_attr(rpy: Sequence[float]) -> str:
    return fmt(matrix_quat(rpy_matrix(rpy)))


# ------------------------------------------------------------------------------- the arm
@dataclass(frozen=True)
class ArmPhysics:
    """How the simulated servos behave: position servos with a lead, like the STS3215's
    position loop (proportional gain ``kp`` N m/rad, damping ``kv``, the URDF's effort as the
    torque limit), reflected rotor inertia ``armature`` and gravity compensation of the links
    (the servos hold the arm's own weight; a held object's is not compensated)."""

    kp: float = 40.0
    kv: float = 1.2
    armature: float = 0.01
    damping: float = 0.05
    gripper_kp: float = 3.0  # N m per radian of jaw angle error
    gripper_kv: float = 0.05
    gripper_force: float = 0.5  # N m, the jaw servo's torque at most (~7 N at the jaw tip)
    finger_friction: float = 1.2
    gravcomp: bool = True

    def __post_init__(self) -> None:
        for name in ("kp", "kv", "gripper_kp", "gripper_kv", "gripper_force",
                     "finger_friction"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ConfigError(f"sim.mujoco.arm.{name}", f"must be > 0, got {v!r}")
        for name in ("armature", "damping"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ConfigError(f"sim.mujoco.arm.{name}", f"must be >= 0, got {v!r}")


@dataclass(frozen=True)
class ArmMjcf:
    """The arm's MJCF pieces to drop into a scene, and what the world needs to drive it."""

    bodies: list[ET.Element]  # what hangs from the URDF's root link, for <worldbody>
    actuators: list[ET.Element]
    materials: list[ET.Element]
    joints: tuple[str, ...]  # every simulated joint (the arm's and the fingers')
    actuated: tuple[str, ...]  # the URDF joint each actuator stands for, in actuator order
    # (the virtual gripper joint once per finger)
    fingers: tuple[str, ...]  # the finger links (bodies)
    aperture: tuple[tuple[str, float], ...]  # (finger joint, multiplier) of the virtual joint
    cameras: tuple[str, ...]
    meshes: list[ET.Element] = field(default_factory=list)  # <mesh> assets of the visuals


def _geom(shape: UrdfShape, name: str, visual: bool, rgba: tuple[float, ...] | None,
          material: str | None) -> ET.Element:
    g = ET.Element("geom", name=name)
    if shape.kind == "box":
        g.set("type", "box")
        g.set("size", fmt([s / 2 for s in shape.size]))
    elif shape.kind == "cylinder":
        g.set("type", "cylinder")
        g.set("size", fmt([shape.size[0], shape.size[1] / 2]))
    elif shape.kind == "mesh":
        g.set("type", "mesh")
        g.set("mesh", shape.mesh.removesuffix(".stl"))
    else:
        g.set("type", "sphere")
        g.set("size", fmt(shape.size))
    g.set("pos", fmt(shape.xyz))
    if any(shape.rpy):
        g.set("quat", quat_attr(shape.rpy))
    if visual:
        g.set("contype", "0")
        g.set("conaffinity", "0")
        g.set("group", str(VISUAL_GROUP))
        g.set("mass", "0")
        if material:
            g.set("material", material)
        elif rgba is not None:
            g.set("rgba", fmt(rgba))
    else:
        g.set("contype", str(ARM_CONTYPE))
        g.set("conaffinity", str(ARM_CONAFFINITY))
        g.set("group", str(COLLISION_GROUP))
        g.set("mass", "0")
        g.set("rgba", "0.5 0.5 0.5 0")
    return g


def arm_mjcf(robot: UrdfRobot, physics: ArmPhysics = ArmPhysics(),
             cameras: Mapping[str, tuple[str, float]] | None = None,
             material_prefix: str = "arm_", mesh_dir: Path | None = None,
             jaw_joint: str = "gripper") -> ArmMjcf:
    """The body tree of ``robot`` from its root link.  ``cameras`` maps an optical link to
    (camera name, vertical field of view in degrees).  The visuals are the URDF's meshes when
    ``mesh_dir`` holds every one, else each link's collision boxes.  ``jaw_joint`` (revolute)
    moves the jaw on its child against the fixed jaw on its parent; both links' collision
    geoms are the jaws."""
    cams = dict(cameras or {})
    mesh_files = sorted({s.mesh for ln in robot.links.values() for s in ln.visuals
                         if s.kind == "mesh"})
    use_meshes = bool(mesh_files) and mesh_dir is not None and all(
        (mesh_dir / f).is_file() for f in mesh_files)
    mesh_assets = [ET.Element("mesh", name=f.removesuffix(".stl"),
                              file=str((mesh_dir / f).resolve()))
                   for f in mesh_files] if use_meshes and mesh_dir is not None else []
    jaw = robot.joints.get(jaw_joint)
    jaw_links = (jaw.parent, jaw.child) if jaw is not None and jaw.mimic is None else ()
    virtual: dict[str, list[tuple[str, float]]] = {}
    for j in robot.joints.values():
        if j.mimic is not None:
            virtual.setdefault(j.mimic[0], []).append((j.name, j.mimic[1]))
    for master in list(virtual):
        mj = robot.joints.get(master)
        if mj is None:
            raise ConfigError(f"joint[{virtual[master][0][0]}].mimic",
                              f"names an unknown joint {master!r}")
        if robot.links[mj.child].inertial is not None:
            del virtual[master]  # a real joint others follow: not supported as virtual
    finger_joints = {name for v in virtual.values() for name, _ in v}
    mats = [ET.Element("material", name=f"{material_prefix}{n}", rgba=fmt(rgba),
                       specular="0.15", shininess="0.2")
            for n, rgba in robot.materials.items()]
    actuators: list[ET.Element] = []
    actuated: list[str] = []
    joints: list[str] = []
    fingers: list[str] = []
    cam_names: list[str] = []

    def build(link: str, joint: UrdfJoint | None) -> ET.Element:
        body = ET.Element("body", name=link)
        if joint is not None:
            body.set("pos", fmt(joint.xyz))
            if any(joint.rpy):
                body.set("quat", quat_attr(joint.rpy))
        ln = robot.links[link]
        if ln.inertial is not None:
            ET.SubElement(body, "inertial", pos=fmt(ln.inertial.xyz),
                          mass=f"{ln.inertial.mass:.9g}", diaginertia=fmt(ln.inertial.diag))
            if physics.gravcomp:
                body.set("gravcomp", "1")
        if joint is not None and joint.kind in ("revolute", "continuous", "prismatic") \
                and joint.name not in virtual:
            hinge = joint.kind != "prismatic"
            je = ET.SubElement(body, "joint", name=joint.name,
                               type="hinge" if hinge else "slide", axis=fmt(joint.axis),
                               armature=f"{physics.armature if hinge else 0.0:.9g}",
                               damping=f"{physics.damping if hinge else 0.5:.9g}")
            if joint.kind != "continuous":
                je.set("range", fmt((joint.lower, joint.upper)))
            joints.append(joint.name)
            if joint.name in finger_joints:
                fingers.append(link)
        if link in jaw_links:
            fingers.append(link)
        visuals = [v for v in ln.visuals if v.kind != "mesh" or use_meshes]
        if not use_meshes and any(v.kind == "mesh" for v in ln.visuals):
            visuals += [replace(c, material="printed") for c in ln.collisions]
        for i, shape in enumerate(visuals):
            mat = (f"{material_prefix}{shape.material}"
                   if shape.material in robot.materials else None)
            body.append(_geom(shape, f"{link}_visual{i}", True, None, mat))
        for i, shape in enumerate(ln.collisions):
            g = _geom(shape, f"{link}_collision{i}", False, None, None)
            if link in fingers:
                # the pads decide their contacts' parameters (priority): friction, and stiff
                # contacts, so a squeezed light object is not pressed into the pads
                g.set("friction", f"{physics.finger_friction:.9g} 0.02 0.002")
                g.set("priority", "1")
                g.set("condim", "4")
                g.set("solref", "0.004 1")
                g.set("solimp", "0.99 0.999 0.0005")
            body.append(g)
        ET.SubElement(body, "site", name=link, pos="0 0 0", size="0.002", group="5")
        if link in cams:
            cam, fovy = cams[link]
            ET.SubElement(body, "camera", name=cam, pos="0 0 0", quat="0 1 0 0",
                          fovy=f"{fovy:.9g}")
            cam_names.append(cam)
        for child in robot.children(link):
            body.append(build(child.child, child))
        return body

    # the root link (the URDF's "world") is MuJoCo's worldbody: build what hangs from it
    bodies = [build(k.child, k) for k in robot.children(robot.root)]
    # actuators in the URDF's joint order
    for name in joints:
        if name in finger_joints:
            continue
        j = robot.joints[name]
        is_jaw = bool(jaw_links) and name == jaw_joint
        kp, kv = ((physics.gripper_kp, physics.gripper_kv) if is_jaw
                  else (physics.kp, physics.kv))
        effort = min(j.effort, physics.gripper_force) if is_jaw else j.effort
        actuators.append(ET.Element(
            "position", name=name, joint=name, kp=f"{kp:.9g}", kv=f"{kv:.9g}",
            ctrlrange=fmt((j.lower, j.upper)), forcerange=fmt((-effort, effort))))
        actuated.append(name)
    # the gripper's measured value: the jaw joint itself (radians), or the fingers' mimics
    aperture: list[tuple[str, float]] = [(jaw_joint, 1.0)] if jaw_links else []
    for master, mimics in virtual.items():
        mj = robot.joints[master]
        aperture = [(n, m) for n, m in mimics]
        # each mimic joint gets a servo of its own on the master's value (gear 1 / multiplier:
        # its length is the aperture); a soft equality constraint between light fingers
        # would give way under the squeeze
        force = physics.gripper_force
        for joint_name, mult in mimics:
            actuators.append(ET.Element(
                "position", name=f"{master}_{joint_name}", joint=joint_name,
                gear=f"{1.0 / mult:.9g}", kp=f"{physics.gripper_kp:.9g}",
                kv=f"{physics.gripper_kv:.9g}", ctrlrange=fmt((mj.lower, mj.upper)),
                forcerange=fmt((-force * abs(mult), force * abs(mult)))))
            actuated.append(master)
    return ArmMjcf(bodies, actuators, mats, tuple(joints), tuple(actuated),
                   tuple(fingers), tuple(aperture), tuple(cam_names), mesh_assets)

