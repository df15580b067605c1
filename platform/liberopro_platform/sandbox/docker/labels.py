"""The names and labels every sandbox resource carries, and the label filters that find them."""

from __future__ import annotations

LABEL = "org.liberopro.sandbox"
LABEL_WORKER = "org.liberopro.worker"
#: The platform's deployment id (``platform_meta``): cleanup touches only its own deployment's
#: sandboxes, whatever else runs on the engine.
LABEL_DEPLOYMENT = "org.liberopro.deployment"
LABEL_SUBMISSION = "org.liberopro.submission"
LABEL_ROLE = "org.liberopro.role"
#: ``node`` on a submission's node sandbox (network and policy container shared by its shards).
LABEL_SCOPE = "org.liberopro.scope"
#: The policy container's network alias, the host name the evaluator asks.
POLICY_HOST = "policy"
#: Where the shard file's volume is mounted in the evaluator container.
SHARD_DIR = "/shard"


def filters(deployment: str | None, worker: str | None = None) -> dict[str, list[str]]:
    """Label filters of ``deployment``'s sandbox resources (of ``worker``, or all; without a
    deployment id, of every deployment)."""
    return {
        "label": [f"{LABEL}=1"]
        + ([f"{LABEL_DEPLOYMENT}={deployment}"] if deployment else [])
        + ([f"{LABEL_WORKER}={worker}"] if worker else [])
    }


def node_filters(deployment: str | None, worker: str, submission_id: str | None = None) -> dict[str, list[str]]:
    """Label filters of ``worker``'s node sandboxes (of ``submission_id``, or all)."""
    found = filters(deployment, worker)
    found["label"].append(f"{LABEL_SCOPE}=node")
    if submission_id is not None:
        found["label"].append(f"{LABEL_SUBMISSION}={submission_id}")
    return found
