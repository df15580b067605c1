"""The baseline's pipeline on a tiny synthetic dataset written by the project's own dataset
writer (``liberopro.runs.demonstrations``: the progress entries, then ``assemble``, without the
simulator): dataset -> arrays -> training (deterministic per seed) -> checkpoint -> numpy forward
pass (equal to flax's) -> the SDK's server (its action equals the training-side forward pass).
Fast tier: ~30-60 s on 2 cores, most of it JAX's compilation."""

from __future__ import annotations

import json

import numpy as np
import pytest
from liberopro.runs.demonstrations import CAMERA_KEYS, EpisodeFrames, _save_episode, assemble
from typer.testing import CliRunner

from submission_spec import LIBERO_STATE8, Observation, PolicyClient, PolicyMetadata, create_app

pytest.importorskip("jax")

from liberopro_baselines import checkpoint, data, model, numpy_net  # noqa: E402
from liberopro_baselines.cli import app  # noqa: E402
from liberopro_baselines.serving import BCPolicy  # noqa: E402
from liberopro_baselines.train import TrainSettings, fit  # noqa: E402

SIZE, K = 32, 4  # training image size and chunk length: small, for speed
INSTRUCTIONS = ["pick up the black bowl and place it on the plate", "open the top drawer of the cabinet"]
LENGTHS = [9, 12, 7]


def _episode(e: int, n: int, rng: np.random.Generator) -> EpisodeFrames:
    f = EpisodeFrames()
    for t in range(n):
        f.steps.append(t)
        f.instructions.append(INSTRUCTIONS[e % 2])
        for key in CAMERA_KEYS:
            img = np.full((64, 64, 3), 40 * e, np.uint8)
            img[8 + 3 * t : 24 + 3 * t, 10:30] = rng.integers(0, 256, 3, dtype=np.uint8)  # a moving block
            f.images[key].append(img)
        f.state.append(rng.normal(size=8))
        f.actions.append(np.concatenate([rng.uniform(-1, 1, 6), [1.0 if t > n // 2 else -1.0]]))
        f.executed.append(f.actions[-1])
    return f


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """A v3.0 dataset of 3 episodes (9, 12, 7 frames; 2 instructions; 64 px cameras)."""
    out = tmp_path_factory.mktemp("bc") / "ds"
    work = out / ".progress"
    rng = np.random.default_rng(0)
    records = []
    for e, n in enumerate(LENGTHS):
        key = f"synthetic-e{e:03d}"
        rec = {"key": key, "instance_id": "synthetic", "case": "nominal", "libero_task": "libero_spatial:0",
               "shift_ids": [], "shifts": "[]", "manifest_episode": e, "init_state_id": 10 + e, "seed": e,
               "success": True, "steps": n, "termination_reason": "success"}  # fmt: skip
        _save_episode(work, key, rec, _episode(e, n, rng))
        records.append(rec)
    assemble(out, records, image_size=64)
    return out


@pytest.fixture(scope="module")
def arrays(dataset):
    return data.load(dataset, image_size=SIZE, chunk_length=K)


@pytest.fixture(scope="module")
def trained(dataset, tmp_path_factory):
    """(config, flat params, losses, folder): ``liberopro-bc train`` for 50 steps, seed 3."""
    folder = tmp_path_factory.mktemp("ckpt") / "bc"
    args = ["train", "--dataset", str(dataset), "--out", str(folder), "--steps", "50", "--seed", "3"]
    args += ["--batch-size", "16", "--image-size", str(SIZE), "--chunk-length", str(K)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    params, config = checkpoint.load(folder)
    losses = [float(row.split(",")[1]) for row in (folder / "loss.csv").read_text().splitlines()[1:]]
    return config, params, losses, folder


def test_the_dataset_becomes_chunked_training_arrays(arrays):
    n = sum(LENGTHS)
    assert len(arrays) == n
    assert arrays.agentview.shape == arrays.wrist.shape == (n, SIZE, SIZE, 3)
    assert arrays.agentview.dtype == np.uint8
    assert arrays.state.shape == (n, 8) and arrays.tokens.shape == (n, 32)
    assert arrays.actions.shape == (n, K, 7) and arrays.mask.shape == (n, K)
    assert sorted(arrays.instructions) == sorted(INSTRUCTIONS)
    # the last frame of episode 0 (9 frames): one real action, then its copies, masked out
    last = LENGTHS[0] - 1
    assert arrays.mask[last].tolist() == [1, 0, 0, 0]
    assert np.array_equal(arrays.actions[last, 1:], np.repeat(arrays.actions[last, :1], K - 1, axis=0))
    # frame 0's chunk is frames 0..K-1's actions (the next episode starts at frame 9)
    assert np.array_equal(arrays.actions[0, 1], arrays.actions[1, 0])
    assert arrays.mask[LENGTHS[0] - 3].tolist() == [1, 1, 1, 0]
    # different instructions, different tokens; the same one, the same
    assert not np.array_equal(arrays.tokens[0], arrays.tokens[LENGTHS[0]])
    assert np.array_equal(arrays.tokens[0], arrays.tokens[LENGTHS[0] + LENGTHS[1]])


def test_two_trainings_with_one_seed_give_the_same_weights(arrays, trained):
    """The command's run and a second run of the same training in this process."""
    config, params, losses, _ = trained
    again, losses2, _ = fit(arrays, config, TrainSettings(steps=50, seed=3, batch_size=16))
    assert losses == [float(f"{v:.6g}") for v in losses2]
    assert params.keys() == again.keys()
    assert all(np.array_equal(params[k], again[k]) for k in params)
    assert losses[-1] < losses[0]  # it learns something


def test_the_numpy_forward_pass_equals_flax(arrays, trained):
    config, params, _, _ = trained
    idx = np.arange(0, len(arrays), 5)
    inputs = (arrays.agentview[idx], arrays.wrist[idx], arrays.state[idx], arrays.tokens[idx])
    ours = numpy_net.forward(params, config, *inputs)
    theirs = np.asarray(model.apply(config, model.unflatten(params), *inputs))
    assert ours.shape == (len(idx), K, 7)
    np.testing.assert_allclose(ours, theirs, atol=1e-5, rtol=0)


def test_the_checkpoint_is_small_and_complete(trained):
    _, params, _, folder = trained
    record = json.loads((folder / "config.json").read_text())["training"]
    assert record["frames"] == sum(LENGTHS) and record["episodes"] == 3 and record["settings"]["seed"] == 3
    assert (folder / "weights.npz").stat().st_size < 50e6
    assert (folder / "loss.png").stat().st_size > 0 and (folder / "loss.csv").is_file()
    loaded, config = checkpoint.load(folder)
    assert config.image_size == SIZE and config.chunk_length == K
    assert all(np.array_equal(loaded[k], params[k]) for k in params)
    with pytest.raises(FileNotFoundError, match="not a checkpoint"):
        checkpoint.load(folder / "nothing")


def test_the_served_action_equals_the_training_side_forward_pass(arrays, trained, serve_app):
    config, params, _, folder = trained
    policy = BCPolicy(folder)
    meta: PolicyMetadata = policy.metadata
    assert [(c.name, c.height, c.width) for c in meta.cameras] == [("agentview", SIZE, SIZE), ("wrist", SIZE, SIZE)]
    assert (meta.chunk_length, meta.replan_steps) == (K, 4)
    i = LENGTHS[0] + 2
    state = arrays.state[i].astype(np.float64)
    obs = Observation(
        episode_id="ep-1",
        step=0,
        instruction=INSTRUCTIONS[1],
        images={"agentview": arrays.agentview[i], "wrist": arrays.wrist[i]},
        proprio={"eef_pos": state[:3], "eef_axis_angle": state[3:6], "gripper_qpos": state[6:]},
    )
    assert tuple(LIBERO_STATE8) == ("eef_pos", "eef_axis_angle", "gripper_qpos")
    url = serve_app(create_app(policy))
    with PolicyClient(url) as client:
        assert client.metadata().chunk_length == K
        client.reset("ep-1", INSTRUCTIONS[1])
        served = client.act(obs.to_message(), chunk_length=K).actions
    flax_out = model.apply(
        config,
        model.unflatten(params),
        arrays.agentview[i : i + 1],
        arrays.wrist[i : i + 1],
        arrays.state[i : i + 1],
        arrays.tokens[i : i + 1],
    )
    expected = checkpoint.postprocess(np.asarray(flax_out), config)[0]
    assert served.shape == (K, 7)
    np.testing.assert_allclose(served, expected, atol=1e-5, rtol=0)


def test_a_folder_that_is_not_a_v30_dataset_is_refused_with_what_to_do(dataset, tmp_path):
    with pytest.raises(data.DatasetError, match="not a LeRobot dataset"):
        data.load(tmp_path)
    info = json.loads((dataset / "meta" / "info.json").read_text())
    (tmp_path / "meta").mkdir()
    (tmp_path / "meta" / "info.json").write_text(json.dumps({**info, "codebase_version": "v2.1"}))
    with pytest.raises(data.DatasetError, match="without --format"):
        data.load(tmp_path)


def test_several_datasets_train_as_one(dataset, arrays, tmp_path):
    """`--dataset A --dataset B` trains on both: episodes stay apart (B's indices offset past
    A's), instructions are the union; parts of different shapes are refused."""
    both = data.concatenate([arrays, arrays])
    assert len(both) == 2 * len(arrays)
    assert len(set(both.episode.tolist())) == 2 * len(LENGTHS)
    assert both.episode[len(arrays)] == len(LENGTHS)
    assert sorted(both.instructions) == sorted(INSTRUCTIONS)
    assert np.array_equal(both.actions[len(arrays) :], arrays.actions)
    small = data.load(dataset, image_size=SIZE // 2, chunk_length=K)
    with pytest.raises(ValueError, match="different image sizes"):
        data.concatenate([arrays, small])
    folder = tmp_path / "bc2"
    args = ["train", "--dataset", str(dataset), "--dataset", str(dataset), "--out", str(folder), "--steps", "3"]
    args += ["--batch-size", "16", "--image-size", str(SIZE), "--chunk-length", str(K)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    record = json.loads((folder / "config.json").read_text())["training"]
    assert record["frames"] == 2 * sum(LENGTHS) and record["episodes"] == 2 * len(LENGTHS)
    assert record["dataset"] == [str(dataset), str(dataset)]
    comma = CliRunner().invoke(app, ["train", "--dataset", f"{dataset},{dataset}", "--out", str(tmp_path / "x")])
    assert comma.exit_code == 2 and "repeat the option" in comma.output
