"""A small catalogue of LIBERO's object types (``libero.libero.envs.objects``) by category, with
the noun phrases that are true of each, for the shifts that add or swap objects: S06 (another
instance of the target's category), S07 (unrelated clutter), S08 / D06 (a look-alike of the
target).

Every type listed here has its assets in the installed packages and was looked at in a render
(the phrases describe what it looks like in LIBERO's renders: ``white_bottle`` is a green glass
bottle, ``red_akita_black_bowl`` a red bowl). Types whose renders did not match their names
(``yellow_book``, ``libero_mug_yellow`` render grey) or that look like another type
(``black_bowl``, ``new_salad_dressing``) are left out.

Instruction rules (``docs/definition.md``, "Static shifts": S06 "the instruction names the new
instance only where the old wording would be false"; S08 "the instruction stays unambiguous"):

* The instruction's noun phrases are found by longest match against every phrase of the
  catalogue ("black bowl" before "bowl").
* S06: the phrase naming the target is kept when it is true of the new instance ("bowl" of a
  white bowl) and replaced by the new instance's own name otherwise ("black bowl" ->
  "white bowl").
* S08 / D06: a look-alike must not fit any noun phrase of the instruction. When the target's
  phrase fits it ("bowl" fits a white bowl), the phrase becomes the target's own full name
  ("the bowl" -> "the black bowl": same meaning in the task's scene, unambiguous with the
  look-alike). A look-alike that still fits after that is not used. A target named in the
  plural ("both moka pots") has no such rewrite: S08/D06 do not apply there.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from liberopro.sim.tasks import TaskRef, task_info


@dataclass(frozen=True)
class ObjectType:
    """A LIBERO object type: its category, the noun phrases true of it (the first is its own
    full name) and its upright pose as a roll about x from the model's identity orientation
    (the HOPE cans, bottles and cartons lie on their side at identity; LIBERO's stored init
    states stand them up with a 90 deg roll: measured on the settled init states)."""

    name: str
    category: str
    phrases: tuple[str, ...]
    roll_deg: float = 0.0


def _t(name: str, category: str, *phrases: str) -> ObjectType:
    return ObjectType(name, category, phrases, 90.0 if name in _ROLLED else 0.0)


_ROLLED = {
    "alphabet_soup",
    "red_alphabet_soup",
    "tomato_sauce",
    "yellow_tomato_sauce",
    "ketchup",
    "blue_ketchup",
    "green_ketchup",
    "salad_dressing",
    "red_salad_dressing",
    "milk",
    "yellow_milk",
    "orange_juice",
    "red_orange_juice",
}


CATALOGUE: dict[str, ObjectType] = {
    t.name: t
    for t in (
        _t("akita_black_bowl", "bowl", "black bowl", "bowl"),
        _t("white_bowl", "bowl", "white bowl", "bowl"),
        _t("yellow_bowl", "bowl", "yellow bowl", "bowl"),
        _t("red_akita_black_bowl", "bowl", "red bowl", "bowl"),
        _t("porcelain_mug", "mug", "white mug", "mug"),
        _t("red_coffee_mug", "mug", "red mug", "red coffee mug", "mug"),
        _t("white_yellow_mug", "mug", "yellow and white mug", "mug"),
        _t("black_book", "book", "black book", "book"),
        _t("red_yellow_book", "book", "red book", "book"),
        _t("moka_pot", "moka pot", "silver moka pot", "moka pot", "moka pots"),
        _t("yellow_moka_pot", "moka pot", "yellow moka pot", "moka pot", "moka pots"),
        _t("plate", "plate", "white plate", "plate"),
        _t("yellow_plate", "plate", "yellow plate", "plate"),
        _t("wine_bottle", "wine bottle", "black wine bottle", "wine bottle", "black bottle", "bottle"),
        _t("white_bottle", "wine bottle", "green wine bottle", "wine bottle", "green bottle", "bottle"),
        _t("glazed_rim_porcelain_ramekin", "ramekin", "white ramekin", "ramekin"),
        _t("red_ramekin", "ramekin", "red ramekin", "ramekin"),
        _t("alphabet_soup", "can", "alphabet soup", "alphabet soup can", "can"),
        _t("tomato_sauce", "can", "tomato sauce", "tomato sauce can", "can"),
        _t("red_alphabet_soup", "can", "red alphabet soup", "alphabet soup", "alphabet soup can", "can"),
        _t("yellow_tomato_sauce", "can", "yellow tomato sauce", "tomato sauce", "tomato sauce can", "can"),
        _t("ketchup", "sauce bottle", "ketchup", "ketchup bottle", "bottle"),
        _t("bbq_sauce", "sauce bottle", "bbq sauce", "bbq sauce bottle", "bottle"),
        _t("salad_dressing", "sauce bottle", "salad dressing", "salad dressing bottle", "bottle"),
        _t("blue_ketchup", "sauce bottle", "blue ketchup", "ketchup", "bottle"),
        _t("green_ketchup", "sauce bottle", "green ketchup", "ketchup", "bottle"),
        _t("green_bbq_sauce", "sauce bottle", "green bbq sauce", "bbq sauce", "bottle"),
        _t("red_salad_dressing", "sauce bottle", "red salad dressing", "salad dressing", "bottle"),
        _t("cream_cheese", "box", "cream cheese", "cream cheese box", "box"),
        _t("butter", "box", "butter", "butter box", "box"),
        _t("chocolate_pudding", "box", "chocolate pudding", "chocolate pudding box", "box"),
        _t("popcorn", "box", "popcorn", "popcorn box", "box"),
        _t("cookies", "box", "cookie box", "cookies", "box"),
        _t("red_cream_cheese", "box", "red cream cheese box", "cream cheese", "cream cheese box", "box"),
        _t("green_butter", "box", "green butter", "butter", "butter box", "box"),
        _t("green_chocolate_pudding", "box", "green chocolate pudding", "chocolate pudding", "box"),
        _t("milk", "carton", "milk", "milk carton", "carton"),
        _t("orange_juice", "carton", "orange juice", "orange juice carton", "carton"),
        _t("yellow_milk", "carton", "yellow milk carton", "milk", "carton"),
        _t("red_orange_juice", "carton", "red orange juice carton", "orange juice", "carton"),
    )
}

#: Bounding box (x, y, z extents, m) of each type at LIBERO's identity orientation, measured on
#: static copies (geom bounding boxes, collision and visual geoms; mujoco 2.3.7).
SIZE_M: dict[str, tuple[float, float, float]] = {
    "akita_black_bowl": (0.157, 0.157, 0.054),
    "white_bowl": (0.090, 0.088, 0.037),
    "yellow_bowl": (0.157, 0.157, 0.054),
    "red_akita_black_bowl": (0.157, 0.157, 0.054),
    "porcelain_mug": (0.182, 0.099, 0.176),
    "red_coffee_mug": (0.148, 0.095, 0.156),
    "white_yellow_mug": (0.145, 0.107, 0.117),
    "black_book": (0.031, 0.114, 0.139),
    "red_yellow_book": (0.028, 0.102, 0.125),
    "moka_pot": (0.081, 0.163, 0.182),
    "yellow_moka_pot": (0.081, 0.163, 0.182),
    "plate": (0.164, 0.164, 0.020),
    "yellow_plate": (0.164, 0.164, 0.020),
    "wine_bottle": (0.043, 0.045, 0.159),
    "white_bottle": (0.043, 0.045, 0.159),
    "glazed_rim_porcelain_ramekin": (0.124, 0.124, 0.044),
    "red_ramekin": (0.124, 0.124, 0.044),
    "alphabet_soup": (0.085, 0.085, 0.088),
    "tomato_sauce": (0.083, 0.086, 0.087),
    "red_alphabet_soup": (0.085, 0.085, 0.088),
    "yellow_tomato_sauce": (0.083, 0.086, 0.087),
    "ketchup": (0.065, 0.149, 0.045),
    "bbq_sauce": (0.050, 0.034, 0.114),
    "salad_dressing": (0.066, 0.148, 0.045),
    "blue_ketchup": (0.065, 0.149, 0.045),
    "green_ketchup": (0.065, 0.149, 0.045),
    "green_bbq_sauce": (0.050, 0.034, 0.114),
    "red_salad_dressing": (0.066, 0.148, 0.045),
    "cream_cheese": (0.083, 0.043, 0.020),
    "butter": (0.078, 0.040, 0.018),
    "chocolate_pudding": (0.084, 0.051, 0.031),
    "popcorn": (0.064, 0.043, 0.020),
    "cookies": (0.063, 0.085, 0.021),
    "red_cream_cheese": (0.083, 0.043, 0.020),
    "green_butter": (0.078, 0.040, 0.018),
    "green_chocolate_pudding": (0.084, 0.051, 0.031),
    "milk": (0.060, 0.145, 0.058),
    "orange_juice": (0.079, 0.145, 0.079),
    "yellow_milk": (0.060, 0.145, 0.058),
    "red_orange_juice": (0.079, 0.145, 0.079),
}

#: Unrelated objects for clutter (S07): small everyday objects (at most about 15 cm across),
#: drawn from categories absent from the scene.
CLUTTER_TYPES: tuple[str, ...] = (
    "red_coffee_mug",
    "white_yellow_mug",
    "black_book",
    "red_yellow_book",
    "glazed_rim_porcelain_ramekin",
    "red_ramekin",
    "alphabet_soup",
    "tomato_sauce",
    "ketchup",
    "bbq_sauce",
    "cream_cheese",
    "butter",
    "chocolate_pudding",
    "popcorn",
    "milk",
    "orange_juice",
)

_ALL_PHRASES = sorted({p for t in CATALOGUE.values() for p in t.phrases}, key=len, reverse=True)


@functools.cache
def scene_types(ref: TaskRef) -> dict[str, str]:
    """BDDL object name -> LIBERO type, for the task's movable objects (no simulator)."""
    from libero.libero.envs import bddl_utils

    parsed = bddl_utils.robosuite_parse_problem(task_info(ref).bddl_path)
    return {name: typ for typ, names in parsed["objects"].items() for name in names}


def noun_phrases(text: str) -> list[tuple[int, int, str]]:
    """Catalogue phrases in ``text`` by longest match, left to right: (start, end, phrase)."""
    found, i, low = [], 0, text.lower()
    while i < len(low):
        for p in _ALL_PHRASES:
            if (
                low.startswith(p, i)
                and (i == 0 or not low[i - 1].isalnum())
                and (i + len(p) == len(low) or not low[i + len(p)].isalnum())
            ):
                found.append((i, i + len(p), p))
                i += len(p)
                break
        else:
            i += 1
    return found


def target_phrase(text: str, target_type: str) -> tuple[int, int, str] | None:
    """The first noun phrase of ``text`` that is true of ``target_type`` (None if none is)."""
    phrases = set(CATALOGUE[target_type].phrases) if target_type in CATALOGUE else set()
    return next((np_ for np_ in noun_phrases(text) if np_[2] in phrases), None)


def _replace(text: str, span: tuple[int, int, str], new: str) -> str:
    return text[: span[0]] + new + text[span[1] :]


def instance_instruction(text: str, old_type: str, new_type: str) -> str | None:
    """S06: the instruction after the target of type ``old_type`` became ``new_type``, or None
    when the target's phrase cannot be found. Unchanged when the old phrase is true of the new
    instance."""
    span = target_phrase(text, old_type)
    if span is None:
        return None
    if span[2] in CATALOGUE[new_type].phrases:
        return text
    plural = span[2].endswith("s") and span[2][:-1] in CATALOGUE[old_type].phrases
    if plural:
        return None
    return _replace(text, span, CATALOGUE[new_type].phrases[0])


def lookalike_instruction(text: str, target_type: str, lookalike: str) -> str | None:
    """S08 / D06: the instruction that stays unambiguous with a ``lookalike`` in the scene, or
    None when there is none (see the module docstring)."""
    span = target_phrase(text, target_type)
    if span is None or span[2] not in CATALOGUE[target_type].phrases:
        return None
    if span[2].endswith("s") and span[2][:-1] in CATALOGUE[target_type].phrases:
        return None  # plural ("both moka pots"): a third one makes "both" ambiguous
    fits = set(CATALOGUE[lookalike].phrases)
    if span[2] in fits:
        own = CATALOGUE[target_type].phrases[0]
        if own in fits:
            return None
        text = _replace(text, span, own)
    if any(p in fits for _, _, p in noun_phrases(text)):
        return None
    return text


def lookalikes(ref: TaskRef, target: str, text: str) -> list[str]:
    """Look-alike types for ``target`` (same category, another type) that keep ``text``
    unambiguous, those absent from the scene first."""
    types = scene_types(ref)
    ttype = types.get(target)
    if ttype not in CATALOGUE:
        return []
    present = set(types.values())
    cands = [
        t.name
        for t in CATALOGUE.values()
        if t.category == CATALOGUE[ttype].category
        and t.name != ttype
        and lookalike_instruction(text, ttype, t.name) is not None
    ]
    return sorted(cands, key=lambda n: (n in present, n))


#: S06 keeps the replacement's largest horizontal extent within these factors of the target's,
#: so that it still fits its receiver and the gripper (a cookie box does not go in a bowl).
INSTANCE_SIZE_RATIO = (0.5, 1.25)


def natural_quat(name: str) -> np.ndarray:
    """Upright orientation (w, x, y, z), shape (4,) float64, of a catalogued type: its
    ``roll_deg`` (:data:`CATALOGUE`) about x; identity for other types.

    scipy's ``Rotation.from_euler`` (imported here: the catalog reaches this module at call time
    and stays light), bit-identical to the hand formula ``(cos(r/2), sin(r/2), 0, 0)`` it replaced
    (``tests/evaluator/test_rotations.py`` pins it: the orientation is set into MuJoCo by S06).
    """
    from scipy.spatial.transform import Rotation

    roll_deg = CATALOGUE[name].roll_deg if name in CATALOGUE else 0.0
    return Rotation.from_euler("x", roll_deg, degrees=True).as_quat(scalar_first=True)


def natural_size(name: str) -> tuple[float, float, float]:
    """(x, y, z) extents of a type standing upright (:data:`SIZE_M` with the roll applied)."""
    x, y, z = SIZE_M[name]
    return (x, z, y) if CATALOGUE[name].roll_deg else (x, y, z)


def size_ratio(old: str, new: str) -> float:
    """Largest horizontal extent of ``new`` over that of ``old``, both upright."""
    return max(natural_size(new)[:2]) / max(natural_size(old)[:2])


def instances(ref: TaskRef, target: str, text: str) -> list[str]:
    """Replacement types for ``target`` (S06): same category, another type, absent from the
    scene, of a similar size (:data:`INSTANCE_SIZE_RATIO`), with an instruction that can name
    it."""
    types = scene_types(ref)
    ttype = types.get(target)
    if ttype not in CATALOGUE:
        return []
    present = set(types.values())
    out = []
    for t in CATALOGUE.values():
        if t.category != CATALOGUE[ttype].category or t.name == ttype or t.name in present:
            continue
        if not INSTANCE_SIZE_RATIO[0] <= size_ratio(ttype, t.name) <= INSTANCE_SIZE_RATIO[1]:
            continue
        if instance_instruction(text, ttype, t.name) is not None:
            out.append(t.name)
    return out


def clutter_pool(ref: TaskRef) -> list[str]:
    """Clutter types for the task: categories absent from the scene (so nothing added can be
    taken for an object the instruction names)."""
    present = {CATALOGUE[o].category for o in scene_types(ref).values() if o in CATALOGUE}
    text = task_info(ref).instruction
    named = {p for _, _, p in noun_phrases(text)}
    return [
        t for t in CLUTTER_TYPES if CATALOGUE[t].category not in present and not (set(CATALOGUE[t].phrases) & named)
    ]


def phrase_of(text: str) -> list[str]:
    """The catalogue noun phrases of ``text`` (for records and tests)."""
    return [p for _, _, p in noun_phrases(text)]
