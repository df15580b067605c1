#!/usr/bin/env bash
# Builds every LIBERO-Pro2.0 image OFFLINE: no container registry is needed or contacted.
#
#   1. base images from Debian packages with debootstrap + `docker import` (skipped when present):
#        liberopro/base-python:bookworm  python3 + venv, iptables    (policies, api/worker)
#        liberopro/base-sim:bookworm     + Mesa EGL/GL, glib         (the evaluator: MuJoCo on the CPU)
#        liberopro/base-redis:bookworm   redis-server, redis-tools   (compose's broker)
#        liberopro/base-postgres:bookworm postgresql-15               (compose's database)
#   2. a local wheelhouse (build/wheelhouse) of every locked dependency plus our own wheels, one per
#      workspace member (refreshed only when uv.lock or our sources change), and per image the
#      requirements it installs, exported from uv.lock (`uv export --package MEMBER`): each image
#      gets exactly its member's locked dependencies, no list kept by hand:
#        requirements-policy.txt     liberopro-submission-spec[server]  (the example policies)
#        requirements-bc.txt         liberopro-baselines, without its `train` extra (no JAX)
#        requirements-evaluator.txt  liberopro[sim] (+ the spec, a dependency)
#        requirements-platform.txt   liberopro-leaderboard (+ liberopro-platform, liberopro, the spec)
#   3. `docker build --network none` of each image from that wheelhouse:
#        liberopro/example-zero, liberopro/example-random   submission_spec/examples/*/Dockerfile
#        liberopro/example-bc (the behaviour-cloning        submission_spec/examples/bc/Dockerfile
#          baseline, docs/baselines.md: served with numpy; its context adds the checkpoint folder
#          BC_CHECKPOINT, whose weights.npz and config.json are copied into the image)
#        liberopro/evaluator                                docker/evaluator.Dockerfile
#        liberopro/platform (api and worker)                docker/platform.Dockerfile
#        liberopro/redis, liberopro/postgres (the stack's   docker/redis.Dockerfile, docker/postgres.Dockerfile
#          broker and database; no wheelhouse needed)
#
#   4. the image ids, fixed at deployment, written to ENV_FILE (default .env beside compose.yaml,
#      which compose reads, as do the platform's settings): LIBEROPRO_EVALUATOR_IMAGE,
#      LIBEROPRO_PLATFORM_IMAGE, LIBEROPRO_REDIS_IMAGE, LIBEROPRO_POSTGRES_IMAGE,
#      LIBEROPRO_EXAMPLE_ZERO_IMAGE, LIBEROPRO_EXAMPLE_RANDOM_IMAGE, LIBEROPRO_EXAMPLE_BC_IMAGE =
#      sha256:<id> of each image of this TAG that is present (other lines of the file are kept).
#      The platform names its images by these ids, never by a tag, which anyone able to load an
#      image could move.
#
# Usage: docker/build-images.sh [all|base|wheelhouse|examples|bc|evaluator|platform|redis|postgres|pin]...
#        (default all, which includes bc;
#        pin only rewrites ENV_FILE from the images present, e.g. after `docker load` on an air-gapped host)
# Env:   DEBIAN_MIRROR (default http://deb.debian.org/debian), TAG (default latest), ENV_FILE,
#        BC_CHECKPOINT (default baselines/checkpoints/bc-nominal): the `liberopro-bc train` folder
#        the bc image serves; `bc` and `all` stop before building anything when it lacks
#        weights.npz or config.json,
#        REDIS_IMAGE / POSTGRES_IMAGE (default liberopro/redis:$TAG, liberopro/postgres:$TAG) to pin others,
#        BASE_PYTHON / BASE_SIM to build FROM other base images (e.g. python:3.11-slim-bookworm
#        where a registry is reachable; the sim base then needs libgl1 libegl1 libegl-mesa0
#        libgl1-mesa-dri libglib2.0-0).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$REPO/build"
WHEELS="$BUILD/wheelhouse"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
TAG="${TAG:-latest}"
ENV_FILE="${ENV_FILE:-$REPO/.env}"
BASE_PYTHON="${BASE_PYTHON:-liberopro/base-python:bookworm}"
BASE_SIM="${BASE_SIM:-liberopro/base-sim:bookworm}"
# iptables: the platform image's sandbox-firewall service (compose) installs the host rule with it.
PY_PKGS="python3,python3-venv,iptables"
SIM_PKGS="python3,python3-venv,libgl1,libegl1,libegl-mesa0,libgl1-mesa-dri,libglib2.0-0"
# The stack's services from Debian 12's own packages (Redis 7.0, PostgreSQL 15): no registry.
BASE_REDIS="liberopro/base-redis:bookworm"
BASE_POSTGRES="liberopro/base-postgres:bookworm"
PG_MAJOR=15
REDIS_PKGS="redis-server,redis-tools"
POSTGRES_PKGS="postgresql-$PG_MAJOR,postgresql-client-$PG_MAJOR"

log() { printf '[build-images %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
need() { command -v "$1" >/dev/null 2>&1 || { echo "missing: $1 ($2)" >&2; exit 1; }; }
need docker "install docker.io and start dockerd: scripts/start-dockerd.sh"
docker info >/dev/null 2>&1 || { echo "the Docker engine does not answer: run scripts/start-dockerd.sh" >&2; exit 1; }

# ---------------------------------------------------------------- 1. base images
base_image() {  # NAME PACKAGES [PATH...]: PATHs (relative to the rootfs) are removed before the import
  local name="$1" pkgs="$2" root
  if docker image inspect "$name" >/dev/null 2>&1; then
    log "$name present"
    return
  fi
  need debootstrap "apt-get install debootstrap"
  root="$(mktemp -d "$BUILD/rootfs.XXXXXX")"
  mkdir -p "$BUILD/debs"
  log "debootstrap $name ($pkgs)"
  local t0=$SECONDS
  debootstrap --variant=minbase --cache-dir="$BUILD/debs" --include="$pkgs" bookworm "$root" "$MIRROR" \
    >"$BUILD/debootstrap.log" 2>&1 || { tail -30 "$BUILD/debootstrap.log" >&2; rm -rf "$root"; exit 1; }
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc \
         "$root"/usr/share/man "$root"/usr/share/locale
  local p
  for p in "${@:3}"; do rm -rf "${root:?}/$p"; done
  tar -C "$root" -c . | docker import \
    -c 'ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'CMD ["/bin/bash"]' - "$name" >/dev/null
  rm -rf "$root"
  log "$name built in $((SECONDS - t0)) s"
}

build_bases() {
  mkdir -p "$BUILD"
  [ "$BASE_PYTHON" = "liberopro/base-python:bookworm" ] && base_image "$BASE_PYTHON" "$PY_PKGS"
  [ "$BASE_SIM" = "liberopro/base-sim:bookworm" ] && base_image "$BASE_SIM" "$SIM_PKGS"
  return 0
}

# ---------------------------------------------------------------- 2. wheelhouse
# The images run Debian's python3 (3.11.2 on bookworm, Linux): keep the requirements whose markers
# hold THERE (e.g. async-timeout for python < 3.11.3), without the markers.
export_reqs() {  # NAME UV-EXPORT-ARGS...: $WHEELS/requirements-NAME.txt, the member's locked third-party deps
  local out="$WHEELS/requirements-$1.txt"; shift
  if [ ! -x "$BUILD/pip-env/bin/pip" ]; then
    uv venv -q --python 3.11 "$BUILD/pip-env"
    uv pip install -q --python "$BUILD/pip-env/bin/python" pip wheel setuptools
  fi
  (cd "$REPO" && uv export --frozen --no-dev --no-hashes --no-emit-workspace --no-header --no-annotate \
     --format requirements-txt "$@" -o "$out" >/dev/null)
  "$BUILD/pip-env/bin/python" - "$out" "${TARGET_PYTHON:-3.11.2}" <<'PY'
import sys
from pip._vendor.packaging.requirements import Requirement
path, version = sys.argv[1], sys.argv[2]
env = {"python_full_version": version, "python_version": ".".join(version.split(".")[:2]),
       "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
       "implementation_name": "cpython", "platform_python_implementation": "CPython",
       "platform_machine": "x86_64"}
out = []
for line in open(path):
    line = line.strip()
    if not line or line.startswith(("#", "-")):
        continue
    req = Requirement(line)
    if req.marker is None or req.marker.evaluate(env):
        req.marker = None
        out.append(str(req))
open(path, "w").write("\n".join(out) + "\n")
PY
}

WHEELHOUSE_DONE=""
wheelhouse() {
  [ -n "$WHEELHOUSE_DONE" ] && return
  WHEELHOUSE_DONE=1
  need uv "scripts/setup-system.sh installs it"
  local deps_stamp src_stamp t0=$SECONDS
  deps_stamp="$(cat "$REPO/uv.lock" "$REPO/pyproject.toml" \
                "$REPO"/{evaluator,platform,leaderboard,submission_spec,baselines}/pyproject.toml \
                | sha256sum | cut -c1-16)"
  src_stamp="$( (cd "$REPO" && find evaluator platform leaderboard submission_spec/src \
                  baselines/liberopro_baselines baselines/pyproject.toml -type f \
                  \( -name '*.py' -o -name '*.json' -o -name '*.mako' -o -name '*.txt' -o -name '*.toml' \) \
                  | sort | xargs cat) | sha256sum | cut -c1-16)"
  mkdir -p "$WHEELS"
  if [ "$(cat "$WHEELS/.deps-stamp" 2>/dev/null)" != "$deps_stamp" ]; then
    log "wheelhouse: exporting the lock, per image"
    export_reqs policy --package liberopro-submission-spec --extra server
    export_reqs evaluator --package liberopro --extra sim
    export_reqs platform --package liberopro-leaderboard
    export_reqs bc --package liberopro-baselines  # no --extra train: the image has no JAX
    cat "$WHEELS"/requirements-{policy,evaluator,platform,bc}.txt | sort -u >"$WHEELS/requirements.txt"
    log "wheelhouse: pip wheel (downloads from PyPI what is not there yet)"
    "$BUILD/pip-env/bin/pip" wheel -q --disable-pip-version-check -r "$WHEELS/requirements.txt" -w "$WHEELS" \
      2> >(grep -v 'is ignored: it is neither' >&2)
    echo "$deps_stamp" >"$WHEELS/.deps-stamp"
  fi
  if [ "$(cat "$WHEELS/.src-stamp" 2>/dev/null)" != "$src_stamp" ] || ! ls "$WHEELS"/liberopro-*.whl >/dev/null 2>&1; then
    log "wheelhouse: our own wheels (one per workspace member)"
    rm -f "$WHEELS"/liberopro-*.whl "$WHEELS"/liberopro_*.whl
    local member
    for member in liberopro liberopro-platform liberopro-leaderboard liberopro-submission-spec liberopro-baselines; do
      (cd "$REPO" && uv build -q --wheel --package "$member" --out-dir "$WHEELS")
    done
    echo "$src_stamp" >"$WHEELS/.src-stamp"
  fi
  log "wheelhouse ready in $((SECONDS - t0)) s: $(du -sh "$WHEELS" | cut -f1)"
}

# Build contexts: wheelhouse/ holds the third-party wheels of one image's requirements file (a
# cached docker layer while uv.lock is unchanged), as wheelhouse/requirements.txt, and ours/ the
# wheels of the workspace members it installs (which change with every commit). Hard links: the
# image sends only its own wheels to the daemon.
context_for() {  # DIR NAME MEMBER-WHEEL-GLOB...: the wheels of requirements-NAME.txt, and ours
  local dir="$1" reqs="$WHEELS/requirements-$2.txt" glob; shift 2
  rm -rf "$dir"; mkdir -p "$dir/wheelhouse" "$dir/ours"
  cp "$reqs" "$dir/wheelhouse/requirements.txt"
  "$BUILD/pip-env/bin/python" - "$reqs" "$WHEELS" "$dir/wheelhouse" <<'PY'
import os, sys
from pathlib import Path
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name, parse_wheel_filename
from pip._vendor.packaging.version import Version
reqs, wheels, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
have = {}
for whl in wheels.glob("*.whl"):
    name, version, _, _ = parse_wheel_filename(whl.name)
    have.setdefault((name, str(version)), []).append(whl)
missing = []
for line in map(str.strip, open(reqs)):
    if line:
        req = Requirement(line)
        pin = str(Version(next(iter(req.specifier)).version))  # uv export pins each: name==version
        found = have.get((canonicalize_name(req.name), pin)) or []
        missing += [] if found else [line]
        for whl in found:
            os.link(whl, out / whl.name)
if missing:
    sys.exit(f"no wheel in {wheels} for: {', '.join(missing)}")
PY
  for glob in "$@"; do cp -l "$WHEELS"/$glob "$dir/ours/"; done
}

build() {  # IMAGE DOCKERFILE CONTEXT BASE [--build-arg K=V]...
  local image="$1" file="$2" ctx="$3" base="$4" t0=$SECONDS
  log "docker build $image (FROM $base)"
  docker build -q --network none --build-arg "BASE_IMAGE=$base" "${@:5}" -f "$file" -t "$image" "$ctx" >/dev/null \
    2> >(grep -v -E 'DEPRECATED|buildx|docs.docker.com|^[[:space:]]*$' >&2)
  log "$image built in $((SECONDS - t0)) s: $(docker image inspect -f '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1/1e6}')"
}

build_examples() {
  context_for "$BUILD/ctx-policy" policy 'liberopro_submission_spec-*.whl'
  for name in zero random; do
    build "liberopro/example-$name:$TAG" "$REPO/submission_spec/examples/$name/Dockerfile" \
      "$BUILD/ctx-policy" "$BASE_PYTHON"
  done
}

# The bc image's checkpoint: a `liberopro-bc train` folder (docs/baselines.md). Checked before
# anything is built, so that `all` stops at once rather than after the other images.
BC_CHECKPOINT="${BC_CHECKPOINT:-$REPO/baselines/checkpoints/bc-nominal}"
check_bc_checkpoint() {
  local f missing=()
  for f in weights.npz config.json; do [ -f "$BC_CHECKPOINT/$f" ] || missing+=("$f"); done
  [ "${#missing[@]}" -eq 0 ] && return
  echo "the bc image needs a trained checkpoint: $BC_CHECKPOINT lacks ${missing[*]}." >&2
  echo "Train one (docs/baselines.md, \"Commands\": liberopro-bc train --out DIR) and set BC_CHECKPOINT=DIR," >&2
  echo "or put it at baselines/checkpoints/bc-nominal; or name the other targets only (examples evaluator platform ...)." >&2
  exit 1
}

build_bc() {
  context_for "$BUILD/ctx-bc" bc 'liberopro_baselines-*.whl' 'liberopro_submission_spec-*.whl'
  mkdir -p "$BUILD/ctx-bc/checkpoint"
  cp "$BC_CHECKPOINT/weights.npz" "$BC_CHECKPOINT/config.json" "$BUILD/ctx-bc/checkpoint/"
  build "liberopro/example-bc:$TAG" "$REPO/submission_spec/examples/bc/Dockerfile" "$BUILD/ctx-bc" "$BASE_PYTHON"
}

build_evaluator() {
  context_for "$BUILD/ctx-evaluator" evaluator 'liberopro-*.whl' 'liberopro_submission_spec-*.whl'
  # EVALUATOR_EGL_VENDOR=nvidia adds NVIDIA's EGL vendor file (rendering on a GPU; docs/platform.md)
  build "liberopro/evaluator:$TAG" "$REPO/docker/evaluator.Dockerfile" "$BUILD/ctx-evaluator" "$BASE_SIM" \
    --build-arg "EGL_VENDOR=${EVALUATOR_EGL_VENDOR:-mesa}"
}

build_service() {  # NAME (redis|postgres): a Dockerfile and its entrypoint, FROM a debootstrap base
  local name="$1" ctx="$BUILD/ctx-$1" base args=()
  mkdir -p "$BUILD"
  if [ "$name" = redis ]; then
    base="$BASE_REDIS"; base_image "$base" "$REDIS_PKGS"
  else
    # postgresql-common's postinst made a `main` cluster in the rootfs: the image makes its own.
    base="$BASE_POSTGRES"; args=(--build-arg "PG_MAJOR=$PG_MAJOR")
    base_image "$base" "$POSTGRES_PKGS" "var/lib/postgresql/$PG_MAJOR/main" "etc/postgresql/$PG_MAJOR/main"
  fi
  rm -rf "$ctx"; mkdir -p "$ctx"
  cp "$REPO/docker/$name-entrypoint.sh" "$ctx/"
  build "liberopro/$name:$TAG" "$REPO/docker/$name.Dockerfile" "$ctx" "$base" "${args[@]}"
}

build_platform() {
  context_for "$BUILD/ctx-platform" platform 'liberopro-*.whl' 'liberopro_platform-*.whl' \
    'liberopro_leaderboard-*.whl' 'liberopro_submission_spec-*.whl'
  build "liberopro/platform:$TAG" "$REPO/docker/platform.Dockerfile" "$BUILD/ctx-platform" "$BASE_PYTHON"
}

# ---------------------------------------------------------------- 4. image ids
pin() {  # KEY IMAGE: KEY=<id of IMAGE> in $ENV_FILE, other lines kept (skipped when IMAGE is absent)
  local key="$1" image="$2" id rest
  id="$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null)" || return 0
  touch "$ENV_FILE"
  rest="$(grep -v "^$key=" "$ENV_FILE" || true)"
  { [ -n "$rest" ] && printf '%s\n' "$rest"; printf '%s=%s\n' "$key" "$id"; } >"$ENV_FILE"
  log "$key=${id:0:19}... ($image)"
}

pin_all() {
  pin LIBEROPRO_EVALUATOR_IMAGE "liberopro/evaluator:$TAG"
  pin LIBEROPRO_PLATFORM_IMAGE "liberopro/platform:$TAG"
  pin LIBEROPRO_REDIS_IMAGE "${REDIS_IMAGE:-liberopro/redis:$TAG}"
  pin LIBEROPRO_POSTGRES_IMAGE "${POSTGRES_IMAGE:-liberopro/postgres:$TAG}"
  pin LIBEROPRO_EXAMPLE_ZERO_IMAGE "liberopro/example-zero:$TAG"
  pin LIBEROPRO_EXAMPLE_RANDOM_IMAGE "liberopro/example-random:$TAG"
  pin LIBEROPRO_EXAMPLE_BC_IMAGE "liberopro/example-bc:$TAG"
  log "image ids in $ENV_FILE"
}

targets=("$@")
[ "${#targets[@]}" -eq 0 ] && targets=(all)
T0=$SECONDS
for t in "${targets[@]}"; do
  case "$t" in all|bc) check_bc_checkpoint ;; esac
done
for t in "${targets[@]}"; do
  case "$t" in
    all) build_bases; wheelhouse; build_examples; build_bc; build_evaluator; build_platform
         build_service redis; build_service postgres ;;
    base) build_bases ;;
    wheelhouse) wheelhouse ;;
    examples) build_bases; wheelhouse; build_examples ;;
    bc) build_bases; wheelhouse; build_bc ;;
    evaluator) build_bases; wheelhouse; build_evaluator ;;
    platform) build_bases; wheelhouse; build_platform ;;
    redis|postgres) build_service "$t" ;;
    pin) ;;
    *) echo "unknown target $t (all|base|wheelhouse|examples|bc|evaluator|platform|redis|postgres|pin)" >&2; exit 2 ;;
  esac
done
pin_all
log "done in $((SECONDS - T0)) s"
