"""Several simulator processes over one episode plan (``liberopro evaluate --workers N``).

N worker processes (the standard library's :class:`concurrent.futures.ProcessPoolExecutor`,
``spawn`` start method: MuJoCo's EGL contexts and ``fork`` do not mix) run the episodes, all
talking to the one policy of the run (its URL; an in-process policy such as the oracle gets one
instance per worker). Each worker runs one thread of BLAS/OpenMP (:data:`THREAD_ENV`). The parent
alone writes ``episodes.jsonl`` and ``summary.json``.

* Assignment (:func:`assign`): a pure function of the plan and N. One task's episodes stay in one
  worker (a LIBERO scene is built once per task and reused); tasks are spread by their work
  (episodes x the suite's horizon), largest first, onto the least loaded worker.
* Records are written in the order a single process writes them (:func:`canonical_order`: the
  plan grouped by task, tasks in order of first appearance), each as soon as every record before
  it is in; the progress callback sees each record as it arrives.
* A worker process that dies (a simulator segfault, the out-of-memory killer) has its unfinished
  episodes run again once, in a fresh worker; if that one dies too, they are recorded as failed
  episodes with ``termination_reason`` :data:`WORKER_CRASHED` and the reason in ``detail``
  (invalid: a platform fault, never the policy's). The evaluation goes on either way.
* How many workers by default (:func:`default_workers`): the smallest of the CPUs this process may
  use (:func:`available_cpus`: affinity and the cgroup's CPU quota), the policy's
  ``max_concurrent_episodes`` (:func:`policy_limit`), the scenes that fit in the memory available
  (:data:`SCENE_BYTES` each, :func:`available_memory`) and the number of tasks.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import math
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from liberopro.schema.reasons import TerminationReason

if TYPE_CHECKING:  # the worker's module must import without MuJoCo (the parent imports it early)
    from liberopro.episode.runner import RunSettings
    from liberopro.instances.build import EpisodePlan
    from liberopro.runs.summary import EpisodeRecord
    from submission_spec import PolicyMetadata

#: Thread counts of every worker process: one simulator per core, no library spreading over the
#: others (``LP_NUM_THREADS`` is ours; the others are read by OpenMP, MKL, OpenBLAS, numexpr and
#: Accelerate when they load).
THREAD_ENV = {
    "LP_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
}

#: Memory one worker's LIBERO scene may take (bytes): 1.5-2.5 GB measured (runner.scene_for).
SCENE_BYTES = 2 * 1024**3

#: ``termination_reason`` of an episode whose worker process died twice (first run and retry):
#: the platform's side, so the record is invalid (:mod:`liberopro.schema.reasons`).
WORKER_CRASHED = TerminationReason.worker_crashed

#: Protocols whose wire carries no episode (each request stands alone): several workers may share
#: a server of theirs that declares no concurrency (its requests queue); the liberopro protocol's
#: spec-1.0 server holds one episode at a time (the SDK answers 409 unknown_episode to an /act
#: whose episode is not the one last reset), so it may not.
STATELESS_PROTOCOLS = ("openpi", "openvla")


# ---------------------------------------------------------------------- assignment
def canonical_order(plans: Sequence[EpisodePlan]) -> list[int]:
    """Indices of ``plans`` in the order one process runs and writes them
    (:meth:`liberopro.episode.runner.EpisodeRunner.run`): grouped by task, tasks in order of first
    appearance, plan order within a task."""
    first: dict[Any, int] = {}
    for i, p in enumerate(plans):
        first.setdefault(p.instance.task, i)
    return sorted(range(len(plans)), key=lambda i: first[plans[i].instance.task])


def assign(plans: Sequence[EpisodePlan], n: int) -> list[list[int]]:
    """Split ``plans`` over ``n`` workers: ``n`` lists of plan indices (some empty when there are
    fewer tasks than workers), each in :func:`canonical_order`.

    A pure function of the plans and ``n``: all episodes of a task go to one worker; tasks are
    taken by decreasing work (their episodes x the suite's horizon, ties by first appearance) and
    each goes to the least loaded worker (ties: the lowest index). Raises ``ValueError`` for
    ``n < 1``.
    """
    if n < 1:
        raise ValueError(f"workers must be at least 1, not {n}")
    groups: dict[Any, list[int]] = {}
    for i in canonical_order(plans):
        groups.setdefault(plans[i].instance.task, []).append(i)
    work = {task: len(idx) * task.horizon for task, idx in groups.items()}
    order = sorted(groups, key=lambda t: (-work[t], groups[t][0]))
    shares: list[list[int]] = [[] for _ in range(n)]
    load = [0] * n
    for task in order:
        w = min(range(n), key=lambda k: (load[k], k))
        shares[w].extend(groups[task])
        load[w] += work[task]
    position = {i: k for k, i in enumerate(canonical_order(plans))}
    return [sorted(s, key=position.__getitem__) for s in shares]


def assign_blocks(plans: Sequence[EpisodePlan], n: int) -> list[list[int]]:
    """Split ``plans`` over ``n`` simulator streams episode by episode (the platform's shards, which
    hold a few tasks' episodes, :mod:`liberopro.runs.shard`): :func:`canonical_order` cut into ``n``
    contiguous blocks whose sizes differ by at most one (the first ones larger), so each stream
    builds the scenes of as few tasks as possible. A pure function of the plans and ``n``; some
    lists are empty when there are fewer episodes than streams. Raises ``ValueError`` for ``n < 1``.
    """
    if n < 1:
        raise ValueError(f"streams must be at least 1, not {n}")
    order = canonical_order(plans)
    size, extra = divmod(len(order), n)
    out, start = [], 0
    for k in range(n):
        end = start + size + (1 if k < extra else 0)
        out.append(order[start:end])
        start = end
    return out


# ---------------------------------------------------------------------- default N
def cgroup_cpu_quota(path: Path = Path("/sys/fs/cgroup/cpu.max")) -> float | None:
    """CPUs the cgroup (v2) may use: ``quota / period`` of ``cpu.max`` (``"200000 100000"`` -> 2.0);
    None when there is no such file or no quota (``"max 100000"``). Raises ``ValueError`` for a
    file that is not ``QUOTA PERIOD``."""
    try:
        text = Path(path).read_text().split()
    except OSError:
        return None
    if len(text) != 2:
        raise ValueError(f"{path}: expected 'QUOTA PERIOD' (e.g. 'max 100000'), got {' '.join(text)!r}")
    if text[0] == "max":
        return None
    quota, period = int(text[0]), int(text[1])
    return quota / period if period > 0 else None


def available_cpus(cpu_max: Path = Path("/sys/fs/cgroup/cpu.max")) -> tuple[int, str]:
    """(CPUs this process may use, in words): the CPUs of its affinity mask, capped by the cgroup's
    quota rounded down (at least 1)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    why = f"{cpus} CPU(s) in this process's affinity"
    quota = cgroup_cpu_quota(cpu_max)
    if quota is not None and max(1, math.floor(quota)) < cpus:
        cpus = max(1, math.floor(quota))
        why = f"a cgroup CPU quota of {quota:g} CPU(s) ({cpu_max})"
    return cpus, why


def available_memory(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """``MemAvailable`` of ``meminfo`` in bytes; None when the file or the line is missing."""
    try:
        for line in Path(meminfo).read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        return None
    return None


def auto_render_size(meta: PolicyMetadata) -> int:
    """128 when every camera the policy wants is at most 128 px, else 256 (LIBERO's evaluation
    resolution)."""
    sizes = [max(c.height, c.width) for c in meta.cameras] or [128]
    return 128 if max(sizes) <= 128 else 256


def policy_limit(meta: PolicyMetadata, in_process: bool) -> int | None:
    """Episodes the policy may run at once: None (no limit) for an in-process policy (each worker
    builds its own instance), else the ``max_concurrent_episodes`` its ``/metadata`` declares;
    a policy that declares none (every spec-1.0 policy) runs one."""
    if in_process:
        return None
    declared = getattr(meta, "max_concurrent_episodes", None)
    return int(declared) if declared else 1


def default_workers(limit: int | None, tasks: int, cpus: tuple[int, str], memory: int | None) -> tuple[int, str]:
    """(N, why): the smallest of ``cpus[0]``, the policy's ``limit`` (None: none), the scenes of
    :data:`SCENE_BYTES` that fit in ``memory`` bytes (None: unknown, no cap) and ``tasks``
    (one task's episodes stay in one worker); at least 1. ``why`` names each bound."""
    bounds = [(cpus[0], cpus[1])]
    if limit is None:
        bounds.append((10**9, "the policy runs in each worker's own process (no limit)"))
    else:
        bounds.append((limit, f"the policy runs {limit} episode(s) at once (its max_concurrent_episodes; none: 1)"))
    if memory is not None:
        fit = max(1, memory // SCENE_BYTES)
        bounds.append(
            (fit, f"{fit} scene(s) of ~{SCENE_BYTES / 1024**3:.0f} GB fit in {memory / 1024**3:.1f} GB available")
        )
    bounds.append((max(1, tasks), f"{tasks} task(s), each in one worker"))
    n = min(b for b, _ in bounds)
    return n, "; ".join(w for _, w in bounds if w)


def choose_workers(
    requested: int | None, meta: PolicyMetadata, *, in_process: bool, protocol: str, plans: Sequence[EpisodePlan]
) -> tuple[int, str]:
    """(N, a line saying why) for a run of ``plans``: ``requested`` (``--workers``; capped by the
    number of tasks, since one task's episodes stay in one worker), else :func:`default_workers`.

    Raises ``ValueError`` when ``requested`` is below 1, or above what a liberopro-protocol policy
    declares it runs at once (:func:`policy_limit`; spec 1.0 declares nothing: one): its server
    holds one episode, so interleaved episodes would fail (the SDK answers 409 unknown_episode)
    or, worse, mix their state. openpi and openvla servers get what was asked, with a warning in
    the line: their wire has no episodes, requests just queue (:data:`STATELESS_PROTOCOLS`).
    """
    tasks = len({p.instance.task for p in plans})
    limit = policy_limit(meta, in_process)
    if requested is None:
        n, why = default_workers(limit, tasks, available_cpus(), available_memory())
        return n, f"workers: {n} (default: the smallest of: {why}; --workers N to choose)"
    if requested < 1:
        raise ValueError(f"--workers must be at least 1, not {requested}")
    n = min(requested, max(1, tasks))
    why = f"workers: {n} (--workers {requested}" + (
        f"; only {tasks} task(s), each in one worker" if n < requested else ""
    )
    if limit is not None and n > limit:
        if protocol not in STATELESS_PROTOCOLS:
            raise ValueError(
                f"--workers {requested}: the policy declares it runs {limit} episode(s) at once "
                "(max_concurrent_episodes in /metadata; a spec-1.0 policy declares none, which means 1), and a "
                f"liberopro-protocol server keeps no more episodes active than that: more workers' episodes would "
                f"fail with unknown_episode or mix their state. Give --workers {limit} or leave --workers out"
            )
        why += (
            f"; the policy declares {limit} episode(s) at once, so {n} workers queue their requests on it: "
            f"right for a policy that keeps no state between requests ({protocol} has no episodes on the wire)"
        )
    return n, why + ")"


def stop_pool(pool: cf.ProcessPoolExecutor, processes: Sequence[Any] | None = None) -> None:
    """Stop ``pool`` now (an interrupt, a failure): cancel the work not started and terminate its
    processes (``processes``, else the pool's own, read before the shutdown forgets them: Python
    3.11 has no public handle on them)."""
    procs = list(processes if processes is not None else (getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        if proc.is_alive():
            proc.terminate()


# ---------------------------------------------------------------------- the worker process
@dataclass(frozen=True)
class PolicyAccess:
    """How a worker reaches the run's policy: ``url`` with ``protocol`` and the client's
    ``client_options`` (:func:`submission_spec.transports.make_client`), or ``local_policy``
    (``local_policy(scene_of)`` builds an in-process :class:`submission_spec.Policy`, e.g.
    :class:`liberopro.oracle.policy.OraclePolicy`; picklable by reference)."""

    url: str | None = None
    protocol: str = "liberopro"
    client_options: dict[str, Any] = field(default_factory=dict)
    local_policy: Callable[[Callable[[], Any]], Any] | None = None
    #: Seconds a worker waits, before an episode, for a policy at ``url`` that does not answer its
    #: health check (:class:`RestartWait`); None: no wait.
    restart_wait_s: float | None = None


_RUNNER: Any = None  # the worker process's EpisodeRunner (module state of the spawned process)


def _init_worker(access: PolicyAccess, meta: PolicyMetadata, settings: RunSettings) -> None:
    """Runs first in each worker process: thread counts, then the policy's client and the
    episode runner that keeps the worker's scene between episodes."""
    global _RUNNER
    os.environ.update(THREAD_ENV)
    from liberopro.episode.runner import EpisodeRunner

    client: Any
    if access.local_policy is not None:  # its own instance, reading this worker's scene
        from liberopro.episode.local_policy import LocalPolicyClient

        client = LocalPolicyClient(access.local_policy(lambda: _RUNNER.current_scene if _RUNNER else None))
    else:
        from submission_spec.transports import make_client

        assert access.url is not None
        client = make_client(access.url, access.protocol, **access.client_options)
    before = None
    if access.restart_wait_s is not None and access.local_policy is None:
        before = RestartWait(client, access.restart_wait_s)
    _RUNNER = EpisodeRunner(client, meta, settings, before_episode=before)


def run_one(plan: EpisodePlan) -> str:
    """Run ``plan`` in this worker (its runner from :func:`_init_worker`); the record as JSON."""
    return _RUNNER.run_episode(plan).model_dump_json()


@contextlib.contextmanager
def _thread_env() -> Iterator[None]:
    """:data:`THREAD_ENV` in this process's environment while worker processes start (they
    inherit it before anything in them loads a threaded library), the old values after."""
    old = {k: os.environ.get(k) for k in THREAD_ENV}
    os.environ.update(THREAD_ENV)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# ---------------------------------------------------------------------- the parent
def run_workers(
    plans: Sequence[EpisodePlan],
    n: int,
    access: PolicyAccess,
    meta: PolicyMetadata,
    settings: RunSettings,
    write: Callable[[EpisodeRecord], None],
    *,
    arrived: Callable[[EpisodeRecord], None] | None = None,
    note: Callable[[str], None] | None = None,
    between: Callable[[], None] | None = None,
    target: Callable[[EpisodePlan], str] = run_one,
    initializer: Callable[..., None] = _init_worker,
    by_task: bool = True,
) -> None:
    """Run ``plans`` on ``n`` worker processes (:func:`assign`); ``write`` gets every record in
    :func:`canonical_order`, ``arrived`` each as it comes back, ``note`` a line per worker that
    died, ``between`` is called about once a second (the CLI restarts a dead policy process).

    ``by_task``: :func:`assign` (one task's episodes in one worker, ``liberopro evaluate``), else
    :func:`assign_blocks` (contiguous blocks of episodes, the platform's shards).
    ``target`` and ``initializer`` are what each worker runs (:func:`run_one` after
    :func:`_init_worker`, called with ``(access, meta, settings)``); both must be importable by
    name (spawned processes unpickle them). A worker that dies, or whose initializer or target
    raises, is replaced once for its unfinished episodes; a second failure records them with
    :data:`WORKER_CRASHED`. Interrupted (``KeyboardInterrupt``), the records that came back are
    written (in canonical order, skipping the missing), the workers terminated, and it re-raises.
    """
    _Pool(
        plans,
        access,
        meta,
        settings,
        write,
        arrived,
        note,
        target,
        initializer,
        assign(plans, n) if by_task else assign_blocks(plans, n),
    ).run(between)


class _Pool:
    """The state of one :func:`run_workers` call: the workers' executors, the futures of the
    episodes in flight, the records that came back and how many were written in order."""

    def __init__(
        self,
        plans: Sequence[EpisodePlan],
        access: PolicyAccess,
        meta: PolicyMetadata,
        settings: RunSettings,
        write: Callable[[EpisodeRecord], None],
        arrived: Callable[[EpisodeRecord], None] | None,
        note: Callable[[str], None] | None,
        target: Callable[[EpisodePlan], str],
        initializer: Callable[..., None],
        shares: list[list[int]],
    ) -> None:
        self.plans, self.access, self.meta, self.settings = plans, access, meta, settings
        self.write, self.arrived, self.note = write, arrived, note
        self.target, self.initializer, self.shares = target, initializer, shares
        self.ctx = multiprocessing.get_context("spawn")
        self.order = canonical_order(plans)
        self.done: dict[int, EpisodeRecord] = {}
        self.written = 0
        self.attempts = [0] * len(shares)
        self.live: dict[int, tuple[cf.ProcessPoolExecutor, list]] = {}
        self.futures: dict[cf.Future, tuple[int, int]] = {}  # future -> (worker, plan index)

    def launch(self, w: int, indices: list[int]) -> None:
        self.attempts[w] += 1
        ex = cf.ProcessPoolExecutor(
            1, mp_context=self.ctx, initializer=self.initializer, initargs=(self.access, self.meta, self.settings)
        )
        with _thread_env():  # the process starts at the first submit and inherits the environment
            for i in indices:
                self.futures[ex.submit(self.target, self.plans[i])] = (w, i)
        self.live[w] = (ex, list(getattr(ex, "_processes", {}).values()))  # to read the exit code of a crash

    def flush(self, final: bool = False) -> None:
        order, done = self.order, self.done
        while self.written < len(order) and (order[self.written] in done or final):
            if order[self.written] in done:
                self.write(done[order[self.written]])
            self.written += 1

    def accept(self, i: int, record: EpisodeRecord) -> None:
        self.done[i] = record
        if self.arrived is not None:
            self.arrived(record)

    def failed(self, w: int, exc: BaseException) -> None:
        ex, procs = self.live.pop(w)
        ex.shutdown(wait=True, cancel_futures=True)
        codes = [p.exitcode for p in procs if p.exitcode is not None]
        left = [i for i in self.shares[w] if i not in self.done]
        if not left:
            return
        how = f"exit code {codes[0]}" if codes else repr(exc)[:300]
        if self.attempts[w] < 2:
            if self.note is not None:
                self.note(
                    f"worker {w + 1} died ({how}); running its {len(left)} unfinished episode(s) again in a fresh worker"
                )
            self.launch(w, left)
            return
        from liberopro.episode.runner import failed_record

        if self.note is not None:
            self.note(
                f"worker {w + 1} died again ({how}); its {len(left)} unfinished episode(s) are recorded as {WORKER_CRASHED}"
            )
        detail = f"the worker process running this episode died twice (its first run and one retry; last: {how})"
        for i in left:
            self.accept(i, failed_record(self.plans[i], self.meta, self.settings, WORKER_CRASHED, detail))

    def collect(self, finished: set[cf.Future]) -> None:
        """Take the records of ``finished`` futures; a worker whose episode raised is replaced
        (:meth:`failed`) after the records its pool had already returned are taken."""
        from liberopro.runs.summary import EpisodeRecord

        broken: dict[int, BaseException] = {}
        for fut in finished:
            w, i = self.futures.pop(fut)
            exc = fut.exception()
            if exc is None:
                self.accept(i, EpisodeRecord.model_validate_json(fut.result()))
            else:
                broken.setdefault(w, exc)
        for w, exc in broken.items():
            for fut in [f for f, (k, _) in self.futures.items() if k == w]:  # the broken pool's others
                _, i = self.futures.pop(fut)
                if fut.done() and not fut.cancelled() and fut.exception() is None:
                    self.accept(i, EpisodeRecord.model_validate_json(fut.result()))
                fut.cancel()
            self.failed(w, exc)

    def run(self, between: Callable[[], None] | None) -> None:
        try:
            for w, indices in enumerate(self.shares):
                if indices:
                    self.launch(w, indices)
            last = time.monotonic()
            while self.futures:
                finished, _ = cf.wait(list(self.futures), timeout=1.0, return_when=cf.FIRST_COMPLETED)
                self.collect(finished)
                self.flush()
                if between is not None and time.monotonic() - last >= 1.0:
                    between()
                    last = time.monotonic()
            for w in list(self.live):  # every episode came back: the workers leave
                self.live.pop(w)[0].shutdown(wait=True)
            self.flush()
        finally:
            for ex, procs in self.live.values():  # interrupted: stop what still runs
                stop_pool(ex, procs)
            self.flush(final=True)


class ShardStopped(Exception):
    """The worker asked the shard to stop (cancel or time limit) between episodes."""


class RestartWait:
    """Called before each episode: when the policy does not answer its health check, wait up to
    ``wait_s`` seconds for it (a crashed policy being restarted), polling every 0.5 s; once it
    stayed down for a whole wait, do not wait again until it answers (its episodes then fail
    fast with the transport's reason). ``should_stop`` is asked before and during the wait
    (raises :class:`ShardStopped`); ``ensure_running`` restarts a policy process first (a
    command-started policy; None for a URL)."""

    def __init__(
        self,
        client: Any,
        wait_s: float,
        should_stop: Callable[[], bool] = lambda: False,
        ensure_running: Callable[[], None] | None = None,
    ) -> None:
        self.client = client
        self.wait_s = wait_s
        self.should_stop = should_stop
        self.ensure_running = ensure_running
        self.down = False

    def _answered(self, _left: float) -> bool:
        if self.should_stop():
            raise ShardStopped("stop requested")
        return bool(self.client.health(timeout=2.0))

    def __call__(self) -> None:
        from submission_spec.polling import poll_until

        if self.should_stop():
            raise ShardStopped("stop requested")
        if self.ensure_running is not None:
            self.ensure_running()
        if self.client.health(timeout=2.0):
            self.down = False
            return
        if self.down:
            return  # it stayed down after a full wait: do not wait again for every episode
        if not poll_until(self._answered, self.wait_s, 0.5):
            self.down = True
