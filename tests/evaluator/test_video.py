"""Episode videos and action logs (``liberopro evaluate --video``, ``--record-actions``;
:mod:`liberopro.episode.video`).

Sim tier: the privileged oracle (no cameras: the scene gets ``agentview`` for the video alone) on
libero_spatial:0, nominal (succeeds at step 80) and D18 grasp loss (fires at step 37, the object
is dropped, it fails at the 90-step limit), at 64 px: ``failures`` writes one MP4 for the failed
episode and none for the success, readable, one frame per two steps, twice as wide as high, and
the records are those of the same run without recording, apart from ``video``, ``actions`` and the
work counted in ``renders``; a larger ``video_size`` renders nothing more. Fast tier: the actions
file round trip, the file names, the frame layout (each panel is the render, words only in the
strip above), the size option read back from the MP4, and that the platform's shard runner never
records.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import cv2
import imageio.v2 as imageio
import numpy as np
import pytest
from liberopro.episode import video
from liberopro.instances.build import Diagnostic, EpisodePlan, Instance, make_instance
from liberopro.sim.tasks import TaskRef

REF = TaskRef("libero_spatial", 0)
MAX_STEPS = 90


def _plans() -> list[EpisodePlan]:
    d18 = make_instance(REF, ["D18"], seed=0)
    assert isinstance(d18, Instance), d18
    nominal = make_instance(REF, [], seed=0)
    assert isinstance(nominal, Instance), nominal
    return [EpisodePlan(inst, 0, 0, seed=0) for inst in (nominal, d18)]


def _run(scenes, tmp_path, plans=None, **recording) -> list:
    from liberopro.episode.runner import RunSettings
    from liberopro.oracle.policy import oracle_runner

    settings = RunSettings(render_size=64, max_steps=MAX_STEPS, output_dir=str(tmp_path), **recording)
    runner = oracle_runner(settings, scenes=scenes)
    records: list = []
    runner.run(plans or _plans(), records.append)
    return records


@pytest.mark.sim
def test_failures_mode_writes_one_video_per_failed_episode_and_changes_no_record(scenes, tmp_path) -> None:
    rec = _run(scenes, tmp_path / "rec", video="failures", video_size=64, record_actions=True)
    plain = _run(scenes, tmp_path / "plain", plans=_plans()[1:])  # the recorded episode, without recording
    large = _run(scenes, tmp_path / "large", plans=_plans()[1:], video="all", video_size=128)
    by_case = {r.case: r for r in rec}
    assert by_case["nominal"].success and not by_case["D18"].success, [(r.case, r.termination_reason) for r in rec]
    assert by_case["D18"].steps == MAX_STEPS
    # one MP4, for the failed episode only, named in its record
    videos = sorted((tmp_path / "rec" / "videos").iterdir())
    assert [v.name for v in videos] == [f"{video.episode_name(_plans()[1])}.mp4"]
    assert by_case["D18"].video == f"videos/{videos[0].name}" and by_case["nominal"].video is None
    frames = 0
    with imageio.get_reader(videos[0]) as reader:
        for frame in reader:
            frames += 1
            assert frame.shape == (video.strip_height(64) + 64, 128, 3)
    assert frames == MAX_STEPS // video.RECORD_EVERY
    # 128 px panels from the 64 px renders: the same renders, a larger frame
    assert large[0].renders == rec[1].renders and large[0].outcome_key() == rec[1].outcome_key()
    with imageio.get_reader(tmp_path / "large" / large[0].video) as reader:
        assert reader.get_data(0).shape == (video.strip_height(128) + 128, 256, 3)
    # the actions of every step, for both episodes
    for r in rec:
        acts = video.load_actions(tmp_path / "rec" / r.actions)
        assert acts["executed"].shape == acts["commanded"].shape == (r.steps, 7)
    # recording changes no record (outcome, shift records, phases, requests made), and nothing in
    # the plain run's records names a file
    assert [r.outcome_key() for r in rec[1:]] == [r.outcome_key() for r in plain]
    assert [r.latency.requests for r in rec[1:]] == [r.latency.requests for r in plain]
    assert all(r.video is None and r.actions is None for r in plain)
    assert not (tmp_path / "plain" / "videos").exists()


def test_actions_file_round_trip(tmp_path) -> None:
    rng = np.random.default_rng(0)
    rec = video.EpisodeRecorder(tmp_path, "ep", "none", record_actions=True, policy_cam=None)
    executed = rng.uniform(-1, 1, (5, 7))
    commanded = [rng.normal(size=7), None, rng.normal(size=(1, 7)), rng.normal(size=7), None]
    for e, c in zip(executed, commanded, strict=True):
        rec.action(e, c)
    assert rec.finish(success=True) == (None, "actions/ep.npz")
    got = video.load_actions(tmp_path / "actions" / "ep.npz")
    assert got["executed"].dtype == np.float64 and np.array_equal(got["executed"], executed)
    assert got["commanded"].shape == (5, 7)
    for row, c in zip(got["commanded"], commanded, strict=True):
        assert np.isnan(row).all() if c is None else np.array_equal(row, np.reshape(c, 7))


def test_frame_panels_are_the_renders_and_words_stay_in_the_strip() -> None:
    rng = np.random.default_rng(0)
    policy_view, true_view = rng.integers(0, 256, (2, 64, 64, 3), dtype=np.uint8)
    b = video.strip_height(64)
    marked = video.compose_frame(policy_view, true_view, 12, ["D18 fired at 10"], size=64)
    plain = video.compose_frame(policy_view, true_view, 12, [], size=64)
    assert marked.shape == plain.shape == (b + 64, 128, 3) and marked.dtype == np.uint8
    for out in (marked, plain):  # each panel is the render itself, upright (row 0 is the bottom)
        assert np.array_equal(out[b:, :64], policy_view[::-1])
        assert np.array_equal(out[b:, 64:], true_view[::-1])
    differ = np.nonzero((marked != plain).any(axis=(1, 2)))[0]
    assert differ.size and differ.max() < b  # the banner is in the strip only
    assert (marked[b - 1, :] == (255, 0, 0)).sum() > 64  # a red band under the words
    # 128 px panels from 64 px renders: each render pixel a 2 x 2 block, nothing drawn on them
    big = video.compose_frame(None, true_view, 12, ["D18 fired at 10"], size=128)
    b2 = video.strip_height(128)
    assert big.shape == (b2 + 128, 256, 3)
    assert np.array_equal(big[b2:, 128:], true_view[::-1].repeat(2, axis=0).repeat(2, axis=1))
    assert (big[b2:, :128] == 64).mean() > 0.9  # the grey panel of a policy without images


def test_video_size_is_written_and_read_back(tmp_path) -> None:
    rng = np.random.default_rng(1)
    rec = video.EpisodeRecorder(tmp_path, "ep", "failures", False, "agentview", video_size=96)
    blocks = rng.integers(0, 256, (6, 8, 8, 3), dtype=np.uint8)  # 8 px blocks: H.264 keeps them
    views = blocks.repeat(8, axis=1).repeat(8, axis=2)
    rec.policy_asked({"agentview": views[0]})
    for t, view in enumerate(views):
        rec.step(t, {"agentview": view}, ["D12 fired at 2"] if t >= 2 else [])
    assert rec.finish(success=True) == (None, None)  # failures: a success writes nothing
    for t, view in enumerate(views):
        rec.step(t, {"agentview": view}, [])
    assert rec.finish(success=False) == ("videos/ep.mp4", None)
    b = video.strip_height(96)
    with imageio.get_reader(tmp_path / "videos" / "ep.mp4") as reader:
        assert reader.get_meta_data()["fps"] == video.FPS
        frames = [frame for frame in reader]
    assert len(frames) == len(views) // video.RECORD_EVERY
    for frame, view in zip(frames, views[:: video.RECORD_EVERY], strict=True):
        assert frame.shape == (b + 96, 192, 3)
        want = cv2.resize(view[::-1], (96, 96), interpolation=cv2.INTER_NEAREST)
        assert np.abs(frame[b:, 96:].astype(int) - want).mean() < 20  # H.264 is lossy; noise is not
    with pytest.raises(ValueError, match="multiple of 16"):
        video.EpisodeRecorder(tmp_path, "x", "all", False, None, video_size=100)
    with pytest.raises(ValueError, match="from 64 to 1024"):
        video.check_video_size(32)
    from liberopro.config import EvalConfig, config_error
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as refused:
        EvalConfig(oracle=True, tasks="libero_goal:0", video="all", video_size=100)
    assert config_error(refused.value) == "--video-size: Input should be a multiple of 16"


def test_episode_names_and_modes() -> None:
    plan = EpisodePlan(
        Instance(instance_id="x", suite="libero_goal", task_index=3), 2, 2, 0, Diagnostic("frozen", "hold")
    )
    name = video.episode_name(plan)
    assert name.startswith("libero_goal-3_nominal_frozen-hold_") and name.endswith("_init2_ep2") and "/" not in name
    with pytest.raises(ValueError, match="video mode"):
        video.EpisodeRecorder(Path("."), "x", "some", False, None)


def test_the_platform_shard_runner_never_records() -> None:
    """Hidden instances never get videos: the shard runner builds its settings without the
    recording options (their defaults are off)."""
    from liberopro.episode.runner import RunSettings
    from liberopro.runs import shard

    calls = [
        node
        for node in ast.walk(ast.parse(inspect.getsource(shard)))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "RunSettings"
    ]
    assert calls, "the shard runner builds RunSettings"
    for call in calls:
        assert not call.args and not {k.arg for k in call.keywords} & {"video", "record_actions", "output_dir"}
    assert RunSettings().video == "none" and RunSettings().record_actions is False
