"""What a submitter may read while the hidden stage runs (docs/platform.md, "What the submitter
sees, and what only admins see").

From planning until a result is published, the policy sees hidden instances (their
instructions, images, shift effects) and could signal what it sees through anything it can
modulate per episode: whether an episode ends by a crash or a timeout, how long an answer takes,
which shard fails or with which exit code. So the submitter's view of that stage is built only
from what the policy cannot steer per episode:

* progress in whole shards (shards done, and the episodes of the shards done), never per
  episode: no termination-reason totals, no event of a shard's attempts, no per-episode timestamp
  (the submission's row is not written per episode);
* a failure of that stage in a fixed vocabulary (:data:`HIDDEN_FAILURES`): the kind of failure,
  never a failure class of the policy's replies, an exit code or a shard index;
* once published, exactly what the leaderboard shows (``liberopro.schema.public``).

What remains observable (the times at which shards end, the kind of failure, the published
rates) is the channel whose capacity docs/platform.md states and ``hidden_runs_per_week`` caps. The validation stage runs a public check and stays fully
diagnosable (the policy's output, every failed check).
"""

from __future__ import annotations

#: Fix text of a failure that is the platform's, not the submitter's.
INTERNAL_FIX = "nothing to change on your side: the platform's admins can see the details and requeue it"

#: The submitter's text of a failed hidden stage, by kind: (failure, fix). ``policy`` covers every
#: way the policy could not be used (no answer at the start of a shard, an error reply, a crash,
#: bad metadata); ``time`` a shard over its time limit; ``total`` the submission over its total
#: time limit (the stuck sweep); ``platform`` a fault of the evaluator or the infrastructure (never
#: charged to the policy). The only words a failed hidden stage ends with.
HIDDEN_FAILURES: dict[str, tuple[str, str]] = {
    "policy": (
        "the evaluator could not use the policy in the evaluation sandbox (it did not answer, answered with "
        "an error, or exited) on every attempt at a shard; what it answered or printed there is not shown, "
        "since that stage runs hidden instances",
        "run your image against the evaluator locally (`liberopro evaluate --policy URL`, docs/evaluator.md) on "
        "public instances, check that it answers /health, /metadata, /reset and /act for many episodes in a "
        "row, then submit again",
    ),
    "time": (
        "a shard did not finish within its time limit on every attempt (the policy answers too slowly for "
        "the platform's limits)",
        "measure your policy's latency locally (`liberopro evaluate --policy URL` records it per episode) and "
        "answer each /act within the request timeout and each episode within its budget "
        "(submission_spec/README.md, 'Time limits')",
    ),
    "total": (
        "the evaluation did not finish within the platform's total time limit for a submission (waits for a "
        "worker included)",
        "measure your policy's latency locally (`liberopro evaluate --policy URL` records it per episode); if it "
        "answers promptly, the platform was too busy: submit again later or ask its admins",
    ),
    "platform": (
        "a platform error stopped the evaluation (the evaluator or the infrastructure failed, not your "
        "policy); no score was charged for it",
        INTERNAL_FIX,
    ),
}


def failure_kind(status: str) -> str:
    """The :data:`HIDDEN_FAILURES` key of a shard attempt that ended with ``status``
    (``liberopro_platform.sandbox.base.ShardStatus``, or ``missing``: the evaluator finished
    without the episodes the platform stores, which only a platform fault leaves)."""
    return {"policy_error": "policy", "timed_out": "time"}.get(status, "platform")


def hidden_message(state: str, done: int, total: int) -> str:
    """The status message of a submission in the hidden stage (``running``, ``aggregating``):
    ``done`` of ``total`` shards."""
    if state == "aggregating":
        return "aggregating: computing the summary"
    return f"running on the hidden instances: {done} of {total} shards done"
