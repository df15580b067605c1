"""One evaluation end to end: policy up, metadata read, episodes run, records and summary written.

The CLI (``liberopro evaluate``) calls :func:`run_evaluation`; the platform's shard runner
(:mod:`liberopro.runs.shard`) runs the same episode runner and opens its policy the same way
(:func:`liberopro.episode.policy_connection.open_policy`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from submission_spec.client import fail_fast_if_refused

from liberopro import EVALUATOR_VERSION
from liberopro.episode.policy_connection import PolicyConnection, open_policy
from liberopro.episode.runner import CurrentScene, EpisodeRunner, RunSettings
from liberopro.instances.build import EpisodePlan, Instance
from liberopro.runs.resume import (
    EpisodeKey,
    check_before_start,
    ordered_plans,
    plan_key,
    plan_order,
    prepare_run_dir,
    record_key,
    run_identity,
    shard_plans,
    write_identity,
)
from liberopro.runs.summary import EpisodeRecord, ResultsWriter
from liberopro.runs.workers import PolicyAccess, auto_render_size, choose_workers, run_workers
from liberopro.schema.results import RunHeader, Summary, run_header
from liberopro.stack import check_stack
from submission_spec import Policy, PolicyMetadata


def _write_instances(out_dir: Path, plans: list[EpisodePlan]) -> dict[str, Instance]:
    """Write ``out_dir/instances.jsonl``: each instance of ``plans`` once, in plan order; returns
    them by id."""
    instances: dict[str, Instance] = {p.instance.instance_id: p.instance for p in plans}
    with (out_dir / "instances.jsonl").open("w") as fh:
        for inst in instances.values():
            fh.write(inst.model_dump_json() + "\n")
    return instances


def _policy_header(
    policy: PolicyConnection,
    policy_url: str | None,
    policy_cmd: str | None,
    protocol: str,
    encoding: str,
    protocol_options: dict[str, Any] | None,
) -> dict[str, Any]:
    """The run header's ``policy`` for a policy reached over the wire (an API key masked)."""
    return {
        "url": policy_url,
        "cmd": policy_cmd,
        "protocol": protocol,
        "encoding": encoding,
        "protocol_options": {k: "***" if k == "api_key" else v for k, v in (protocol_options or {}).items()},
        "metadata": policy.metadata.model_dump(mode="json"),
        "restarts": policy.restarts,
        "pids": policy.pids,
    }


def _connect(
    out_dir: Path,
    policy_url: str | None,
    policy_cmd: str | None,
    local_policy: Callable[[Callable[[], Any]], Policy] | None,
    scene: CurrentScene,
    protocol: str,
    options: dict[str, Any],
    startup_timeout: float,
) -> contextlib.AbstractContextManager[PolicyConnection]:
    """The policy's connection (:func:`run_evaluation`): ``local_policy(scene)`` in this process,
    or the policy at ``policy_url`` / started by ``policy_cmd`` (its log: ``out_dir/policy.log``)."""
    if local_policy is not None:
        from liberopro.episode.local_policy import LocalPolicyClient

        local = local_policy(scene)
        return contextlib.nullcontext(
            PolicyConnection(client=LocalPolicyClient(local), metadata=local.metadata, url="in-process")
        )
    return open_policy(
        policy_url,
        policy_cmd,
        protocol=protocol,
        client_options=options,
        startup_timeout=startup_timeout,
        log_path=out_dir / "policy.log",
    )


def _execute(
    plans: list[EpisodePlan],
    n: int,
    runner: EpisodeRunner,
    access: PolicyAccess,
    policy: PolicyConnection,
    writer: ResultsWriter,
    on_record: Callable[[EpisodeRecord], None] | None,
    note: Callable[[str], None] | None,
) -> None:
    """Run ``plans`` with ``runner`` in this process (``n`` = 1) or on ``n`` worker processes
    reaching the policy through ``access``; every record goes to ``writer`` and ``on_record``."""
    if not plans:  # a resumed run with nothing left to run
        return

    def record(r: EpisodeRecord) -> None:
        writer.add(r)
        if on_record is not None:
            on_record(r)

    if n == 1:
        runner.run(plans, record)
        return
    run_workers(
        plans,
        n,
        access,
        runner.meta,
        runner.settings,
        writer.add,
        arrived=on_record,
        note=note,
        between=policy.ensure_running if policy.process is not None else None,
    )


def _start_run(
    out_dir: Path,
    plans: list[EpisodePlan],
    settings: RunSettings,
    policy: dict[str, Any],
    shard: tuple[int, int] | None,
    resume: bool,
    note: Callable[[str], None] | None,
) -> tuple[list[EpisodePlan], ResultsWriter, dict[EpisodeKey, int], int]:
    """(episodes to run, the results writer holding the records kept from an earlier run, record
    order, instances) of this run's part of ``plans`` (``shard``: a block of them in
    :func:`~liberopro.runs.workers.canonical_order`, the order records are written in), once ``out_dir`` holds this
    run's identity and instances (:mod:`liberopro.runs.resume`; raises
    :class:`~liberopro.runs.resume.ResumeError` for an earlier run of another identity)."""
    identity = run_identity(plans, asdict(settings), policy, shard)
    mine = shard_plans(ordered_plans(plans), shard)
    order = plan_order(mine)
    kept = [r for r in prepare_run_dir(out_dir, identity, resume) if record_key(r) in order]
    if kept and note is not None:
        note(f"resuming {out_dir}: {len(kept)} of {len(mine)} episodes kept, {len(mine) - len(kept)} to run")
    write_identity(out_dir, identity)
    ids = {p.instance.instance_id for p in mine}
    instances = _write_instances(out_dir, [p for p in plans if p.instance.instance_id in ids])
    writer = ResultsWriter(out_dir)
    for record in kept:
        writer.add(record)
    done = {record_key(r) for r in kept}
    return [p for p in mine if plan_key(p) not in done], writer, order, len(instances)


def _workers(
    workers: int | None,
    meta: PolicyMetadata,
    in_process: bool,
    protocol: str,
    plans: list[EpisodePlan],
    note: Callable[[str], None] | None,
) -> int:
    """The worker processes for ``plans`` (the episodes left to run), the choice's line to ``note``
    unless ``--workers 1`` was asked; raises :func:`~liberopro.runs.workers.choose_workers`'s
    ``ValueError`` for ``workers`` above what the policy declares it runs at once (called first
    on the whole of this run's plans, so that it is refused before the run folder changes)."""
    n, why = choose_workers(workers, meta, in_process=in_process, protocol=protocol, plans=plans)
    if note is not None and workers != 1:
        note(why)
    return n


def _access(
    local_policy: Callable[[Callable[[], Any]], Policy] | None,
    policy: PolicyConnection,
    protocol: str,
    options: dict[str, Any],
) -> PolicyAccess:
    """How worker processes reach the policy: the local policy built again, or its URL."""
    if local_policy is not None:
        return PolicyAccess(local_policy=local_policy)
    return PolicyAccess(url=policy.url, protocol=protocol, client_options=options)


def _shard_field(shard: tuple[int, int] | None) -> dict[str, str]:
    """The header's ``shard`` (``"I/N"``) of a sharded run; nothing for the whole plan."""
    return {"shard": f"{shard[0]}/{shard[1]}"} if shard else {}


def _header(
    versions: dict[str, str | None],
    started: str,
    policy: dict[str, Any],
    settings: RunSettings,
    instances: int,
    context: dict[str, Any],
) -> RunHeader:
    """The run's header, finished now (:func:`liberopro.schema.results.run_header`; ``context``:
    the local run's own fields)."""
    return run_header(
        evaluator_version=EVALUATOR_VERSION,
        stack=versions,
        started=started,
        finished=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        command=sys.argv,
        policy=policy,
        settings=asdict(settings),
        instances=instances,
        **context,
    )


def run_evaluation(
    plans: list[EpisodePlan],
    out_dir: Path,
    *,
    policy_url: str | None = None,
    policy_cmd: str | None = None,
    local_policy: Callable[[Callable[[], Any]], Policy] | None = None,
    encoding: str = "msgpack",
    protocol: str = "liberopro",
    protocol_options: dict[str, Any] | None = None,
    settings: RunSettings | None = None,
    render_size: int | None = None,
    connect_timeout: float = 5.0,
    request_timeout: float = 30.0,
    startup_timeout: float = 120.0,
    refused_grace: float = 5.0,
    skipped: list[str] | None = None,
    extra_header: dict[str, Any] | None = None,
    on_record: Callable[[EpisodeRecord], None] | None = None,
    workers: int | None = 1,
    note: Callable[[str], None] | None = None,
    resume: bool = False,
    shard: tuple[int, int] | None = None,
) -> Summary:
    """Run ``plans`` and write ``out_dir/episodes.jsonl``, ``summary.json`` and ``instances.jsonl``;
    returns the :class:`~liberopro.schema.results.Summary` written (``extra_header``: more header
    fields, e.g. the CLI's ``manifest`` and ``manifest_sha256``).

    Exactly one of ``policy_url`` / ``policy_cmd``, opened by
    :func:`liberopro.episode.policy_connection.open_policy` (a command's output goes to
    ``out_dir/policy.log``), or ``local_policy``: evaluator tooling run in this process, no HTTP
    (:class:`liberopro.episode.local_policy.LocalPolicyClient`; the privileged oracle,
    :class:`liberopro.oracle.policy.OraclePolicy`, never a submission), built as
    ``local_policy(scene_of)`` where ``scene_of()`` returns the scene of the episode being run
    (:attr:`liberopro.episode.runner.EpisodeRunner.current_scene`). ``protocol`` names the policy's wire protocol
    (:mod:`submission_spec.transports`); ``protocol_options`` go to its client. ``refused_grace``:
    :func:`submission_spec.client.fail_fast_if_refused`, before ``out_dir`` is made. Raises
    :class:`liberopro.stack.StackError` for a refused simulation stack, :class:`submission_spec.PolicyError`
    when the policy cannot be reached or its metadata is invalid (nothing can run then) and
    ``ValueError`` for not exactly one of ``policy_url`` / ``policy_cmd`` / ``local_policy``, a
    bad protocol option or a refused ``workers``; any failure inside an episode is recorded in that
    episode instead.

    ``workers``: simulator processes (:mod:`liberopro.runs.workers`; 1 runs in this process, None
    chooses by :func:`liberopro.runs.workers.choose_workers`, whose line goes to ``note``). Records are
    the same and written in the same order whatever the number; ``on_record`` sees each as it
    arrives.

    ``shard = (I, N)``: only the I-th of N contiguous blocks of ``plans``. ``resume``: keep the
    finished episodes of an earlier run of the same identity in ``out_dir`` and run the rest, else
    replace it (:mod:`liberopro.runs.resume`; another identity raises its ``ResumeError``, before
    the policy starts for what needs no policy: :func:`~liberopro.runs.resume.check_before_start`).
    """
    if sum(p is not None for p in (policy_url, policy_cmd, local_policy)) != 1:
        raise ValueError("give exactly one of policy_url, policy_cmd or local_policy")
    versions = check_stack()
    if policy_url is not None:  # a dead URL fails in seconds, before the run folder exists
        fail_fast_if_refused(policy_url, refused_grace)
    out_dir = Path(out_dir)
    settings = settings or RunSettings()
    # an earlier run of another plan, settings or shard in out_dir: refused before the policy starts
    check_before_start(out_dir, plans, {**asdict(settings), "render_size": render_size}, shard, resume)
    out_dir.mkdir(parents=True, exist_ok=True)
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    options = {"connect_timeout": connect_timeout, "request_timeout": request_timeout, **(protocol_options or {})}
    if protocol == "liberopro":
        options["encoding"] = encoding
    scene = CurrentScene()  # the runner's, once built: a local policy reads its scene
    connection = _connect(out_dir, policy_url, policy_cmd, local_policy, scene, protocol, options, startup_timeout)
    with connection as policy:
        client, meta = policy.client, policy.metadata
        settings.render_size = render_size or auto_render_size(meta)
        if settings.video != "none" or settings.record_actions:
            settings.output_dir = str(out_dir)  # the runner writes videos/ and actions/ there
        identity = {"protocol": protocol, "metadata": meta.model_dump(mode="json")}
        mine = shard_plans(ordered_plans(plans), shard)
        _workers(workers, meta, local_policy is not None, protocol, mine, None)  # refused before OUT changes
        todo, writer, order, instances = _start_run(out_dir, plans, settings, identity, shard, resume, note)
        n = _workers(workers, meta, local_policy is not None, protocol, todo or plans, note)
        runner = EpisodeRunner(
            client, meta, settings, before_episode=policy.ensure_running if policy.process is not None else None
        )
        scene.bind(runner)
        access = _access(local_policy, policy, protocol, options)
        try:
            _execute(todo, n, runner, access, policy, writer, on_record, note)
        finally:
            runner.close()
        header = _header(
            versions,
            started,
            _policy_header(policy, policy_url, policy_cmd, protocol, encoding, protocol_options)
            if local_policy is None
            else {"in_process": meta.policy_name, "metadata": meta.model_dump(mode="json")},
            settings,
            instances,
            {"skipped_pairs": skipped or [], "workers": n, **_shard_field(shard), **(extra_header or {})},
        )
        return writer.finish(header, order=lambda r: order[record_key(r)])
