"""GPU rendering as configuration (issue 12 item 4): which GPU each evaluator stream gets, that it
is never the policy's unless told, and the container options that make the evaluator render on it
(the engine's view of them: ``test_docker_pipeline.py::test_policy_container_restrictions``). No
services, no GPU."""

from __future__ import annotations

import pytest
from liberopro_platform.config import Settings
from liberopro_platform.sandbox.docker.containers import evaluator_gpu_options
from pydantic import ValidationError


def test_streams_take_the_evaluator_gpus_round_robin(monkeypatch):
    monkeypatch.setenv("LIBEROPRO_EVALUATOR_GPUS", "1, GPU-5f1c,3")
    s = Settings(gpus="0")
    assert s.evaluator_gpus == ["1", "GPU-5f1c", "3"]
    assert [s.evaluator_gpu(i) for i in range(5)] == ["1", "GPU-5f1c", "3", "1", "GPU-5f1c"]
    assert Settings(evaluator_gpus="").evaluator_gpu(0) is None


@pytest.mark.parametrize(
    ("policy", "evaluator", "shared"),
    [("all", "2", ["2"]), ("2", "1,3", ["1"]), ("0,3", "3,4", ["3"])],
)
def test_the_policys_gpus_are_refused_unless_sharing_is_set(policy, evaluator, shared):
    with pytest.raises(ValidationError) as err:
        Settings(gpus=policy, evaluator_gpus=evaluator)
    assert f"include GPUs the policy gets (gpus={policy!r}: {shared})" in str(err.value)
    assert "LIBEROPRO_EVALUATOR_GPUS_SHARE_POLICY=1" in str(err.value)
    assert Settings(gpus=policy, evaluator_gpus=evaluator, evaluator_gpus_share_policy=True).evaluator_gpus


def test_a_device_that_is_not_a_gpu_is_named():
    with pytest.raises(ValidationError, match="'cuda:1' is not a GPU .* LIBEROPRO_EVALUATOR_GPUS=1,2"):
        Settings(evaluator_gpus="cuda:1")


def test_a_gpu_stream_asks_for_its_device_and_the_drivers_egl():
    assert evaluator_gpu_options(Settings(), 0) == {}
    opts = evaluator_gpu_options(Settings(evaluator_gpus="4,5"), 1)
    (request,) = opts["device_requests"]
    assert request["DeviceIDs"] == ["5"] and request["Capabilities"] == [["gpu"]]
    # inside the container its one device is EGL device 0; EGL is the driver's `graphics` capability
    assert opts["environment"] == {"NVIDIA_DRIVER_CAPABILITIES": "graphics,utility", "MUJOCO_EGL_DEVICE_ID": "0"}
