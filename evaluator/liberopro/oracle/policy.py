"""The privileged oracle as a :class:`submission_spec.Policy`: the scripted controller
(:class:`liberopro.oracle.scripted.ScriptedController`) driven through the real episode runner
(:class:`liberopro.episode.runner.EpisodeRunner`) via :class:`liberopro.episode.local_policy.LocalPolicyClient`,
so that its episodes pass through the same shift layers (action latency, noise and gain, runtime
shifts that move the scene or the robot) and the same records and summary as a submitted
policy's, and its success rates are comparable row by row.

Privileged: it reads the simulator's state (object and gripper poses, contacts) from the
episode's own scene, never the observation it is sent. Tooling and a reference only, never a
submission; ``liberopro demo`` shows its row beside the example policy's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from submission_spec import Observation, PolicyMetadata

if TYPE_CHECKING:
    from liberopro.episode.runner import EpisodeRunner, RunSettings
    from liberopro.oracle.scripted import ScriptedController
    from liberopro.sim.scene import LiberoScene

#: The oracle's label where it is introduced (the demo's table titles): what it is and why it is there.
ORACLE_NAME = "oracle (privileged: reads simulator state; a reference, never a submission)"
#: The oracle's ``policy_name`` in its ``/metadata``, which reports and tables repeat in every
#: heading and cell (a fresh user counted the long label 259 times in one report): short, and
#: still says what it is (also the run header's ``in_process``).
ORACLE_POLICY_NAME = "oracle (privileged, never a submission)"


def oracle_metadata() -> PolicyMetadata:
    """The oracle's ``/metadata``: no cameras (it reads the simulator, and a scene without
    cameras steps ~20x faster), one action per request, LIBERO's gripper convention
    (-1 opens, +1 closes: what the controller emits). Observation shifts therefore have nothing
    to act on for it."""
    return PolicyMetadata(policy_name=ORACLE_POLICY_NAME, cameras=[], chunk_length=1, replan_steps=1)


class OraclePolicy:
    """The scripted controller behind the :class:`submission_spec.Policy` interface.

    Args:
        scene_of: returns the scene of the episode being run, started and settled (the runner
            calls ``reset`` after the static shifts were applied and the scene settled):
            normally ``lambda: runner.current_scene`` (:attr:`EpisodeRunner.current_scene`),
            which is the episode's own scene variant. None there: ``reset`` raises
            ``RuntimeError``.

    ``act`` returns a (1, 7) float64 chunk in LIBERO's convention (arm deltas in [-1, 1],
    gripper -1 open / +1 close), read from the controller at the scene's current state;
    the ``Observation`` is ignored. A new controller is planned at every ``reset`` from the
    task semantics of the scene's task (:func:`liberopro.instances.build.semantics_of`, BDDL only).
    """

    def __init__(self, scene_of: Callable[[], LiberoScene | None]) -> None:
        self.metadata = oracle_metadata()
        self._scene_of = scene_of
        self._controller: ScriptedController | None = None

    def reset(self, episode_id: str, instruction: str) -> None:
        from liberopro.oracle.scripted import ScriptedController
        from liberopro.semantics import semantics_of

        scene = self._scene_of()
        if scene is None:
            raise RuntimeError("the oracle needs the episode's scene: reset was called outside an episode")
        self._controller = ScriptedController(scene, semantics_of(scene.task.ref))

    @property
    def stage(self) -> str | None:
        """What the controller is doing (``"place akita_black_bowl_1: descend"``), None before
        the first ``reset``."""
        return None if self._controller is None else self._controller.stage

    def act(self, observation: Observation) -> np.ndarray:
        if self._controller is None:
            raise RuntimeError("act before reset")
        return np.asarray(self._controller(), dtype=np.float64)[None]


def oracle_runner(settings: RunSettings, scenes: dict | None = None) -> EpisodeRunner:
    """An :class:`~liberopro.episode.runner.EpisodeRunner` whose policy is the oracle (in process, no
    HTTP), camera-less; ``settings`` as for any policy (``render_size`` is unused without
    cameras). ``scenes``: a shared scene cache, as :class:`EpisodeRunner` takes it."""
    from liberopro.episode.local_policy import LocalPolicyClient
    from liberopro.episode.runner import CurrentScene, EpisodeRunner

    scene = CurrentScene()
    return scene.bind(EpisodeRunner(LocalPolicyClient(OraclePolicy(scene)), oracle_metadata(), settings, scenes=scenes))
