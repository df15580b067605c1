"""Building a scene variant: a LIBERO task's model with extra static props and/or objects of
another type under the same BDDL name (see :class:`liberopro.sim.scene.SceneVariant`).

Two mechanisms, both inside robosuite 1.4's own model pipeline:

* **Object swaps** (S06): the task's BDDL is rewritten into a cached temporary file in which the
  swapped object's *type* changes and its *name* stays (``akita_black_bowl_1 - white_bowl``), so
  LIBERO's goal predicate still names it. A free object replaces a free object: the model's
  ``nq``/``nv`` stay those of the task, and LIBERO's stored init states (``[time, qpos, qvel]``)
  still fit (:func:`check_state_size` verifies it on the built scene).
* **Props** (S04, S05, S07-S09, D04-D06, D09): static bodies (no joint, so ``nq``/``nv`` and the
  init states are untouched) appended at the *end* of the worldbody by an XML processor
  (``MujocoEnv.set_xml_processor``), so every existing body, geom and site keeps its id. The
  processor is installed on the environment, so a hard reset (which rebuilds the model) adds the
  props again. Props start parked far below the floor (:func:`parked_pos`), out of every camera
  and out of reach, and :func:`park_props` puts them back there at every episode start: a
  static body's ``model.body_pos`` is not touched by LIBERO's reset.

MuJoCo filters contacts between two static bodies (same weld body, the world), so a prop never
*reports* a contact with the table or a fixture: :mod:`liberopro.shifts._props` checks that a
prop leaves them clear geometrically (ray casts). Contacts with the robot and movable objects are
simulated and reported.

The compiler derives the model's ``<statistic>`` (extent and centre: the renderer's clipping
planes and shadow map; mean mass and size) from every body, parked props included: the processor
writes the task model's own values explicitly, so parked props change neither the rendering nor
the physics of the rest of the scene (the test suite compares images and trajectories with the
task's own scene).
"""

from __future__ import annotations

import copy
import hashlib
import os
import re
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class PropSpec:
    """An extra body a shift needs in the scene (an obstacle, an occluder, a look-alike).

    Props are static bodies (no joint), so LIBERO's init states (qpos/qvel vectors) still fit
    the model; they are parked out of sight at every episode start and moved in by the shift
    through ``model.body_pos``/``body_quat`` (see this module). A prop's body
    frame is its centre for a box or cylinder and the object's own origin for an object copy.

    Attributes:
        name: body name, unique in the scene (``liberopro_prop_<what>``).
        kind: ``box``, ``cylinder``, ``object:<type>`` (a static copy of a LIBERO registry object,
            ``libero.libero.envs.objects``, e.g. ``object:white_bowl``) or ``clone:<object>``
            (a static copy of a scene object's type).
        size: MuJoCo geom size (half-extents for a box; radius, half-height for a cylinder);
            ignored for object copies.
        rgba: colour of a box or cylinder (None: grey); for an object copy None keeps its own
            textures, a colour recolours every visual geom (a look-alike of another colour).
        collide: whether it has collisions (occluders near the camera may not need them).
    """

    name: str
    kind: str
    size: tuple[float, ...] = ()
    rgba: tuple[float, float, float, float] | None = None
    collide: bool = True


#: Parking spot of prop ``i`` (metres, world): far below the floor, 1 m apart.
PARK_Z_M = -20.0


def parked_pos(index: int) -> np.ndarray:
    return np.array([0.0, 0.0, PARK_Z_M - float(index)])


# --------------------------------------------------------------------------- object swaps
_OBJECTS_BLOCK = re.compile(r"\(:objects(.*?)\)", re.S)


def _objects_groups(block: str) -> list[tuple[list[str], str]]:
    """``a b - T  c - U`` -> ``[([a, b], T), ([c], U)]`` (LIBERO's ``:objects`` syntax)."""
    tokens = block.split()
    groups: list[tuple[list[str], str]] = []
    names: list[str] = []
    i = 0
    while i < len(tokens):
        if tokens[i] == "-":
            groups.append((names, tokens[i + 1]))
            names, i = [], i + 2
        else:
            names.append(tokens[i])
            i += 1
    if names:
        raise ValueError(f"untyped objects {names} in the BDDL")
    return groups


def rewrite_bddl(path: str, swaps: tuple[tuple[str, str], ...]) -> str:
    """A copy of the BDDL file at ``path`` in which each object ``name`` of ``swaps`` (name,
    new type) is declared with the new type, every object keeping its place in the declaration
    order (which is the order of the free joints in ``qpos``). Returns the path of the cached
    copy (in the system's temporary directory, keyed by content). Raises ``ValueError`` when a
    name is not declared in the ``:objects`` block (fixtures cannot be swapped), when the new
    type is already declared (LIBERO keys objects by type) or when the name sits between two
    others of its group (splitting the group would reorder the objects)."""
    with open(path) as f:
        text = f.read()
    match = _OBJECTS_BLOCK.search(text)
    if match is None:
        raise ValueError(f"{path}: no (:objects ...) block")
    groups = _objects_groups(match.group(1))
    for name, new_type in swaps:
        if not re.fullmatch(r"[a-z0-9_]+", new_type):
            raise ValueError(f"bad object type {new_type!r}")
        if any(t == new_type for _, t in groups):
            raise ValueError(f"type {new_type} is already declared in {os.path.basename(path)}")
        where = [(gi, names.index(name)) for gi, (names, _) in enumerate(groups) if name in names]
        if not where:
            raise ValueError(f"{name} is not a movable object of {os.path.basename(path)}")
        gi, k = where[0]
        names, typ = groups[gi]
        if 0 < k < len(names) - 1:
            raise ValueError(f"{name} is declared between two other {typ} objects: cannot keep the joint order")
        pieces = [([name], new_type)]
        rest = (names[1:], typ) if k == 0 else (names[:-1], typ)
        if rest[0]:
            pieces = [*pieces, rest] if k == 0 else [rest, *pieces]
        groups[gi : gi + 1] = pieces
    block = "\n" + "".join(f"    {' '.join(names)} - {typ}\n" for names, typ in groups) + "  "
    new_text = text[: match.start(1)] + block + text[match.end(1) :]
    digest = hashlib.sha256(new_text.encode()).hexdigest()[:16]
    folder = os.path.join(tempfile.gettempdir(), "liberopro-bddl")
    os.makedirs(folder, exist_ok=True)
    out = os.path.join(folder, f"{os.path.splitext(os.path.basename(path))[0]}-{digest}.bddl")
    if not os.path.exists(out):
        tmp = f"{out}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(new_text)
        os.replace(tmp, out)
    return out


def object_order(bddl_path: str) -> list[str]:
    """Movable object names in LIBERO's order (the order of their free joints in ``qpos``)."""
    from libero.libero.envs import bddl_utils

    parsed = bddl_utils.robosuite_parse_problem(bddl_path)
    return [n for names in parsed["objects"].values() for n in names]


def check_state_size(model: Any, init_states: np.ndarray) -> None:
    """Raise ``ValueError`` unless LIBERO's init states (``[time, qpos, qvel]``) fit a scene's
    MuJoCo ``model`` (``LiberoScene.model``): ``1 + nq + nv`` columns."""
    need = 1 + model.nq + model.nv
    if init_states.shape[1] != need:
        raise ValueError(
            f"init states have {init_states.shape[1]} columns, the variant's model needs {need} "
            f"(nq={model.nq}, nv={model.nv})"
        )


# --------------------------------------------------------------------------- props
def _fmt(values) -> str:
    return " ".join(f"{float(v):.6g}" for v in values)


def _primitive(spec: PropSpec) -> list[ET.Element]:
    """A box / cylinder: a visual geom (group 1, rendered) and, when it collides, a collision
    geom (group 0, not rendered: robosuite shows only group 1 offscreen)."""
    kind = spec.kind
    expected = {"box": 3, "cylinder": 2}
    if len(spec.size) != expected[kind]:
        raise ValueError(f"prop {spec.name}: a {kind} needs {expected[kind]} size values, got {spec.size}")
    rgba = spec.rgba if spec.rgba is not None else (0.5, 0.5, 0.5, 1.0)
    common = {"type": kind, "size": _fmt(spec.size), "rgba": _fmt(rgba)}
    geoms = [
        ET.Element("geom", {**common, "name": f"{spec.name}_visual", "group": "1", "contype": "0", "conaffinity": "0"})
    ]
    if spec.collide:
        geoms.append(ET.Element("geom", {**common, "name": f"{spec.name}_collision", "group": "0"}))
    return geoms


def _object_copy(spec: PropSpec, category: str) -> tuple[list[ET.Element], list[ET.Element]]:
    """A static copy of a LIBERO registry object (``libero.libero.envs.objects``): its body tree
    without joints or sites, at the prop body's origin, and its assets (names prefixed with the
    prop's name by robosuite). With ``spec.rgba`` every visual geom gets a plain material of
    that colour (a recoloured look-alike)."""
    from libero.libero.envs.objects import get_object_dict

    registry = get_object_dict()
    if category not in registry:
        raise ValueError(f"prop {spec.name}: unknown LIBERO object type {category!r}")
    obj = registry[category](name=spec.name)
    body = copy.deepcopy(obj.get_obj())
    for parent in list(body.iter()):
        for child in list(parent):
            if child.tag in ("joint", "freejoint", "site"):
                parent.remove(child)
    body.set("pos", "0 0 0")
    for key in ("quat", "euler", "axisangle"):
        body.attrib.pop(key, None)
    assets = [copy.deepcopy(a) for a in obj.asset]
    if spec.rgba is not None:
        mat = f"{spec.name}_recolour"
        assets.append(
            ET.Element("material", {"name": mat, "rgba": _fmt(spec.rgba), "specular": "0.3", "shininess": "0.3"})
        )
        for g in body.iter("geom"):
            if g.get("group") == "1":
                g.set("material", mat)
                g.attrib.pop("rgba", None)
    if not spec.collide:
        for g in body.iter("geom"):
            g.set("contype", "0")
            g.set("conaffinity", "0")
    return [body], assets


def _object_type_of(scene_objects: dict, spec: PropSpec) -> str:
    """``object:<type>`` -> type; ``clone:<scene object>`` -> that object's LIBERO type."""
    kind, _, arg = spec.kind.partition(":")
    if kind == "object":
        return arg
    if arg not in scene_objects:
        raise ValueError(f"prop {spec.name}: no object {arg!r} in the scene to clone")
    return scene_objects[arg]


def props_xml(xml: str, props: tuple[PropSpec, ...], types: dict[str, str], statistic: dict[str, str]) -> str:
    """The model XML ``xml`` with ``props`` appended (parked) at the end of the worldbody and
    their assets at the end of the asset block. ``types``: scene object name -> LIBERO type
    (for ``clone:`` props). ``statistic``: the task model's ``<statistic>`` attributes, written
    explicitly so that the compiler does not recompute them with the props counted (the extent
    sets the renderer's clipping planes and shadow map, the mean inertia scales the solver)."""
    root = ET.fromstring(xml)
    asset, world = root.find("asset"), root.find("worldbody")
    if asset is None or world is None:
        raise ValueError("the model XML has no <asset> or no <worldbody>")
    for old in root.findall("statistic"):
        root.remove(old)
    root.insert(list(root).index(asset), ET.Element("statistic", statistic))
    names = {e.get("name") for e in root.iter() if e.get("name")}
    for i, spec in enumerate(props):
        if not spec.name.startswith("liberopro_prop_") or spec.name in names:
            raise ValueError(f"prop name {spec.name!r} must start with liberopro_prop_ and be unique")
        holder = ET.Element("body", {"name": spec.name, "pos": _fmt(parked_pos(i))})
        extra_assets: list[ET.Element]
        if spec.kind in ("box", "cylinder"):
            children, extra_assets = _primitive(spec), []
        elif spec.kind.startswith(("object:", "clone:")):
            children, extra_assets = _object_copy(spec, _object_type_of(types, spec))
        else:
            raise ValueError(f"prop {spec.name}: unknown kind {spec.kind!r}")
        for child in children:
            holder.append(child)
        world.append(holder)
        for a in extra_assets:
            asset.append(a)
    return ET.tostring(root, encoding="unicode")


def add_props(inner: Any, props: tuple[PropSpec, ...]) -> dict[str, int]:
    """Rebuild the simulation of a scene's LIBERO env (``LiberoScene.inner``) with ``props`` (see
    the module docstring). Returns prop name -> body id. The ids of every body, geom, joint and
    site of the task's own model are unchanged (props come last)."""
    types = {name: obj.category_name for name, obj in inner.objects_dict.items()}
    counts = (inner.sim.model.nbody, inner.sim.model.ngeom, inner.sim.model.nq, inner.sim.model.nv)

    stat = inner.sim.model._model.stat
    statistic = {
        "meaninertia": repr(float(stat.meaninertia)),
        "meanmass": repr(float(stat.meanmass)),
        "meansize": repr(float(stat.meansize)),
        "extent": repr(float(stat.extent)),
        "center": " ".join(repr(float(v)) for v in stat.center),
    }

    def processor(xml: str) -> str:
        return props_xml(xml, props, types, statistic)

    inner.set_xml_processor(processor)
    # The same sequence as robosuite's hard reset, without re-loading the task model.
    inner._destroy_viewer()
    inner._destroy_sim()
    inner._initialize_sim()
    inner._reset_internal()
    inner.sim.forward()
    observables = inner._setup_observables()
    for name, obs in observables.items():
        inner.modify_observable(observable_name=name, attribute="sensor", modifier=obs._sensor)
    model = inner.sim.model
    if (model.nq, model.nv) != counts[2:]:
        raise RuntimeError(f"props changed nq/nv from {counts[2:]} to {(model.nq, model.nv)}")
    ids = {spec.name: model.body_name2id(spec.name) for spec in props}
    if min(ids.values()) < counts[0]:
        raise RuntimeError("props were not appended after the task's bodies")
    return ids


def park_props(model: Any, props: dict[str, int]) -> None:
    """Put every prop (``props``: name -> body id, ``LiberoScene.props``) of a scene's MuJoCo
    ``model`` back at its parking spot with identity orientation (called by
    :meth:`LiberoScene.start_episode` after LIBERO's reset)."""
    for i, bid in enumerate(props.values()):
        model.body_pos[bid] = parked_pos(i)
        model.body_quat[bid] = (1.0, 0.0, 0.0, 0.0)
