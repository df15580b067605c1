"""Review pages: does each shift look as named?

``liberopro review --manifest FILE --out DIR`` renders, for each chosen instance, what the policy
receives and what the scene really looks like:

* static shift: the third-person and wrist views of the nominal episode and of the shifted one,
  after settling (same init state and seed), as the policy receives them and as the scene is;
* runtime shift: frames around the step at which it fired (5 before to 10 after), the policy's
  view beside the true view, and an MP4 of steps [fire - 10, fire + 20];
* execution shifts (actions, not images): an MP4 of a short rollout under a privileged
  scripted controller, nominal and shifted, so the motion can be compared.

Rollouts use the privileged scripted controller (:mod:`liberopro.oracle.scripted`) so that the robot
really reaches the trigger phases; it is tooling, not a policy. The page is static HTML with a
contact sheet (PNG thumbnails) per shift. Review pages show instance parameters: run them on
training manifests only; never publish pages of hidden evaluation instances.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import imageio.v2 as imageio
import numpy as np

from liberopro.catalog import shift_class
from liberopro.episode.local_policy import LocalPolicyClient
from liberopro.episode.runner import CurrentScene, EpisodeRunner, RunSettings
from liberopro.episode.video import write_mp4
from liberopro.instances.build import EpisodePlan, Instance, semantics_of
from submission_spec import CameraSpec, Observation, PolicyMetadata

if TYPE_CHECKING:
    from liberopro.oracle.scripted import ScriptedController

SIZE = 160


@dataclass
class Capture:
    """Per step: the images the policy received and the true third-person view."""

    delivered: list[dict[str, np.ndarray]] = field(default_factory=list)
    true_view: list[np.ndarray] = field(default_factory=list)


class _ReviewPolicy:
    """Records what it receives; acts with the privileged scripted controller (or holds)."""

    def __init__(self, scene: CurrentScene, ref, scripted: bool) -> None:
        self.metadata = PolicyMetadata(
            policy_name="liberopro-review (privileged scripted controller, not a submission)",
            cameras=[
                CameraSpec(name="agentview", height=SIZE, width=SIZE),
                CameraSpec(name="wrist", height=SIZE, width=SIZE),
            ],
            image_orientation="upright",
            chunk_length=1,
            replan_steps=1,
        )
        self.scene, self.ref, self.scripted = scene, ref, scripted
        self.capture = Capture()
        self._controller: ScriptedController | None = None

    def _scene(self):
        """The scene this episode runs in (a prop or swap variant has its own scene)."""
        return self.scene()

    def reset(self, episode_id: str, instruction: str) -> None:
        self.capture = Capture()
        self._controller = None
        if self.scripted:
            from liberopro.oracle.scripted import ScriptedController

            self._controller = ScriptedController(self._scene(), semantics_of(self.ref))

    def act(self, obs: Observation) -> np.ndarray:
        self.capture.delivered.append({k: v.copy() for k, v in obs.images.items()})
        self.capture.true_view.append(self._scene().render("agentview", size=SIZE)[::-1].copy())
        if self._controller is None:
            return np.array([[0, 0, 0, 0, 0, 0, -1.0]])
        return np.asarray(self._controller())[None]


def _run(inst: Instance, scenes: dict, steps: int, scripted: bool, seed: int):
    settings = RunSettings(render_size=SIZE, max_steps=steps)
    scene = CurrentScene()
    policy = _ReviewPolicy(scene, inst.task, scripted)
    runner = scene.bind(EpisodeRunner(LocalPolicyClient(policy), policy.metadata, settings, scenes=scenes))
    record = runner.run_episode(EpisodePlan(inst, 0, 0, seed))
    return record, policy.capture


def _png(path: Path, img: np.ndarray) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    imageio.imwrite(path, img)
    return path.name


def review_instance(inst: Instance, out_dir: Path, scenes: dict, seed: int = 0) -> dict:
    """Render one instance's review assets into ``out_dir/<instance_id>/``; returns its entry."""
    classes = [shift_class(s.id) for s in inst.shifts]
    runtime = any(c.kind == "runtime" for c in classes)
    execution = any(c.category == "Execution" for c in classes)
    d = out_dir / inst.instance_id
    entry: dict = {
        "instance": inst.model_dump(mode="json"),
        "case": inst.case,
        "task": str(inst.task),
        "images": [],
        "videos": [],
    }
    nominal = Instance(instance_id=inst.instance_id + "-nominal", suite=inst.suite, task_index=inst.task_index)
    if not runtime:
        steps = 40 if execution else 1
        rec_n, cap_n = _run(nominal, scenes, steps, scripted=execution, seed=seed)
        rec, cap = _run(inst, scenes, steps, scripted=execution, seed=seed)
        if cap_n.delivered and cap.delivered:
            for cam in ("agentview", "wrist"):
                entry["images"].append(
                    {
                        "label": f"{cam}: nominal, as the policy receives it",
                        "file": _png(d / f"{cam}-nominal.png", cap_n.delivered[0][cam]),
                    }
                )
                entry["images"].append(
                    {
                        "label": f"{cam}: shifted, as the policy receives it",
                        "file": _png(d / f"{cam}-shifted.png", cap.delivered[0][cam]),
                    }
                )
            entry["images"].append(
                {"label": "third-person, true scene (shifted)", "file": _png(d / "true-shifted.png", cap.true_view[0])}
            )
        if execution:
            entry["videos"].append(
                {"label": "nominal rollout (scripted)", "file": write_mp4(d / "nominal.mp4", cap_n.true_view)}
            )
            entry["videos"].append(
                {"label": "shifted rollout (scripted)", "file": write_mp4(d / "shifted.mp4", cap.true_view)}
            )
    else:
        fallback = max(
            int(s.params.get("fallback_step", 0)) for s in inst.shifts if shift_class(s.id).kind == "runtime"
        )
        rec, cap = _run(inst, scenes, fallback + 30, scripted=True, seed=seed)
        fired = [s.fired_at_step for s in rec.shifts if s.kind == "runtime"]
        t = fired[0] if fired and fired[0] is not None else None
        if t is not None and cap.delivered:
            for k in (-5, 0, 2, 5, 10):
                i = t + k
                if 0 <= i < len(cap.delivered):
                    entry["images"].append(
                        {
                            "label": f"step {i} ({k:+d}): policy's view",
                            "file": _png(d / f"policy-{i:03d}.png", cap.delivered[i]["agentview"]),
                        }
                    )
                    entry["images"].append(
                        {
                            "label": f"step {i} ({k:+d}): true view",
                            "file": _png(d / f"true-{i:03d}.png", cap.true_view[i]),
                        }
                    )
            lo, hi = max(0, t - 10), min(len(cap.delivered), t + 20)
            side = [np.concatenate([cap.delivered[i]["agentview"], cap.true_view[i]], axis=1) for i in range(lo, hi)]
            entry["videos"].append(
                {
                    "label": f"steps {lo}-{hi - 1}: policy's view | true view",
                    "file": write_mp4(d / "around-trigger.mp4", side),
                }
            )
    entry["record"] = {
        "valid": rec.valid,
        "termination_reason": rec.termination_reason,
        "detail": rec.detail,
        "phases": rec.phases,
        "shifts": [s.model_dump(mode="json") for s in rec.shifts],
        "instruction": rec.instruction,
    }
    (d / "record.json").parent.mkdir(parents=True, exist_ok=True)
    (d / "record.json").write_text(json.dumps(entry["record"], indent=2, default=str))
    return entry


def _summary_line(shift: dict) -> str:
    applied = shift.get("applied") or {}
    post = applied.get("post_condition")
    fired = ""
    if shift.get("kind") == "runtime":
        fired = f" fired at step {shift.get('fired_at_step')} by {shift.get('fired_by')};"
    return f"{shift['id']} {shift['name']} ({shift['category']}, {shift['kind']}):{fired} post-condition {json.dumps(post)}"


def render_page(entries: list[dict], out_dir: Path, title: str) -> Path:
    """Write ``out_dir/index.html``: a contact sheet per shift."""
    parts = [
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
        "<style>body{font-family:sans-serif;margin:1.5rem;color:#111}section{margin-bottom:2rem;border-top:1px solid #ccc}"
        "figure{display:inline-block;margin:4px;font-size:12px;max-width:170px;vertical-align:top}"
        "img{width:160px;height:160px;image-rendering:pixelated}.bad{color:#a40000}.ok{color:#176317}"
        "video{margin:4px}</style></head><body>",
        f"<h1>{html.escape(title)}</h1><p>Training-split review only. Images are upright; 'policy's view' is what the "
        "policy receives, 'true view' the scene at that step rendered from the third-person camera without any "
        "observation shift (noise, freezing, dropout, latency); a camera shift moves this camera too.</p><nav><ul>",
    ]
    for e in entries:
        parts.append(
            f"<li><a href='#{e['instance']['instance_id']}'>{html.escape(e['case'])} on {html.escape(e['task'])}</a></li>"
        )
    parts.append("</ul></nav>")
    for e in entries:
        rec = e["record"]
        status = (
            "<span class='ok'>valid</span>"
            if rec["valid"]
            else f"<span class='bad'>invalid: {html.escape(str(rec['detail']))}</span>"
        )
        parts.append(
            f"<section id='{e['instance']['instance_id']}'><h2>{html.escape(e['case'])} on {html.escape(e['task'])}</h2>"
        )
        parts.append(
            f"<p>{status}; termination {html.escape(rec['termination_reason'])}; phases {html.escape(json.dumps(rec['phases']))}; "
            f"instruction: <q>{html.escape(rec['instruction'])}</q></p><ul>"
        )
        for s in rec["shifts"]:
            parts.append(f"<li><code>{html.escape(_summary_line(s))[:900]}</code></li>")
        parts.append("</ul><div>")
        for img in e["images"]:
            src = f"{e['instance']['instance_id']}/{img['file']}"
            parts.append(
                f"<figure><img src='{src}' alt='{html.escape(img['label'])}'><figcaption>{html.escape(img['label'])}</figcaption></figure>"
            )
        parts.append("</div>")
        for v in e["videos"]:
            if v["file"]:
                src = f"{e['instance']['instance_id']}/{v['file']}"
                parts.append(
                    f"<figure style='max-width:340px'><video src='{src}' controls muted loop width='320'></video>"
                    f"<figcaption>{html.escape(v['label'])}</figcaption></figure>"
                )
        parts.append("</section>")
    parts.append("</body></html>")
    path = out_dir / "index.html"
    path.write_text("\n".join(parts))
    return path


def first_per_shift(instances: list[Instance]) -> list[Instance]:
    """The first instance of every case, in catalog order."""
    seen: dict[str, Instance] = {}
    for inst in instances:
        seen.setdefault(inst.case, inst)
    return [seen[k] for k in sorted(seen)]
