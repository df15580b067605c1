"""``liberopro submit IMAGE``, ``liberopro status ID``, ``liberopro cancel ID``: the submitter's
side of the platform, added to the ``liberopro`` CLI by :func:`register`.

The API URL and token come from ``LIBEROPRO_API_URL`` / ``LIBEROPRO_TOKEN``, or from a config
file (``LIBEROPRO_CONFIG``, default ``~/.config/liberopro/platform.toml``)::

    api_url = "https://platform.example.org"
    token = "lp_..."

Every error the platform returns is printed with its reason and what to do (an expired token
says that it expired, and when).
"""

from __future__ import annotations

import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import typer

FINAL = ("published", "failed", "cancelled")


class PlatformError(Exception):
    """A request the platform refused or could not answer; the message says what to do."""


def load_client_config() -> tuple[str, str | None]:
    """``(api_url, token)`` from the environment, else the config file (:class:`ClientConfig`);
    the URL without a trailing ``/``. Raises :class:`PlatformError` for a config file that is not
    TOML or holds a value of the wrong type, and when no URL is set."""
    from pydantic import ValidationError

    # here, not at the top: this module is loaded by every `liberopro` command (pydantic-settings, ~0.2 s)
    from liberopro_platform.client_config import ClientConfig, client_config_path

    path = client_config_path()
    try:
        conf = ClientConfig()
    except tomllib.TOMLDecodeError as exc:
        raise PlatformError(f"{path} is not valid TOML: {exc}") from exc
    except ValidationError as exc:
        err = exc.errors()[0]
        raise PlatformError(f"{path}: {'.'.join(map(str, err['loc']))}: {err['msg']}") from exc
    if not conf.api_url:
        raise PlatformError(f"no platform URL: set LIBEROPRO_API_URL or api_url in {path}")
    return conf.api_url.rstrip("/"), conf.token


class PlatformClient:
    """A small HTTP client of the platform API that turns every refusal into :class:`PlatformError`."""

    def __init__(self, url: str, token: str | None, timeout: float = 60.0, transport: Any = None) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        kwargs: dict[str, Any] = {"base_url": url, "headers": headers, "timeout": timeout}
        if transport is not None:
            kwargs["transport"] = transport
        self.http = httpx.Client(**kwargs)
        self.url = url

    def close(self) -> None:
        self.http.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        import httpx

        try:
            resp = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise PlatformError(f"cannot reach the platform at {self.url}: {exc!r}; check LIBEROPRO_API_URL") from exc
        if resp.status_code >= 400:
            raise PlatformError(_explain(resp))
        ctype = resp.headers.get("content-type", "")
        return resp.json() if ctype.startswith("application/json") else resp.text


def _explain(resp: Any) -> str:
    try:
        body = resp.json()
    except ValueError:
        return f"HTTP {resp.status_code}: {resp.text[:500] or resp.reason_phrase}"
    detail = body.get("detail") if isinstance(body, dict) else body
    if isinstance(detail, dict) and detail.get("message"):
        return f"HTTP {resp.status_code} ({detail.get('error', 'error')}): {detail['message']}"
    if isinstance(detail, list):  # FastAPI validation errors
        return f"HTTP {resp.status_code}: " + "; ".join(
            f"{'.'.join(map(str, d.get('loc', [])))}: {d.get('msg')}" for d in detail
        )
    return f"HTTP {resp.status_code}: {detail}"


@dataclass
class SubmitPlan:
    """How ``liberopro submit`` sends an image: by ``reference`` (an image id the team uploaded
    before, or a digest of an allowed registry) or by ``upload`` (``docker save`` of the local
    ``image``); ``why`` says which and why, for the user."""

    kind: str  # reference | upload
    image: str
    why: str


def _local_image(image: str) -> tuple[Any | None, str]:
    """The image named ``image`` on the local Docker engine, or None and why not (absent, or the
    engine does not answer)."""
    try:
        from docker.client import DockerClient
        from docker.errors import ImageNotFound

        client = DockerClient.from_env()
        try:
            return client.images.get(image), ""
        except ImageNotFound:
            return None, "is not on your local Docker engine"
    except Exception as exc:  # noqa: BLE001 - the engine is down or unreachable
        return None, f"could not be read from your local Docker engine ({exc})"


def plan_submit(c: PlatformClient, image: str, force_upload: bool) -> SubmitPlan:
    """Decide how to submit ``image``: an image id the team already uploaded goes by id (a cheap
    ``GET /images/{id}``), a digest of a registry the platform pulls from by digest, anything
    else is uploaded from the local engine (``docker save``). ``force_upload`` always uploads.
    Raises :class:`PlatformError` when none of these is possible."""
    from liberopro_platform.image_refs import IMAGE_ID, parse_repo_digest, registry_allowed

    allowed: list[str] | None = None

    def allowed_registries() -> list[str]:
        nonlocal allowed
        if allowed is None:
            allowed = c.request("GET", "/images")["allowed_registries"]
        return allowed

    def owned(image_id: str) -> bool:
        return bool(c.request("GET", f"/images/{image_id}")["owned"])

    by_id = "your team uploaded it before, so it is submitted by id (no upload; --upload sends it again)"
    digest = parse_repo_digest(image)
    if not force_upload:
        if IMAGE_ID.match(image) and owned(image):
            return SubmitPlan("reference", image, f"{image[:19]}: {by_id}")
        if digest is not None and registry_allowed(digest, allowed_registries()):
            return SubmitPlan("reference", image, f"{image}: the platform pulls it from {digest.registry}")
    local, absent = _local_image(image)
    if local is None:
        if IMAGE_ID.match(image):
            raise PlatformError(
                f"image {image} was not uploaded by your team, and it {absent} to upload it: build "
                "or load it there, then `liberopro submit IMAGE`"
            )
        if digest is not None:
            raise PlatformError(
                f"{digest.registry} is not a registry the platform pulls from (allowed: "
                f"{', '.join(allowed_registries()) or 'none'}), and {image} {absent} to upload it: "
                "`docker pull` it, then `liberopro submit IMAGE`"
            )
        raise PlatformError(
            f"image {image} {absent}: build or pull it first (or give repo@sha256:<digest> of a "
            "registry the platform pulls from)"
        )
    if not force_upload:
        for rd in local.attrs.get("RepoDigests") or []:
            parsed = parse_repo_digest(rd)
            if parsed is not None and registry_allowed(parsed, allowed_registries()):
                return SubmitPlan("reference", rd, f"{image} is {rd}: the platform pulls it from {parsed.registry}")
        if owned(local.id):
            return SubmitPlan("reference", local.id, f"{image} is {local.id[:19]}: {by_id}")
    size = int(local.attrs.get("Size", 0)) / 2**20
    return SubmitPlan(
        "upload",
        local.id if IMAGE_ID.match(image) else image,
        f"uploading {image} ({local.id[:19]}, {size:.0f} MiB uncompressed): the platform runs only "
        "images your team uploaded (or digests from its allowed registries)",
    )


def _save_image(image: str, dest: Path) -> int:
    from docker.client import DockerClient

    img = DockerClient.from_env().images.get(image)
    size = 0
    with dest.open("wb") as fh:
        for chunk in img.save(named=True):
            fh.write(chunk)
            size += len(chunk)
    return size


def format_status(st: dict[str, Any]) -> list[str]:
    """The status as lines a person reads."""
    lines = [f"submission {st['id']} (team {st['team']}): {st['state']}", f"  {st['message']}"]
    if st.get("queue_position") is not None:
        lines.append(f"  queue position: {st['queue_position']} submission(s) ahead")
    p = st["progress"]
    if p["episodes_total"]:
        lines.append(
            f"  progress: {p['episodes_done']} of {p['episodes_total']} episodes, "
            f"{p['shards_done']} of {p['shards_total']} shards"
        )
    if st.get("image_digest"):
        lines.append(f"  image: {st.get('image_ref')} -> {st['image_digest']}")
    if st.get("policy_name"):
        lines.append(f"  policy: {st['policy_name']} (spec {st.get('spec_version')})")
    if st.get("stuck_reason"):
        lines.append(f"  NOT MOVING: {st['stuck_reason']}")
    if st.get("failure"):
        lines.append(f"  what failed ({st.get('failure_stage')}): {st['failure']}")
        lines.append(f"  how to fix it: {st.get('fix')}")
    for c in st.get("validation_checks", []):
        if not c["ok"]:
            lines.append(
                f"  [FAIL] {c['name']}: {c['detail']}" + (f"\n         fix: {c['hint']}" if c.get("hint") else "")
            )
    if st.get("termination_reasons"):
        lines.append(
            "  episodes ended by: " + ", ".join(f"{k} {v}" for k, v in sorted(st["termination_reasons"].items()))
        )
    return lines


def format_result(result: dict[str, Any]) -> list[str]:
    """A published result as the leaderboard shows it (``SubmissionStatus.result``, a
    :class:`liberopro.schema.public.PublicResult` as JSON): headline rates with their 95%
    intervals, then one line per case."""

    def rate(r: dict[str, Any]) -> str:
        if r.get("value") is None:
            return "-"
        ci = f" [{100 * r['ci95'][0]:.1f}, {100 * r['ci95'][1]:.1f}]" if r.get("ci95") else ""
        return f"{100 * r['value']:.1f}%{ci} ({r.get('episodes', 0)} episodes)"

    meta, metrics = result["meta"], result["metrics"]
    lines = [f"  result (as on the leaderboard, {meta['api_url']}):"]
    for key in ("overall", "nominal", "static_mean", "runtime_mean"):
        if key in metrics:
            lines.append(f"    {key:<13} {rate(metrics[key])}")
    for c in result.get("cases", []):
        name = c["case"] if not c["shift_names"] else f"{c['case']} ({', '.join(c['shift_names'])})"
        invalid = f", {c['invalid_episodes']} invalid" if c.get("invalid_episodes") else ""
        lines.append(f"    case {name}: {rate(c['rate'])}{invalid}")
    ep = meta["episodes"]
    lines.append(
        f"    episodes: {ep['total']} ({ep['valid']} valid, {ep['invalid']} invalid); evaluator "
        f"{meta['evaluator_version']}, manifest {meta['manifest_sha256'][:12]}"
    )
    return lines


def _fail(message: str) -> NoReturn:
    """Print ``error: message`` to stderr and exit with code 2."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _client() -> PlatformClient:
    try:
        url, token = load_client_config()
    except PlatformError as exc:
        _fail(str(exc))
    return PlatformClient(url, token)


def _show(st: dict[str, Any]) -> None:
    for line in format_status(st):
        typer.echo(line)


def _watch(c: PlatformClient, sid: str, interval: float) -> dict[str, Any]:
    """Print each new state of submission ``sid`` (polled every ``interval`` seconds) until it is final."""
    last = None
    while True:
        st = c.request("GET", f"/submissions/{sid}")
        line = (st["state"], st["message"])
        if line != last:
            typer.echo(f"[{time.strftime('%H:%M:%S')}] {st['state']}: {st['message']}")
            last = line
        if st["state"] in FINAL:
            return st
        time.sleep(interval)


def _upload(c: PlatformClient, plan: SubmitPlan, image: str, note: str) -> dict[str, Any]:
    """Export ``plan.image`` with the local Docker engine (docker save) and upload the archive."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "policy.tar"
        try:
            size = _save_image(plan.image, path)
        except Exception as exc:  # noqa: BLE001
            _fail(f"could not export {image} with the local Docker engine: {exc}")
        typer.echo(f"sending the archive ({size / 2**20:.0f} MiB)...", err=True)
        with path.open("rb") as fh:
            return c.request(
                "POST",
                "/submissions/upload",
                files={"file": ("policy.tar", fh)},
                data={"note": note},
                timeout=3600,
            )


def submit(
    image: str = typer.Argument(
        ...,
        help="A local image (name:tag or sha256:<id>), or repo@sha256:<digest> of a registry the platform pulls from.",
    ),
    upload: bool = typer.Option(
        False,
        "--upload",
        help="Always send the image itself (docker save), even when your team uploaded it before.",
    ),
    note: str = typer.Option("", help="A note stored with the submission."),
    wait: bool = typer.Option(
        False, "--wait", help="Follow the submission until it is final; the exit code is 1 unless it was published."
    ),
) -> None:
    """Submit a policy image. A local image is uploaded (docker save) unless your team uploaded
    the same image id before (then it goes by id); a digest of a registry the platform pulls
    from goes by digest."""
    c = _client()
    try:
        plan = plan_submit(c, image, upload)
        typer.echo(plan.why, err=True)
        if plan.kind == "upload":
            created = _upload(c, plan, image, note)
        else:
            created = c.request("POST", "/submissions", json={"image": plan.image, "note": note})
    except PlatformError as exc:
        _fail(str(exc))
    typer.echo(f"submitted: {created['id']} ({created['state']}; {created['queue_position']} ahead)")
    typer.echo(f"follow it with: liberopro status {created['id']}")
    if wait:
        try:
            final = _watch(c, created["id"], 5.0)
        except PlatformError as exc:
            _fail(str(exc))
        _show(final)
        if final["state"] != "published":  # scripts can tell a failed submission from a published one
            raise typer.Exit(1)


def _list_submissions(c: PlatformClient) -> None:
    for st in c.request("GET", "/submissions"):
        p = st["progress"]
        typer.echo(
            f"{st['id']}  {st['state']:<11} {p['episodes_done']}/{p['episodes_total']}  "
            f"{st['created_at'][:16]}  {st['message'][:80]}"
        )


def status(
    submission_id: str | None = typer.Argument(None, help="Submission id (omit to list your team's)."),
    logs: bool = typer.Option(
        False,
        "--logs",
        help="Also print the policy container's output during "
        "validation (its output on the hidden instances is not shown).",
    ),
    watch_: bool = typer.Option(False, "--watch", help="Follow until the submission is final."),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Show a submission: stage, queue position, progress, what failed and how to fix it."""
    import json

    c = _client()
    try:
        if submission_id is None:
            _list_submissions(c)
            return
        st = _watch(c, submission_id, 5.0) if watch_ else c.request("GET", f"/submissions/{submission_id}")
        if json_out:
            typer.echo(json.dumps(st, indent=2))
        else:
            _show(st)
            if st.get("result"):
                for line in format_result(st["result"]):
                    typer.echo(line)
        if logs:
            typer.echo("--- policy output ---")
            sys.stdout.write(c.request("GET", f"/submissions/{submission_id}/logs"))
    except PlatformError as exc:
        _fail(str(exc))


def cancel(submission_id: str = typer.Argument(..., help="Submission id.")) -> None:
    """Cancel a submission; its running sandboxes are stopped and removed."""
    c = _client()
    try:
        _show(c.request("POST", f"/submissions/{submission_id}/cancel"))
    except PlatformError as exc:
        _fail(str(exc))


def register(app: typer.Typer) -> None:
    """Add ``submit``, ``status`` and ``cancel`` to the ``liberopro`` CLI."""
    app.command("submit")(submit)
    app.command("status")(status)
    app.command("cancel")(cancel)
