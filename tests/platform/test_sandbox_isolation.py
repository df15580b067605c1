"""Two live sandboxes on one engine (issue 20, item 8): two workers, each holding the node
sandbox of its own submission at the same time, cannot reach each other's policy container, by
address or by name, in either direction; each still reaches its own.

Two ``DockerBackend`` objects under two worker names (two workers on one engine) each start a
node sandbox (``node_policy``: policy container and internal network, kept until
``release_policy``) from the ``neighbour`` image of tests/platform/hostile (the zero policy that
prints ``PEER <ip>`` for every request it receives). The targets (addresses, container names,
ids) exist only once both containers run, so each policy container is made to probe the other
through ``docker exec`` of ``hostile.py probe``, a process in the policy container's network
namespace with its user and (no) capabilities, as the policy's own code would be.

What blocks what (checked below: the rules listed, and the packet counters of the rule said to
drop each direction read before and after):

- the other's address (``<subnet>.2:8000``): Docker's isolation of internal networks, the rules
  ``DOCKER-ISOLATION-STAGE-1 ! -s <subnet> -o <bridge> -j DROP`` and ``! -d <subnet> -i <bridge>
  -j DROP`` that the engine writes per internal network (the newer network's first; the first
  that matches counts the SYNs). The platform's ``FORWARD -i lpsb+ ! -o lpsb+ -j DROP`` does not
  match sandbox-to-sandbox traffic (both bridges are ``lpsb+``), and the engine moves its own
  jumps (``DOCKER-USER``, ``DOCKER-ISOLATION-STAGE-1``) and each bridge's ``-i X -o X ACCEPT``
  above it whenever it creates a network: isolation between sandboxes is Docker's (with the
  FORWARD policy DROP the engine sets behind it). Opening a path in ``DOCKER-USER`` for the two
  bridges lets the same probe from the same container connect (and the other logs its
  ``PEER``): a blocked result is the dropped packet, not a broken probe or a missing route;
- the other network's gateway (the host's address on the other bridge): the platform's
  ``INPUT -i lpsb+ -j DROP`` (with an ``INPUT`` hole for it the host answers: ``REACHED``);
- the other's container name, ``name.network`` and short id: Docker's embedded DNS answers only
  for the networks a container is on; for any other name it gives no answer at all (it forwards
  the query, and its isolation rules drop that too), and the names stay unresolved even with the
  packet path open;
- the alias ``policy``: resolves to the asking sandbox's own container only.

Positive controls: each policy container reaches itself by the alias and by address; a witness
container attached to BOTH networks connects to both policy containers by address, name and id
(the probe detects a reachable neighbour, and the neighbour logs it; Docker's DNS answers its
``policy`` from the first network that has one). The networks are IPv4 only and the engine
disables IPv6 in their containers (checked).
"""

from __future__ import annotations

import re
import secrets
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from lp_helpers import EXAMPLE_IMAGE, sandbox_leftovers

pytestmark = pytest.mark.docker

HOSTILE_DIR = Path(__file__).resolve().parent / "hostile"
PORT = 8000
#: glibc's resolver waits 2 x 5 s for a name Docker's embedded DNS does not know (on an internal
#: network it gives no answer at all, not NXDOMAIN); the names it knows answer within 1 ms.
RES_OPTIONS = "timeout:2 attempts:1"
PROBE_LINE = re.compile(r"^PROBE (\S+) (\S+) -> (\S+): (CONNECTED|REACHED|blocked) \((.*)\)$")
RESOLVE_LINE = re.compile(r"^RESOLVE (\S+) (\S+): (.*)$")


@pytest.fixture(scope="module")
def neighbour_image(docker_client, platform_images) -> str:
    image, _ = docker_client.images.build(
        path=str(HOSTILE_DIR),
        tag="liberopro-test/hostile-neighbour:latest",
        network_mode="none",
        rm=True,
        buildargs={"BEHAVIOR": "neighbour", "BASE_IMAGE": EXAMPLE_IMAGE},
    )
    return image.id


@dataclass
class Side:
    """One worker's node sandbox, as the engine reports it."""

    sid: str
    backend: object
    container: object
    network: str
    bridge: str
    subnet: str
    gateway: str
    ip: str

    @property
    def name(self) -> str:
        return self.container.name

    @property
    def short_id(self) -> str:
        return self.container.id[:12]


@dataclass
class Probe:
    output: str
    resolved: dict[str, list[str]]
    attempts: dict[str, list[tuple[str, str, str]]]  # name -> [(address, verdict, detail)]

    def verdicts(self, name: str) -> set[str]:
        return {v for _, v, _ in self.attempts[name]}


def run_probe(container, targets: dict[str, str]) -> Probe:
    """``hostile.py probe`` inside ``container`` (its user, capabilities and network namespace)."""
    res = container.exec_run(
        ["python", "/app/hostile.py", "probe", *(f"{k}={v}" for k, v in targets.items())],
        environment={"RES_OPTIONS": RES_OPTIONS},
    )
    out = res.output.decode(errors="replace")
    assert res.exit_code == 0 and "PROBE done" in out and "PROBE incomplete" not in out, out
    resolved: dict[str, list[str]] = {}
    attempts: dict[str, list[tuple[str, str, str]]] = {k: [] for k in targets}
    for line in out.splitlines():
        if m := RESOLVE_LINE.match(line):
            resolved[m.group(1)] = m.group(3).split()
        elif m := PROBE_LINE.match(line):
            attempts[m.group(1)].append((m.group(3), m.group(4), m.group(5)))
    assert all(attempts.values()), out
    return Probe(out, resolved, attempts)


def side_of(backend, sid: str, network, container, docker_client) -> Side:
    net = docker_client.api.inspect_network(network.id)
    assert net["Internal"] is True, net
    ipam = net["IPAM"]["Config"][0]
    container.reload()
    ip = container.attrs["NetworkSettings"]["Networks"][network.name]["IPAddress"]
    bridge = net["Options"]["com.docker.network.bridge.name"]
    return Side(sid, backend, container, network.name, bridge, ipam["Subnet"], ipam["Gateway"], ip)


def iptables(*args: str) -> str:
    res = subprocess.run(["iptables", "-w", *args], capture_output=True, text=True, timeout=30, check=False)
    assert res.returncode == 0, f"iptables {' '.join(args)}: {res.stderr}"
    return res.stdout


def rule_counts(chain: str) -> dict[str, int]:
    """Packets per rule of ``chain`` (``-S -v``: ``-A CHAIN ... -c PKTS BYTES``), keyed by the rule."""
    out = {}
    for line in iptables("-v", "-S", chain).splitlines():
        m = re.search(r" -c (\d+) \d+", line)
        if line.startswith("-A ") and m:
            out[line.replace(m.group(0), "").split(" ", 2)[2]] = int(m.group(1))
    return out


def isolation_rules(side: Side) -> list[str]:
    return [f"! -s {side.subnet} -o {side.bridge} -j DROP", f"! -d {side.subnet} -i {side.bridge} -j DROP"]


def wait_serving(side: Side, timeout: float = 45.0) -> None:
    end = time.monotonic() + timeout
    while True:
        probe = run_probe(side.container, {"self": f"policy:{PORT}"})
        if probe.verdicts("self") == {"CONNECTED"} or time.monotonic() > end:
            break
        time.sleep(0.5)
    assert probe.verdicts("self") == {"CONNECTED"}, probe.output


def address_targets(me: Side, other: Side) -> dict[str, str]:
    """Its own alias and address (positive controls), the other's address and its gateway."""
    return {
        "alias": f"policy:{PORT}",
        "own-address": f"{me.ip}:{PORT}",
        "other-address": f"{other.ip}:{PORT}",
        "other-gateway": f"{other.gateway}:{PORT}",
    }


def name_targets(other: Side) -> dict[str, str]:
    """The other's names (apart: the engine's DNS forwards an unknown name, which its isolation
    rules then drop too, and would blur the counters of the address probes)."""
    return {
        "other-name": f"{other.name}:{PORT}",
        "other-name-on-its-network": f"{other.name}.{other.network}:{PORT}",
        "other-id": f"{other.short_id}:{PORT}",
    }


def merged(*probes: Probe) -> Probe:
    return Probe(
        "".join(p.output for p in probes),
        {k: v for p in probes for k, v in p.resolved.items()},
        {k: v for p in probes for k, v in p.attempts.items()},
    )


def dropping_rule(chain: dict[str, int], src: Side, dst: Side) -> str:
    """The first rule of DOCKER-ISOLATION-STAGE-1 (in chain order) that drops ``src`` -> ``dst``:
    the destination network's ``-o`` rule or the source network's ``-i`` rule, whichever the
    engine listed first (the newer network's rules come first; no other network's rule matches)."""
    candidates = {f"! -s {dst.subnet} -o {dst.bridge} -j DROP", f"! -d {src.subnet} -i {src.bridge} -j DROP"}
    return next(r for r in chain if r in candidates)


def peers(side: Side) -> set[str]:
    text = side.container.logs(stdout=True, stderr=False).decode(errors="replace")
    return {m.group(1) for m in re.finditer(r"^PEER (\S+) ", text, re.M)}


def assert_isolated(probe: Probe, me: Side, other: Side) -> None:
    # Positive controls first: the probe works from this container.
    assert probe.resolved["alias"] == [me.ip], probe.output  # `policy` is this sandbox's only
    assert probe.verdicts("alias") == {"CONNECTED"} and probe.verdicts("own-address") == {"CONNECTED"}, probe.output
    for name in ("other-address", "other-gateway"):
        assert probe.verdicts(name) == {"blocked"}, probe.output
        assert all("timed out" in detail for _, _, detail in probe.attempts[name]), probe.output  # dropped
    for name in ("other-name", "other-name-on-its-network", "other-id"):
        assert name not in probe.resolved and probe.attempts[name] == [("-", "blocked", probe.attempts[name][0][2])]
        assert probe.attempts[name][0][2].startswith("unresolved"), probe.output
    assert "CONNECTED" not in "\n".join(ln for ln in probe.output.splitlines() if " other-" in ln)


def test_two_live_sandboxes_cannot_reach_each_other(docker_client, platform_images, platform_settings, neighbour_image):
    from liberopro_platform.sandbox import firewall
    from liberopro_platform.sandbox.base import PolicySource
    from liberopro_platform.sandbox.docker.labels import LABEL_WORKER
    from liberopro_platform.sandbox.docker_backend import DockerBackend

    t0 = time.monotonic()
    token = secrets.token_hex(3)
    assert platform_settings.sandbox_firewall == "auto"  # each backend installs the host rules
    backends = [DockerBackend(platform_settings, f"isolation-{n}-{token}@test") for n in ("w1", "w2")]
    sids = [f"isoa{token}x{secrets.token_hex(2)}", f"isob{token}x{secrets.token_hex(2)}"]
    witness = None
    holes: list[list[str]] = []
    shown: list[str] = []
    try:
        sides = []
        for backend, sid in zip(backends, sids, strict=True):
            network, container = backend.node_policy(PolicySource(submission_id=sid, image=neighbour_image))
            sides.append(side_of(backend, sid, network, container, docker_client))
        a, b = sides
        for side in sides:
            wait_serving(side)
        # Two workers, each holding only its own submission's node sandbox, both live.
        assert [bk.policy_submissions() for bk in backends] == [{sids[0]}, {sids[1]}]
        assert [s.container.labels[LABEL_WORKER] for s in sides] == [bk.worker for bk in backends]
        assert all(s.container.status == "running" for s in sides) and a.subnet != b.subnet
        for side in sides:
            ipv6 = side.container.exec_run(["cat", "/proc/sys/net/ipv6/conf/all/disable_ipv6"]).output.strip()
            assert ipv6 == b"1", ipv6  # no IPv6 path either (IPv4-only networks)
            uid = side.container.exec_run(["id", "-u"]).output.strip()  # the probes run as the policy does
            assert uid == platform_settings.policy_user.split(":")[0].encode(), uid

        # The rules in force: the platform's two, and Docker's isolation of each internal network.
        assert firewall.rule_present("iptables"), "the host rules for lpsb+ bridges are missing"
        forward, isolation = rule_counts("FORWARD"), rule_counts("DOCKER-ISOLATION-STAGE-1")
        assert "-i lpsb+ ! -o lpsb+ -j DROP" in forward and "-i lpsb+ -j DROP" in rule_counts("INPUT")
        for side in sides:
            assert f"-i {side.bridge} -o {side.bridge} -j ACCEPT" in forward  # its own bridge only
            assert set(isolation_rules(side)) <= set(isolation), isolation
        ours = [r for s in sides for r in isolation_rules(s)]
        input_before = rule_counts("INPUT")["-i lpsb+ -j DROP"]

        # Each probes the other (and itself), both directions, while both run: addresses first,
        # with the counters of the rules that should drop them, then names.
        probes = {me.sid: run_probe(me.container, address_targets(me, other)) for me, other in ((a, b), (b, a))}
        after = rule_counts("DOCKER-ISOLATION-STAGE-1")
        input_after = rule_counts("INPUT")["-i lpsb+ -j DROP"]
        for me, other in ((a, b), (b, a)):
            probes[me.sid] = merged(probes[me.sid], run_probe(me.container, name_targets(other)))
            assert_isolated(probes[me.sid], me, other)
        shown += [f"--- from {me.name} ({me.ip}) ---\n{probes[me.sid].output}" for me in sides]
        shown.append(
            "--- packets dropped during the address probes ---\n"
            + "\n".join(f"DOCKER-ISOLATION-STAGE-1 {r}: +{after[r] - isolation[r]}" for r in ours)
            + f"\nINPUT -i lpsb+ -j DROP: +{input_after - input_before} (shared by every sandbox on the host)\n"
            + "FORWARD, in order:\n"
            + iptables("-S", "FORWARD")
        )
        for src, dst in ((a, b), (b, a)):  # the SYNs each way, dropped by Docker
            rule = dropping_rule(after, src, dst)
            assert after[rule] - isolation[rule] >= 1, (src.name, dst.name, rule, after)
        assert input_after - input_before >= 2  # both gateways: the platform's INPUT rule
        assert peers(a) == {a.ip} and peers(b) == {b.ip}, (peers(a), peers(b))  # only themselves

        # Positive control 1: a witness on BOTH networks reaches both by address, name and id.
        witness = docker_client.containers.run(
            neighbour_image,
            ["python", "-c", "import time; time.sleep(300)"],
            name=f"lptest-isolation-witness-{token}",
            network=a.network,
            user="65534:65534",
            cap_drop=["ALL"],
            read_only=True,
            init=True,
            detach=True,
        )
        docker_client.networks.get(b.network).connect(witness)
        witness.reload()
        w_ip = {n: v["IPAddress"] for n, v in witness.attrs["NetworkSettings"]["Networks"].items()}
        targets = {"alias": f"policy:{PORT}"}
        for tag, side in (("a", a), ("b", b)):
            targets |= {f"{tag}-address": f"{side.ip}:{PORT}", f"{tag}-name": f"{side.name}:{PORT}"}
            targets |= {f"{tag}-id": f"{side.short_id}:{PORT}"}
        seen = run_probe(witness, targets)
        shown.append(f"--- from the witness on both networks {w_ip} ---\n{seen.output}")
        # Docker answers `policy` from the first of its networks that has it (here A's): one address.
        assert seen.resolved["alias"] == [a.ip], seen.output
        assert all(seen.verdicts(n) == {"CONNECTED"} for n in targets), seen.output
        assert peers(a) == {a.ip, w_ip[a.network]} and peers(b) == {b.ip, w_ip[b.network]}
        witness.remove(force=True)
        witness = None

        # Positive control 2: the same probe from A's own container connects once the path is
        # opened (before Docker's isolation and before the platform's INPUT rule), and not after.
        holes = [
            ["DOCKER-USER", "-i", a.bridge, "-o", b.bridge, "-j", "ACCEPT"],
            ["DOCKER-USER", "-i", b.bridge, "-o", a.bridge, "-j", "ACCEPT"],
            ["INPUT", "-i", a.bridge, "-d", b.gateway, "-p", "tcp", "--dport", str(PORT), "-j", "ACCEPT"],
        ]
        for hole in holes:
            iptables("-I", *hole)
        opened = merged(run_probe(a.container, address_targets(a, b)), run_probe(a.container, name_targets(b)))
        for hole in holes:
            iptables("-D", *hole)
        holes = []
        shown.append(f"--- from {a.name} with the path opened ---\n{opened.output}")
        assert opened.verdicts("other-address") == {"CONNECTED"}, opened.output
        assert opened.verdicts("other-gateway") == {"REACHED"}, opened.output  # the host answers
        assert a.ip in peers(b), peers(b)  # and B saw A
        for name in ("other-name", "other-name-on-its-network", "other-id"):  # DNS stays scoped
            assert opened.verdicts(name) == {"blocked"}, opened.output
        closed = merged(run_probe(a.container, address_targets(a, b)), run_probe(a.container, name_targets(b)))
        shown.append(f"--- from {a.name} closed again ---\n{closed.output}")
        assert_isolated(closed, a, b)
    finally:
        print("\n".join(shown))
        for hole in holes:
            subprocess.run(["iptables", "-w", "-D", *hole], check=False, capture_output=True, timeout=30)
        if witness is not None:
            witness.remove(force=True)
        for backend, sid in zip(backends, sids, strict=True):
            backend.release_policy(sid)
    print(f"two live sandboxes: {time.monotonic() - t0:.1f} s")
    assert not [n for n in sandbox_leftovers(docker_client) if any(sid[:12] in n for sid in sids)]
    assert [bk.policy_submissions() for bk in backends] == [set(), set()]
    assert not docker_client.containers.list(all=True, filters={"name": f"lptest-isolation-witness-{token}"})


# ---------------------------------------------------------------- what a node keeps between runs
PAGECACHE_LINE = re.compile(r"PAGECACHE cached (\d+) of 256, (\d+) differ from the pattern")


def test_a_validation_cannot_read_what_a_hidden_shard_left_in_the_page_cache(
    docker_client, platform_images, platform_settings
):
    """A policy in a hidden shard can leave a pattern in the host's page cache (which pages of its
    image's files it read); a later policy of an image sharing that layer can read it back with
    mincore(2) without loading a page, and print it where the submitter reads: the validation log.
    The Docker backend drops the host's caches before every validation (``forget_host_caches``):
    the validation reads every page cold. Control: the same reader run without that reads the
    pattern back exactly (0 of 256 bits wrong)."""
    from liberopro_platform.sandbox.base import PolicySource
    from liberopro_platform.sandbox.docker_backend import DockerBackend

    image, _ = docker_client.images.build(
        path=str(HOSTILE_DIR),
        dockerfile="pagecache.Dockerfile",
        tag="liberopro-test/hostile-pagecache:latest",
        network_mode="none",
        rm=True,
        buildargs={"BASE_IMAGE": EXAMPLE_IMAGE},
    )

    def run(mode: str) -> str:
        out = docker_client.containers.run(
            image.id, ["python", "/app/hostile.py", "pagecache", mode], read_only=True, network_mode="none", remove=True
        )
        return out.decode()

    backend = DockerBackend(platform_settings, f"pagecache-{secrets.token_hex(3)}@test")
    assert backend.forget_host_caches() is not None  # from cold (the build just wrote the file)
    run("write")  # a hidden shard's policy leaves its pattern
    control = PAGECACHE_LINE.search(run("read"))
    assert control and control.group(2) == "0" and control.group(1) != "0", control  # read back exactly
    run("write")
    assert platform_settings.validation_drop_caches
    outcome = backend.validate(PolicySource(f"pc{secrets.token_hex(5)}", image=image.id), lambda: True)
    found = PAGECACHE_LINE.search(outcome.policy_log)
    assert outcome.ok and found, outcome.policy_log
    assert found.group(1) == "0", f"the validation read the hidden shard's pattern back: {found.group(0)}"


def test_the_drop_caches_container_is_removed_whether_the_engine_runs_it_or_not(docker_client):
    """The one-shot privileged container that drops the host's caches before a validation
    (``drop_caches_in_container``) is removed after it ran, and also when the engine refuses to
    start it (a rootless engine, or one inside a container: runc's "unable to apply caps", as on
    the CI machine): ``containers.run(remove=True)`` left one created container per validation there."""
    from docker.errors import DockerException
    from liberopro_platform.sandbox.docker.host import DROP_CACHES_ROLE, drop_caches_in_container
    from liberopro_platform.sandbox.docker.labels import LABEL_ROLE

    found = {"label": [f"{LABEL_ROLE}={DROP_CACHES_ROLE}"]}
    before = {c.id for c in docker_client.containers.list(all=True, filters=found)}
    try:
        drop_caches_in_container(docker_client, EXAMPLE_IMAGE)
    except DockerException:
        pass  # refused by this engine: what matters is what it leaves
    assert {c.id for c in docker_client.containers.list(all=True, filters=found)} <= before
