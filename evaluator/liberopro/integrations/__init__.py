"""LIBERO-Pro2.0 from the tools researchers already use (``docs/integrations.md``).

* :mod:`liberopro.integrations.stepper`: :class:`~liberopro.integrations.stepper.EpisodeStepper`, one
  episode of one instance stepped from outside the evaluator, on the episode runner's own machinery.
* :mod:`liberopro.integrations.gymnasium_env`: the Gymnasium environment ``LiberoPro/Instance-v0``,
  registered when this package is imported (``gymnasium.make("LiberoPro/Instance-v0", ...)``, or
  ``gymnasium.make("liberopro.integrations:LiberoPro/Instance-v0", ...)`` without importing it first).
* :mod:`liberopro.integrations.vla_eval`: a benchmark class for allenai's vla-evaluation-harness
  (the ``vlaeval`` extra).
* :mod:`liberopro.integrations.lerobot_env`: the environment lerobot's ``lerobot-eval`` runs
  (``LiberoPro/LeRobot-v0``) and, in its ``config`` submodule (which imports lerobot), the lerobot
  environment type ``LiberoPro``.

All of them need the simulator (the ``sim`` extra).
"""

from __future__ import annotations

import gymnasium

ENV_ID = "LiberoPro/Instance-v0"

if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point="liberopro.integrations.gymnasium_env:InstanceEnv")

__all__ = ["ENV_ID"]
