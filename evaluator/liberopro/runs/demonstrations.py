"""Demonstration datasets: the privileged oracle's successful episodes on training instances,
written as a LeRobot dataset (``liberopro demos collect``; ``docs/demos.md``).

What is recorded. Each episode is run through the real episode runner
(:class:`liberopro.episode.runner.EpisodeRunner`) with the privileged oracle
(:class:`liberopro.oracle.policy.OraclePolicy`) behind a policy that asks for both cameras and
LIBERO's 8-number state (:func:`demo_metadata`), so that every frame is exactly what a submitted
policy would receive at that step under the instance's shifts: the observation after the
observation shifts, oriented ``rotate_180`` (``img[::-1, ::-1]`` of the upside-down render: the
orientation of LIBERO's public training data and of openpi's LIBERO example, and the evaluator's
default, ``submission_spec`` ``image_orientation``), resized to ``image_size`` px, and the
instruction the policy received (paraphrased under language shifts). One row per policy query
(the oracle asks for one action per step, so one row per policy-loop step, except the steps at
which an intervention, e.g. D19's push or a recovery protocol, supplied the action: the policy
was not asked there, and ``policy_step`` shows the gap). Per row:

* ``image``, ``wrist_image``: video features, (S, S, 3) uint8 RGB (agentview, eye-in-hand).
* ``state``: (8,) float32, eef position (m, world) 3 + eef axis-angle (rad) 3 + gripper finger
  qpos (m) 2 (``Observation.state()``).
* ``actions``: (7,) float32, the *commanded* action: the policy's (oracle's) output in LIBERO's
  convention (arm deltas in [-1, 1], 1.0 = 0.05 m or 0.5 rad; gripper -1 opens, +1 closes),
  before any action layer.
* ``executed_actions``: (7,) float32, what the simulator stepped with at that step, after the
  action and execution shifts (S19 latency, S20 noise, S21 gain, D14-D17); equal to ``actions``
  when no such shift acts.
* ``policy_step``: int64, the policy-loop step (0-based, settle steps excluded).
* LeRobot's ``timestamp`` (``frame_index / FPS``, float32), ``frame_index``, ``episode_index``,
  ``index``, ``task_index`` (into ``meta/tasks``: the instruction of that step).

Per episode (``meta/episodes`` in v3.0, ``meta/episodes.jsonl`` in v2.1) besides LeRobot's own
columns: ``instance_id``, ``case``, ``libero_task`` (``suite:index``), ``shift_ids``, ``shifts``
(the instance's shifts with their parameters, a JSON string), ``init_state_id``, ``seed``,
``success``, ``steps``, ``termination_reason``, ``manifest_episode`` (the episode's index within
its instance).

Collection (:func:`collect`) runs one process per task (``concurrent.futures`` with the spawn
context); each episode leaves a progress entry under ``OUT/.progress/`` as soon as it ends
(its record, and for a kept episode its frames: one mp4 per camera and an ``.npz``), so that a
rerun skips the episodes already run; the dataset files are assembled from the progress
entries at the end (:func:`assemble`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from submission_spec import CameraSpec, Observation, PolicyMetadata

if TYPE_CHECKING:
    from liberopro.instances.build import EpisodePlan
    from liberopro.schema.manifest import Instance

#: Frames per second of the dataset: LIBERO's control rate (one row per 20 Hz control step), so
#: that ``timestamp`` is simulated time and videos play at real speed. openpi's LIBERO converter
#: declares 10 for the same 20 Hz data; loaders that build action chunks from ``delta_timestamps``
#: derive them from the declared fps, so either is self-consistent (``docs/demos.md``).
FPS = 20
#: Dataset feature -> spec camera name (openpi's LIBERO feature names).
CAMERA_KEYS = {"image": "agentview", "wrist_image": "wrist"}
#: The h264 settings of every video (imageio-ffmpeg's ffmpeg, libx264).
VIDEO_CODEC, PIX_FMT = "h264", "yuv420p"
#: Dataset formats written.
FORMATS = ("v3.0", "v2.1")
#: LeRobot's defaults for the v3.0 layout (``lerobot.datasets.utils``).
CHUNKS_SIZE, DATA_FILE_MB, VIDEO_FILE_MB = 1000, 100, 500
#: Path templates, as LeRobot writes them.
V30_DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
V30_VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
V21_DATA_PATH = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
V21_VIDEO_PATH = "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"
#: The committed schema the test checks a produced dataset against.
SCHEMA_PATH = Path(__file__).resolve().parents[1] / "data" / "lerobot_demos_schema.json"
PROGRESS_DIR = ".progress"
ROBOT_TYPE = "panda"

STATE_NAMES = ["eef_x", "eef_y", "eef_z", "eef_axis_angle_x", "eef_axis_angle_y", "eef_axis_angle_z", "gripper_qpos_left", "gripper_qpos_right"]  # fmt: skip
ACTION_NAMES = ["dx", "dy", "dz", "droll", "dpitch", "dyaw", "gripper"]


class DemosError(ValueError):
    """Collection refused before anything ran (wrong manifest split, an output folder collected
    with other settings); the message says what is wrong and what to do."""


def demo_metadata(image_size: int = 256) -> PolicyMetadata:
    """What the recording policy asks the evaluator for: both cameras at ``image_size`` px
    (square), ``rotate_180``, LIBERO's 8-number state, one action per request, LIBERO's gripper
    convention (the oracle's)."""
    from liberopro.oracle.policy import ORACLE_POLICY_NAME

    return PolicyMetadata(
        policy_name=ORACLE_POLICY_NAME,
        cameras=[CameraSpec(name=c, height=image_size, width=image_size) for c in CAMERA_KEYS.values()],
        image_orientation="rotate_180",
        chunk_length=1,
        replan_steps=1,
    )


def features(image_size: int) -> dict[str, dict]:
    """The ``features`` of ``meta/info.json`` (both versions): name -> dtype, shape, names (and
    ``info`` for videos: codec, pixel format, fps)."""
    video_info = {
        "video.height": image_size,
        "video.width": image_size,
        "video.codec": VIDEO_CODEC,
        "video.pix_fmt": PIX_FMT,
        "video.is_depth_map": False,
        "video.fps": FPS,
        "video.channels": 3,
        "has_audio": False,
    }
    cams = {
        key: {"dtype": "video", "shape": [image_size, image_size, 3], "names": ["height", "width", "channels"], "info": video_info}
        for key in CAMERA_KEYS
    }  # fmt: skip
    return {
        **cams,
        "state": {"dtype": "float32", "shape": [8], "names": STATE_NAMES},
        "actions": {"dtype": "float32", "shape": [7], "names": ACTION_NAMES},
        "executed_actions": {"dtype": "float32", "shape": [7], "names": ACTION_NAMES},
        "policy_step": {"dtype": "int64", "shape": [1], "names": None},
        "timestamp": {"dtype": "float32", "shape": [1], "names": None},
        "frame_index": {"dtype": "int64", "shape": [1], "names": None},
        "episode_index": {"dtype": "int64", "shape": [1], "names": None},
        "index": {"dtype": "int64", "shape": [1], "names": None},
        "task_index": {"dtype": "int64", "shape": [1], "names": None},
    }


def data_schema():
    """The pyarrow schema of the frame parquet files (both versions): the non-video features,
    vectors as fixed-size lists (what LeRobot's ``datasets.Sequence(length=n)`` reads)."""
    import pyarrow as pa

    cols = []
    for name, ft in features(16).items():
        if ft["dtype"] == "video":
            continue
        t = pa.float32() if ft["dtype"] == "float32" else pa.int64()
        cols.append(pa.field(name, t if ft["shape"] == [1] else pa.list_(t, ft["shape"][0])))
    return pa.schema(cols)


# ------------------------------------------------------------------------------ recording
@dataclass
class EpisodeFrames:
    """What the recording policy saw and did in one episode, one entry per policy query."""

    steps: list[int] = field(default_factory=list)
    instructions: list[str] = field(default_factory=list)
    images: dict[str, list[np.ndarray]] = field(default_factory=lambda: {k: [] for k in CAMERA_KEYS})
    state: list[np.ndarray] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    #: every action the simulator stepped with in the policy loop, by step (interventions included)
    executed: list[np.ndarray] = field(default_factory=list)


class RecordingOracle:
    """The privileged oracle behind :func:`demo_metadata`, recording each observation it receives,
    its commanded action and (by wrapping the episode scene's ``step`` from ``reset`` on: only
    policy-loop steps call it after ``/reset``) the action the simulator executed.

    Args:
        scene_of: the episode's scene (``lambda: runner.current_scene``).
        image_size: camera size asked for (px).
    """

    def __init__(self, scene_of: Callable[[], Any], image_size: int) -> None:
        from liberopro.oracle.policy import OraclePolicy

        self.metadata = demo_metadata(image_size)
        self._oracle = OraclePolicy(scene_of)
        self._scene_of = scene_of
        self._patched: Any = None
        self.frames = EpisodeFrames()

    def reset(self, episode_id: str, instruction: str) -> None:
        self.release()
        self._oracle.reset(episode_id, instruction)
        self.frames = EpisodeFrames()
        scene = self._scene_of()
        executed, step = self.frames.executed, scene.step

        def recording_step(action: np.ndarray) -> bool:
            executed.append(np.array(action, dtype=np.float64))
            return step(action)

        scene.step = recording_step  # an instance attribute over the method; removed by release()
        self._patched = scene

    def release(self) -> None:
        """Stop recording executed actions (the scene is shared with later episodes)."""
        if self._patched is not None:
            self._patched.__dict__.pop("step", None)
            self._patched = None

    def act(self, observation: Observation) -> np.ndarray:
        chunk = self._oracle.act(observation)
        f = self.frames
        f.steps.append(observation.step)
        f.instructions.append(observation.instruction)
        for key, cam in CAMERA_KEYS.items():
            f.images[key].append(np.ascontiguousarray(observation.images[cam]))
        f.state.append(observation.state())
        f.actions.append(chunk[0].copy())
        return chunk


def _write_mp4(path: Path, frames: list[np.ndarray]) -> None:
    import imageio.v2 as imageio

    path.parent.mkdir(parents=True, exist_ok=True)
    # imageio's stubs type get_writer as the base reader/writer, without append_data
    writer: Any = imageio.get_writer(
        path,
        fps=FPS,
        codec="libx264",
        pixelformat=PIX_FMT,
        macro_block_size=1,
        ffmpeg_log_level="error",
        output_params=["-crf", "18", "-g", "2"],
    )
    with writer as w:
        for f in frames:
            w.append_data(f)


def _image_stats(frames: list[np.ndarray]) -> dict[str, list]:
    """Per-channel stats of images scaled to [0, 1] (LeRobot's convention: shape (3, 1, 1))."""
    x = np.stack(frames).reshape(-1, 3).astype(np.float64) / 255.0
    nest = lambda v: [[[float(c)]] for c in v]  # noqa: E731
    return {
        "min": nest(x.min(0)),
        "max": nest(x.max(0)),
        "mean": nest(x.mean(0)),
        "std": nest(x.std(0)),
        "count": [len(frames)],
    }


def _episode_key(instance_id: str, episode: int) -> str:
    return f"{instance_id}-e{episode:03d}"


def _save_episode(work: Path, key: str, record: dict, frames: EpisodeFrames | None) -> None:
    """Write one episode's progress entry atomically (a temporary folder renamed into place)."""
    tmp = work / f".tmp-{key}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if frames is not None:
        steps = np.asarray(frames.steps, dtype=np.int64)
        executed = np.stack(frames.executed)[steps] if len(steps) else np.zeros((0, 7))
        np.savez(
            tmp / "frames.npz",
            policy_step=steps,
            state=np.asarray(frames.state, dtype=np.float32).reshape(-1, 8),
            actions=np.asarray(frames.actions, dtype=np.float32).reshape(-1, 7),
            executed_actions=np.asarray(executed, dtype=np.float32).reshape(-1, 7),
            instructions=np.asarray(frames.instructions, dtype=str),
        )
        record["image_stats"] = {}
        for k in CAMERA_KEYS:
            _write_mp4(tmp / f"{k}.mp4", frames.images[k])
            record["image_stats"][k] = _image_stats(frames.images[k])
    (tmp / "record.json").write_text(json.dumps(record, indent=1))
    final = work / key
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)


def _collect_task(job: dict, on_record: Callable[[dict], None] | None = None) -> list[dict]:
    """One task's episodes, in one process (the pool's unit of work): runs every plan of ``job``
    whose progress entry is missing, returns every plan's record (read back for those done);
    ``on_record`` (in-process runs only) gets each record as it is known."""
    from liberopro.episode.local_policy import LocalPolicyClient
    from liberopro.episode.runner import CurrentScene, EpisodeRunner, RunSettings
    from liberopro.instances.build import EpisodePlan
    from liberopro.runs.workers import auto_render_size
    from liberopro.schema.manifest import Instance

    work = Path(job["work"])
    meta = demo_metadata(job["image_size"])
    settings = RunSettings(render_size=auto_render_size(meta), max_steps=job["max_steps"])
    scene = CurrentScene()
    policy = RecordingOracle(scene, job["image_size"])
    runner = scene.bind(EpisodeRunner(LocalPolicyClient(policy), meta, settings))
    records = []
    try:
        for p in job["plans"]:
            key = _episode_key(p["instance"]["instance_id"], p["episode_index"])
            done = work / key / "record.json"
            if done.exists():
                records.append(json.loads(done.read_text()))
                if on_record:
                    on_record(records[-1])
                continue
            inst = Instance.model_validate(p["instance"])
            plan = EpisodePlan(inst, p["episode_index"], p["init_state_index"], p["seed"])
            r = runner.run_episode(plan)
            policy.release()
            kept = bool(r.success or job["keep_failures"]) and bool(policy.frames.steps) and r.valid
            record = {
                "key": key,
                "instance_id": inst.instance_id,
                "case": inst.case,
                "libero_task": str(inst.task),
                "shift_ids": [s.id for s in inst.shifts],
                "shifts": json.dumps([s.model_dump(mode="json") for s in inst.shifts], sort_keys=True),
                "manifest_episode": plan.episode_index,
                "init_state_id": plan.init_state_index,
                "seed": plan.seed,
                "success": bool(r.success),
                "steps": r.steps,
                "termination_reason": r.termination_reason,
                "detail": (r.detail or "")[:500],
                "frames": len(policy.frames.steps) if kept else 0,
                "kept": kept,
                "wall_s": r.wall_s,
            }
            _save_episode(work, key, record, policy.frames if kept else None)
            records.append(record)
            if on_record:
                on_record(record)
    finally:
        runner.close()
    return records


# ------------------------------------------------------------------------------ collection
@dataclass
class CollectResult:
    """What :func:`collect` did: every episode's record (``kept``: in the dataset), the number
    run now (the rest were read back from ``.progress``), and the wall time (s)."""

    records: list[dict]
    ran: int
    wall_s: float

    @property
    def kept(self) -> list[dict]:
        return [r for r in self.records if r["kept"]]


def _keep_settings(out: Path, work: Path, settings: dict[str, Any]) -> None:
    """Write ``settings`` to ``work/settings.json``; :class:`DemosError` when the progress there
    was collected with other settings (a resumed collection must not mix them)."""
    settings_path = work / "settings.json"
    if settings_path.exists():
        before = json.loads(settings_path.read_text())
        if before != settings:
            diff = {k: (before.get(k), v) for k, v in settings.items() if before.get(k) != v}
            raise DemosError(
                f"{out} holds episodes collected with other settings ({diff}, as (before, now)): "
                f"give another --out, or delete {work} to start again"
            )
    settings_path.write_text(json.dumps(settings, indent=1))


def _run_jobs(jobs: list[dict], workers: int, on_record: Callable[[dict], None] | None) -> list[dict]:
    """Every job's records (:func:`_collect_task`), in this process or on up to ``workers``
    spawned processes; interrupted, the workers are stopped (finished episodes stay in
    ``.progress``) and the exception re-raised."""
    results: list[dict] = []
    if workers <= 1 or len(jobs) == 1:
        for job in jobs:
            results.extend(_collect_task(job, on_record))
        return results
    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(jobs)), mp_context=get_context("spawn"), initializer=_ignore_sigint
    )
    try:
        for recs in pool.map(_collect_task, jobs):
            for r in recs:
                results.append(r)
                if on_record:
                    on_record(r)
    except BaseException as exc:  # Ctrl-C (or a failure): stop the workers now; finished episodes stay in .progress
        if isinstance(exc, KeyboardInterrupt):  # a second signal (uv forwards one) must not break the shutdown
            import signal

            signal.signal(signal.SIGINT, signal.SIG_IGN)
        from liberopro.runs.workers import stop_pool

        stop_pool(pool)
        raise
    pool.shutdown(wait=True)
    return results


def demo_plans(
    instances: list[Instance], episodes: int | None, init_states: Sequence[int] | None, seed: int
) -> list[EpisodePlan]:
    """The episodes to collect: of each instance, ``episodes`` episodes on init states 0..N-1
    (:func:`liberopro.instances.build.plan_episodes`), or one episode on each of ``init_states``
    (sorted, repeats dropped), the episode on init state ``k`` being the evaluator's episode ``k``
    (env seed ``seed + k``). Raises :class:`DemosError` when neither or both are given, or an init
    state is outside 0-49 (LIBERO's 50 init states per task)."""
    from liberopro.instances.build import N_INIT_STATES, EpisodePlan, plan_episodes

    if (episodes is None) == (init_states is None):
        raise DemosError("give either a number of episodes (init states 0..N-1) or the init states to collect on")
    if episodes is not None:
        return plan_episodes(instances, episodes, seed)
    states = sorted(set(init_states or ()))
    bad = [k for k in states if not 0 <= k < N_INIT_STATES]
    if bad or not states:
        raise DemosError(f"init states must be in 0..{N_INIT_STATES - 1} (got {bad or 'none'})")
    return [EpisodePlan(inst, k, k, seed + k) for inst in instances for k in states]


def collect(
    manifest_path: Path,
    out: Path,
    episodes: int | None = None,
    *,
    init_states: Sequence[int] | None = None,
    fmt: str = "v3.0",
    workers: int = 1,
    image_size: int = 256,
    max_steps: int | None = None,
    seed: int = 0,
    keep_failures: bool = False,
    on_record: Callable[[dict], None] | None = None,
) -> CollectResult:
    """Collect the oracle's episodes on the instances of a training manifest and write the dataset.

    Args:
        manifest_path: an instance manifest of the ``train`` split (``liberopro instances generate``).
        out: the dataset folder (created; its ``.progress/`` lets a rerun resume).
        episodes: episodes per instance: init states 0..N-1, env seed ``seed + e``
            (:func:`liberopro.instances.build.plan_episodes`, as ``evaluate`` runs them).
        init_states: instead of ``episodes``, the init states (0-49) to collect on, e.g.
            ``range(10, 50)`` to hold out 0-9 for evaluation (issue 24); the episode on init state
            ``k`` is the evaluator's episode ``k`` (env seed ``seed + k``).
        fmt: ``v3.0`` (LeRobot's current layout) or ``v2.1`` (one file per episode: openpi, GR00T).
        workers: processes, one task's episodes each (a LIBERO scene holds 1.5-2.5 GB).
        image_size: square camera size (px) of both video features.
        max_steps: cap on the suite horizon (policy steps).
        seed: the episodes' base seed.
        keep_failures: keep episodes that did not succeed too (debugging and tests only: a
            demonstration dataset holds successes).
        on_record: called with each episode's record as its task finishes.

    Raises :class:`DemosError` for a manifest of another split, a format not in :data:`FORMATS`,
    neither or both of ``episodes`` and ``init_states``, an init state outside 0-49,
    or an ``out`` whose progress was collected with other settings;
    :class:`liberopro.schema.manifest.ManifestError` for a malformed manifest.
    """
    from liberopro.instances.generation import check_manifest

    if fmt not in FORMATS:
        raise DemosError(f"unknown format {fmt!r}: give one of {', '.join(FORMATS)}")
    demo_plans([], episodes, init_states, seed)  # bad counts and init states, before the manifest is read
    manifest = check_manifest(manifest_path)
    if manifest.header.split != "train":
        raise DemosError(
            f"{manifest_path} is an evaluation manifest (split {manifest.header.split!r}): demonstrations are collected on training "
            "instances only (evaluation instances are held out); give a manifest made with `--split train`"
        )
    work = out / PROGRESS_DIR
    work.mkdir(parents=True, exist_ok=True)
    _keep_settings(
        out,
        work,
        {
            "manifest_content_hash": manifest.header.content_hash,
            "image_size": image_size,
            "max_steps": max_steps,
            "seed": seed,
            "keep_failures": keep_failures,
        },
    )
    plans = demo_plans(manifest.instances, episodes, init_states, seed)
    by_task: dict[str, list[dict]] = {}
    for p in plans:
        by_task.setdefault(str(p.instance.task), []).append(
            {
                "instance": p.instance.model_dump(mode="json"),
                "episode_index": p.episode_index,
                "init_state_index": p.init_state_index,
                "seed": p.seed,
            }
        )
    todo = sum(
        not (work / _episode_key(p.instance.instance_id, p.episode_index) / "record.json").exists() for p in plans
    )
    jobs = [
        {
            "work": str(work),
            "plans": ps,
            "image_size": image_size,
            "max_steps": max_steps,
            "keep_failures": keep_failures,
        }
        for ps in by_task.values()
    ]
    t0 = time.perf_counter()
    results = _run_jobs(jobs, workers, on_record)
    order = {_episode_key(p.instance.instance_id, p.episode_index): n for n, p in enumerate(plans)}
    results.sort(key=lambda r: order[r["key"]])
    assemble(out, [r for r in results if r["kept"]], image_size, fmt)
    return CollectResult(results, todo, round(time.perf_counter() - t0, 1))


def _ignore_sigint() -> None:
    """Worker processes leave Ctrl-C to the parent, which stops them (a worker interrupted inside
    the executor's machinery can leave the pool waiting forever)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


# ------------------------------------------------------------------------------ assembly
def _vector_stats(x: np.ndarray) -> dict[str, list]:
    x = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
    return {
        "min": x.min(0).tolist(),
        "max": x.max(0).tolist(),
        "mean": x.mean(0).tolist(),
        "std": x.std(0).tolist(),
        "count": [len(x)],
    }


def _merge_image_stats(parts: list[dict]) -> dict[str, list]:
    """Pooled per-channel stats of several episodes' image stats (weighted by frame count)."""
    n = np.array([p["count"][0] for p in parts], dtype=np.float64)
    mean = np.array([np.ravel(p["mean"]) for p in parts])
    std = np.array([np.ravel(p["std"]) for p in parts])
    m = (n[:, None] * mean).sum(0) / n.sum()
    var = (n[:, None] * (std**2 + (mean - m) ** 2)).sum(0) / n.sum()
    nest = lambda v: [[[float(c)]] for c in v]  # noqa: E731
    return {
        "min": nest(np.min([np.ravel(p["min"]) for p in parts], 0)),
        "max": nest(np.max([np.ravel(p["max"]) for p in parts], 0)),
        "mean": nest(m),
        "std": nest(np.sqrt(var)),
        "count": [int(n.sum())],
    }


def _frame_table(episodes: list[dict], work: Path, tasks: dict[str, int]):
    """The frame rows of ``episodes`` (kept records, in dataset order) as one pyarrow table, and
    each episode's (length, tasks, numeric columns)."""
    import pyarrow as pa

    schema = data_schema()
    cols: dict[str, list] = {f.name: [] for f in schema}
    per_episode = []
    index = 0
    for ep_index, rec in enumerate(episodes):
        z = np.load(work / rec["key"] / "frames.npz")
        n = len(z["policy_step"])
        instr = [str(s) for s in z["instructions"]]
        for s in instr:
            tasks.setdefault(s, len(tasks))
        ep_cols = {
            "state": z["state"],
            "actions": z["actions"],
            "executed_actions": z["executed_actions"],
            "policy_step": z["policy_step"],
            "timestamp": (np.arange(n) / FPS).astype(np.float32),
            "frame_index": np.arange(n, dtype=np.int64),
            "episode_index": np.full(n, ep_index, dtype=np.int64),
            "index": np.arange(index, index + n, dtype=np.int64),
            "task_index": np.array([tasks[s] for s in instr], dtype=np.int64),
        }
        for k, v in ep_cols.items():
            cols[k].extend(v.tolist())
        per_episode.append((n, list(dict.fromkeys(instr)), ep_cols))
        index += n
    table = pa.Table.from_pydict(cols, schema=schema)
    return table, per_episode


def _episode_stats(ep_cols: dict, rec: dict) -> dict:
    return {**{k: _vector_stats(v) for k, v in ep_cols.items()}, **rec["image_stats"]}


def _episode_extras(rec: dict) -> dict:
    keys = ["instance_id", "case", "libero_task", "shift_ids", "shifts", "manifest_episode", "init_state_id", "seed", "success", "steps", "termination_reason"]  # fmt: skip
    return {k: rec[k] for k in keys}


def _concat_videos(parts: list[Path], dest: Path) -> None:
    """Concatenate same-settings h264 mp4s without re-encoding (ffmpeg's concat demuxer)."""
    import imageio_ffmpeg

    dest.parent.mkdir(parents=True, exist_ok=True)
    listing = dest.with_suffix(".txt")
    listing.write_text("".join(f"file '{p.resolve()}'\n" for p in parts))
    cmd = [imageio_ffmpeg.get_ffmpeg_exe(), "-y", "-loglevel", "error", "-f", "concat", "-safe", "0"]
    subprocess.run([*cmd, "-i", str(listing), "-c", "copy", str(dest)], check=True)
    listing.unlink()


def _v30_episode_rows(per_episode: list[tuple[int, Any, Any]], episodes: list[dict]) -> dict[str, list]:
    """The columns of LeRobot v3.0's ``meta/episodes`` table: per episode its tasks, length,
    frame range in the one data file and time range in each camera's one video file."""
    rows: dict[str, list] = {}
    start = 0
    for ep_index, ((n, ep_tasks, _), rec) in enumerate(zip(per_episode, episodes, strict=True)):
        row: dict[str, Any] = {
            "episode_index": ep_index,
            "tasks": ep_tasks,
            "length": n,
            "data/chunk_index": 0,
            "data/file_index": 0,
            "dataset_from_index": start,
            "dataset_to_index": start + n,
        }
        for key in CAMERA_KEYS:
            row |= {
                f"videos/{key}/chunk_index": 0,
                f"videos/{key}/file_index": 0,
                f"videos/{key}/from_timestamp": start / FPS,
                f"videos/{key}/to_timestamp": (start + n) / FPS,
            }
        row |= {"meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0, **_episode_extras(rec)}
        for k, v in row.items():
            rows.setdefault(k, []).append(v)
        start += n
    return rows


def assemble(out: Path, episodes: list[dict], image_size: int, fmt: str = "v3.0") -> None:
    """(Re)write the dataset files of ``out`` from the progress entries of ``episodes`` (kept
    records, in dataset order): ``meta/``, ``data/`` and ``videos/`` are replaced whole.
    ``ValueError`` when ``episodes`` is empty (LeRobot has no empty dataset)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not episodes:
        raise ValueError(f"no episode to write to {out}: none succeeded (see the records in {out / PROGRESS_DIR})")
    work = out / PROGRESS_DIR
    for d in ("meta", "data", "videos"):
        shutil.rmtree(out / d, ignore_errors=True)
    tasks: dict[str, int] = {}
    table, per_episode = _frame_table(episodes, work, tasks)
    feats = features(image_size)
    info = {
        "codebase_version": fmt,
        "robot_type": ROBOT_TYPE,
        "total_episodes": len(episodes),
        "total_frames": table.num_rows,
        "total_tasks": len(tasks),
        "chunks_size": CHUNKS_SIZE,
        "fps": FPS,
        "splits": {"train": f"0:{len(episodes)}"},
        "features": feats,
    }
    all_cols = {k: np.concatenate([c[k] for _, _, c in per_episode]) for k in per_episode[0][2]}
    stats = {k: _vector_stats(v) for k, v in all_cols.items()}
    for key in CAMERA_KEYS:
        stats[key] = _merge_image_stats([r["image_stats"][key] for r in episodes])
    (out / "meta").mkdir(parents=True)
    if fmt == "v3.0":
        info |= {
            "data_files_size_in_mb": DATA_FILE_MB,
            "video_files_size_in_mb": VIDEO_FILE_MB,
            "data_path": V30_DATA_PATH,
            "video_path": V30_VIDEO_PATH,
        }
        path = out / V30_DATA_PATH.format(chunk_index=0, file_index=0)
        path.parent.mkdir(parents=True)
        pq.write_table(table, path)
        for key in CAMERA_KEYS:
            _concat_videos(
                [work / r["key"] / f"{key}.mp4" for r in episodes],
                out / V30_VIDEO_PATH.format(video_key=key, chunk_index=0, file_index=0),
            )
        rows = _v30_episode_rows(per_episode, episodes)
        path = out / "meta/episodes/chunk-000/file-000.parquet"
        path.parent.mkdir(parents=True)
        pq.write_table(pa.Table.from_pydict(rows), path)
        _write_tasks(out / "meta/tasks.parquet", tasks)
    else:
        info |= {
            "total_chunks": 1,
            "total_videos": len(episodes) * len(CAMERA_KEYS),
            "data_path": V21_DATA_PATH,
            "video_path": V21_VIDEO_PATH,
        }
        start = 0
        with (
            (out / "meta/episodes.jsonl").open("w") as eps,
            (out / "meta/episodes_stats.jsonl").open("w") as eps_stats,
        ):
            for ep_index, ((n, ep_tasks, ep_cols), rec) in enumerate(zip(per_episode, episodes, strict=True)):
                path = out / V21_DATA_PATH.format(episode_chunk=0, episode_index=ep_index)
                path.parent.mkdir(parents=True, exist_ok=True)
                pq.write_table(table.slice(start, n), path)
                for key in CAMERA_KEYS:
                    dest = out / V21_VIDEO_PATH.format(episode_chunk=0, video_key=key, episode_index=ep_index)
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(work / rec["key"] / f"{key}.mp4", dest)
                eps.write(json.dumps({"episode_index": ep_index, "tasks": ep_tasks, "length": n, **_episode_extras(rec)}) + "\n")  # fmt: skip
                eps_stats.write(json.dumps({"episode_index": ep_index, "stats": _episode_stats(ep_cols, rec)}) + "\n")
                start += n
        (out / "meta/tasks.jsonl").write_text(
            "".join(json.dumps({"task_index": i, "task": t}) + "\n" for t, i in tasks.items())
        )
    (out / "meta/info.json").write_text(json.dumps(info, indent=4))
    (out / "meta/stats.json").write_text(json.dumps(stats, indent=4))


def _write_tasks(path: Path, tasks: dict[str, int]) -> None:
    """``meta/tasks.parquet``: columns ``task_index`` (int64) and ``task`` (string), ``task`` marked
    as the pandas index (LeRobot reads it with ``pd.read_parquet`` and looks tasks up by index:
    ``tasks.loc[task].task_index``); written with pyarrow alone (pandas is no dependency)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pa.table({"task_index": pa.array(list(tasks.values()), pa.int64()), "task": pa.array(list(tasks), pa.string())})
    pandas_meta = {
        "index_columns": ["task"],
        "column_indexes": [],
        "columns": [
            {"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64", "metadata": None},
            {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object", "metadata": None},
        ],
        "pandas_version": "2.0.0",
    }  # fmt: skip
    pq.write_table(t.replace_schema_metadata({"pandas": json.dumps(pandas_meta)}), path)
