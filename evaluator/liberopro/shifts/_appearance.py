"""Changing how a set of geoms looks, and measuring it on rendered pixels: the shared realisation of
the appearance shifts (S10 object, S11 support surface, S13 floor and walls).

A :class:`Look` gives a texture and a colour:

* ``texture="none"``: a flat colour. Every geom of the set loses its material
  (``geom_matid = -1``) and takes ``rgb`` as ``geom_rgba``: texture and colour both change.
* ``texture="planks" | "wood" | "plaster"``: the set's materials show another texture, one of
  the arena textures every LIBERO scene loads (``texplane``: light wooden planks, the usual
  floor; ``tex-table``: light wood, the usual table top; ``tex-wall``: white plaster, the usual
  walls), tinted by ``rgb`` (``mat_rgba`` multiplies the texture). Geoms of the set without a
  material take the first edited material.

``textures`` is a preference order: the first entry that is not already the texture of the set
is used (so a planked floor never "changes" to planks), and the record says which.

Only material and geom fields are edited (``mat_texid``, ``mat_rgba``, ``geom_matid``,
``geom_rgba``), never texture pixels: MuJoCo reads these fields at every render, whereas edited
pixels would have to be uploaded to the GL context again after every reset
(``docs/libero-facts.md``, "Editing the scene"). All of them go through
:meth:`LiberoScene.model_field`, so the next episode starts from the task's own look. Mass, friction
and every other physical property are untouched.

Measurement (:class:`Renders`): the third-person camera renders the scene at :data:`MEASURE_PX`
square, with segmentation, just before and just after the edit (same state, so every difference
is the edit's). Change of a pixel: mean absolute difference over R, G, B in grey levels (0-255).
Pixels of the edited geoms (from the segmentation) are compared with all *other* pixels, leaving
out a one-pixel border around the edited region: the colour render is antialiased, so the edge
pixels of neighbouring objects blend in the edited colour. Mirrors are reported apart
(``mirrors``): MuJoCo draws reflections on planes and on the top of boxes whose material has a
reflectance (LIBERO's stove top mirrors the walls), and those pixels rightly change with what
they reflect.
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np

# The Look model, its textures and the measurement thresholds belong to the catalog (the
# post-conditions state them); the drawing of a look is declared there too (LookDraw).
from liberopro.catalog.environment import (  # noqa: F401 - re-exported for the appearance shifts
    MAX_OTHERS_CHANGED,
    MEASURE_PX,
    MIN_REGION_CHANGED,
    PIXEL_CHANGED,
    TEXTURE_NAMES,
    Look,
    TextureName,
)

CAMERA = "agentview"
#: Look texture name -> MuJoCo texture name (present in every LIBERO arena).
ARENA_TEXTURES = {"planks": "texplane", "wood": "tex-table", "plaster": "tex-wall"}


def visual_geoms(scene, roots: set[int]) -> list[int]:
    """Geoms of the given root bodies that the cameras draw (not group 0, LIBERO's collision
    group, which robosuite hides; not transparent)."""
    m = scene.model
    return [
        g for g in range(m.ngeom) if scene.entity_of_geom(g) in roots and m.geom_group[g] != 0 and m.geom_rgba[g][3] > 0
    ]


def apply_look(scene, geoms: Sequence[int], look: Look) -> dict:
    """Give ``geoms`` the look (module docstring). Returns what was edited; raises ``ValueError``
    when no texture of the preference order is usable."""
    m = scene.model
    matid = scene.model_field("geom_matid")
    geom_rgba = scene.model_field("geom_rgba")
    mat_texid = scene.model_field("mat_texid")
    mat_rgba = scene.model_field("mat_rgba")
    mats = sorted({int(matid[g]) for g in geoms if matid[g] >= 0})
    own = {int(mat_texid[k]) for k in mats}
    chosen: str | None = None
    texid = -1
    for name in look.textures:
        if name == "none":
            chosen = name
            break
        tid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_TEXTURE, ARENA_TEXTURES[name])
        if tid >= 0 and tid not in own:
            chosen, texid = name, tid
            break
    if chosen is None:
        raise ValueError(f"none of the textures {list(look.textures)} differs from the current one")
    rgb = np.asarray(look.rgb)
    if chosen == "none" or not mats:
        chosen = "none"
        for g in geoms:
            matid[g] = -1
            geom_rgba[g][:3] = rgb
    else:
        for k in mats:
            mat_texid[k] = texid
            mat_rgba[k][:3] = rgb
        for g in geoms:
            if matid[g] < 0:
                matid[g] = mats[0]
    return {
        "texture": chosen,
        "rgb": [round(float(c), 3) for c in rgb],
        "materials": [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_MATERIAL, k) for k in mats] if chosen != "none" else [],
        "geoms": len(geoms),
    }


class Renders:
    """The third-person view before an edit: colour and segmentation at :data:`MEASURE_PX`."""

    def __init__(self, scene) -> None:
        self.scene = scene
        self.seg = scene.render(CAMERA, MEASURE_PX, segmentation=True)
        self.before = scene.render(CAMERA, MEASURE_PX).astype(np.float32)
        self.mirrors = mirror_geoms(scene)

    def measure(self, regions: dict[str, Sequence[int]]) -> dict:
        """Pixel change after the edit, for each named set of geoms and for every other pixel
        (``others``): pixels, mean change (grey levels), fraction of changed pixels."""
        after = self.scene.render(CAMERA, MEASURE_PX).astype(np.float32)
        change = np.abs(after - self.before).mean(axis=2)
        out: dict[str, dict] = {}
        covered = np.zeros(change.shape, dtype=bool)
        for name, geoms in regions.items():
            mask = np.isin(self.seg, list(geoms))
            covered |= mask
            out[name] = _stats(change, mask)
        mirrors = np.isin(self.seg, self.mirrors) & ~covered
        out["mirrors"] = _stats(change, mirrors)
        out["others"] = _stats(change, ~_dilate(covered) & ~mirrors)
        return out


def mirror_geoms(scene) -> list[int]:
    """Planes and boxes whose material reflects (MuJoCo renders reflections on those only)."""
    m = scene.model
    kinds = (int(mujoco.mjtGeom.mjGEOM_PLANE), int(mujoco.mjtGeom.mjGEOM_BOX))
    return [
        g
        for g in range(m.ngeom)
        if m.geom_type[g] in kinds and m.geom_matid[g] >= 0 and m.mat_reflectance[m.geom_matid[g]] > 0
    ]


def _dilate(mask: np.ndarray) -> np.ndarray:
    """``mask`` grown by one pixel in the 8-neighbourhood."""
    pad = np.pad(mask, 1)
    h, w = mask.shape
    out = np.zeros_like(mask)
    for dy in (0, 1, 2):
        for dx in (0, 1, 2):
            out |= pad[dy : dy + h, dx : dx + w]
    return out


def change_problem(measured: dict, region: str, min_mean: float, min_share: float = 0.0) -> str | None:
    """None when the edited ``region`` covers at least ``min_share`` of the view, its pixels
    change by at least ``min_mean`` grey levels on average with at least
    :data:`MIN_REGION_CHANGED` of them changed, and at most :data:`MAX_OTHERS_CHANGED` of the
    other pixels changed; else why not."""
    r, o = measured[region], measured["others"]
    share = r["pixels"] / MEASURE_PX**2
    if r["pixels"] == 0 or share < min_share:
        return (
            f"the {region} covers {share:.1%} of the third-person view (needs {max(min_share, 1 / MEASURE_PX**2):.1%})"
        )
    if r["mean_change"] < min_mean or r["changed_fraction"] < MIN_REGION_CHANGED:
        return (
            f"the {region}'s pixels changed by {r['mean_change']} grey levels on average, "
            f"{r['changed_fraction']:.0%} of them visibly (needs {min_mean} and {MIN_REGION_CHANGED:.0%})"
        )
    if o["changed_fraction"] > MAX_OTHERS_CHANGED:
        return f"{o['changed_fraction']:.1%} of the other pixels changed too (at most {MAX_OTHERS_CHANGED:.0%})"
    return None


def _stats(change: np.ndarray, mask: np.ndarray) -> dict:
    n = int(mask.sum())
    if n == 0:
        return {"pixels": 0, "mean_change": 0.0, "changed_fraction": 0.0}
    vals = change[mask]
    return {
        "pixels": n,
        "mean_change": round(float(vals.mean()), 2),
        "changed_fraction": round(float((vals > PIXEL_CHANGED).mean()), 4),
    }


def ground_below(scene, name: str) -> int:
    """Root body of the ground (table or floor) under an object or fixture: a ray cast straight
    down from its position, passing through everything that is not ground. -1 if none."""
    from liberopro.shifts._placement import entity_pose, is_ground

    start = entity_pose(scene, name)[0] + np.array([0, 0, 0.02])
    geomid = np.array([-1], dtype=np.int32)
    for _ in range(40):
        dist = mujoco.mj_ray(scene.model, scene.data, start, np.array([0, 0, -1.0]), None, 1, -1, geomid)
        if dist < 0 or geomid[0] < 0:
            return -1
        root = scene.entity_of_geom(int(geomid[0]))
        if is_ground(scene, root):
            return root
        start = start - np.array([0, 0, dist + 1e-4])
    return -1
