"""Property-based fuzzing of the whole API (platform and leaderboard) from its own OpenAPI
document with schemathesis, on PostgreSQL, over a real socket: every operation, as anonymous,
as a team member and as an admin, with valid and invalid inputs (NUL bytes, huge numbers, long
strings, wrong types). No answer may be a 5xx. The counts per role are printed (``-s``)."""

from __future__ import annotations

import collections
import secrets
import time

import pytest

#: Generated requests per operation, per role and per generation mode (valid, invalid inputs).
EXAMPLES = 10
IMAGE_ID = "sha256:" + "ef" * 32


@pytest.fixture(scope="module")
def fuzz_env(migrated_pg, tmp_path_factory):
    """The API on a real socket, a user and an admin with tokens, one queued and one published
    submission (so the leaderboard routes have a row to show)."""
    from liberopro_platform.api.app import create_app
    from liberopro_platform.config import Settings
    from liberopro_platform.db import transaction
    from liberopro_platform.models import Result, Submission, Team, User
    from liberopro_platform.security import issue_token
    from lp_helpers import ApiServer, RecordingEnqueue, free_port

    settings = Settings(
        database_url=migrated_pg,
        data_dir=tmp_path_factory.mktemp("fuzz-data"),
        submissions_per_day=1000,
        max_concurrent=1000,
        hidden_runs_per_week=1000,
    )
    app = create_app(settings, enqueue=RecordingEnqueue())
    tokens = {}
    with transaction(app.state.sessions) as s:
        for role in ("user", "admin"):
            team = Team(name=f"fuzz-{role}-{secrets.token_hex(3)}")
            s.add(team)
            s.flush()
            user = User(name=f"fuzz-{role}-{secrets.token_hex(3)}", team_id=team.id, is_admin=role == "admin")
            s.add(user)
            s.flush()
            tokens[role] = issue_token(s, user, 1)[1]
            sub = Submission(
                team_id=team.id,
                user_id=user.id,
                source="reference",
                image_ref=IMAGE_ID,
                image_digest=IMAGE_ID,
                state="published",
            )
            s.add(sub)
            s.flush()
            s.add(
                Result(
                    submission_id=sub.id,
                    team_id=team.id,
                    team_name=team.name,
                    policy_name="fuzz",
                    image_digest=IMAGE_ID,
                    spec_version="1.0",
                    evaluator_version="0.1.0",
                    stack={},
                    manifest_sha256="0" * 64,
                    summary={"cases": []},
                )
            )
    with ApiServer(app, free_port()) as server:
        yield app, server, tokens


def _fuzz(op, mode, url: str, http, headers: dict, examples: int) -> list[tuple[int, str]]:
    """``examples`` generated requests to ``op``: (status, curl command) of each."""
    from hypothesis import HealthCheck, Phase, given, settings

    answers: list[tuple[int, str]] = []

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=op.as_strategy(generation_mode=mode))
    def run(case) -> None:
        response = case.call(base_url=url, session=http, headers=headers, timeout=30)
        answers.append(
            (
                response.status_code,
                f"{case.as_curl_command(headers=headers)} -> {response.status_code} {response.text[:200]}",
            )
        )

    run()
    return answers


def test_no_operation_answers_5xx_for_any_role(fuzz_env):
    import requests
    import schemathesis
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode

    app, server, tokens = fuzz_env
    schema = schemathesis.openapi.from_dict(app.openapi())
    operations = [op.ok() for op in schema.get_all_operations()]
    assert len(operations) >= 20, [op.label for op in operations]
    roles = {
        "anonymous": {},
        "user": {"Authorization": f"Bearer {tokens['user']}"},
        "admin": {"Authorization": f"Bearer {tokens['admin']}"},
    }
    counts: dict[str, collections.Counter] = {role: collections.Counter() for role in roles}
    per_op: collections.Counter = collections.Counter()
    took: collections.Counter = collections.Counter()
    errors: list[str] = []
    http = requests.Session()
    for role, headers in roles.items():
        for op in operations:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                t0 = time.monotonic()
                try:
                    answers = _fuzz(op, mode, server.url, http, headers, EXAMPLES)
                except Unsatisfiable:
                    assert mode == GenerationMode.NEGATIVE, op.label  # nothing to make invalid (no inputs)
                    continue
                per_op[(role, op.label)] += len(answers)
                took[op.label] += time.monotonic() - t0
                counts[role]["requests"] += len(answers)
                for status, text in answers:
                    counts[role][f"{status // 100}xx"] += 1
                    if status >= 500:
                        errors.append(f"{role} {text}")
    total = {role: dict(c) for role, c in counts.items()}
    print(
        f"\nAPI fuzz: {len(operations)} operations, up to {EXAMPLES} examples per operation, role and mode "
        f"(valid and invalid inputs); requests and answers by class per role: {total}"
    )
    print("slowest operations (s):", [(k, round(v, 1)) for k, v in took.most_common(6)])
    print("requests per operation and role:", dict(per_op))
    assert not errors, f"{len(errors)} answers were 5xx:\n" + "\n".join(errors[:30])
    # Hypothesis stops early when an operation's input space is exhausted (one without inputs has
    # one request); every operation with inputs gets at least EXAMPLES requests per role.
    thin = {
        (role, op.label): per_op[(role, op.label)]
        for role in roles
        for op in operations
        if per_op[(role, op.label)] < (EXAMPLES if _has_inputs(op) else 1)
    }
    assert not thin, f"operations that got fewer requests than required: {thin}"


def _has_inputs(op) -> bool:
    return bool(len(op.path_parameters) + len(op.query) + len(op.body))
