# Shared steps of scripts/demo and scripts/test (sourced, not run).
#
# Every step is idempotent and cheap when already done, so both commands can be
# run again and again on the same machine, and from scratch on a fresh one:
#   - the virtualenv is (re)installed only when pyproject.toml changed;
#   - `npm ci` runs only when package-lock.json changed;
#   - the secret key and the admin password are generated once and kept in var/.
# shellcheck shell=bash

TWIN_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export TWIN_VAR_DIR="${TWIN_VAR_DIR:-$TWIN_ROOT/var}"
VENV="$TWIN_ROOT/.venv"
PY="$VENV/bin/python"
TWIN_EMBEDDED_REDIS_PORT="${TWIN_EMBEDDED_REDIS_PORT:-6399}"
export TWIN_EMBEDDED_REDIS_PORT
TWIN_STARTED_REDIS=0

log() { printf '\n\033[1;34m==>\033[0m %s\n' "$*"; }
warn() { printf '\033[1;33mwarning:\033[0m %s\n' "$*" >&2; }
die() { printf '\033[1;31merror:\033[0m %s\n' "$*" >&2; exit 1; }

# sha256 of the given files, as one hex string.
fingerprint() { cat "$@" | sha256sum | cut -d' ' -f1; }

# A Python ≥ 3.11 to build the virtualenv with.
find_python() {
    local candidate
    for candidate in python3.11 python3.12 python3.13 python3; do
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            command -v "$candidate"
            return 0
        fi
    done
    die "Python 3.11 or newer is needed (python3 --version says: $(python3 --version 2>&1))"
}

# ensure_venv [EXTRAS]: .venv with the project installed editable (EXTRAS e.g. "dev").
# Reinstalls only when pyproject.toml changed or the extras are missing.
ensure_venv() {
    local extras="${1:-}" spec="." stamp="$VENV/.twin-install" want have
    [[ -n "$extras" ]] && spec=".[$extras]"
    if [[ ! -x "$PY" ]]; then
        log "Creating the virtualenv in .venv"
        "$(find_python)" -m venv "$VENV" || die "could not create .venv"
    fi
    want="$(fingerprint "$TWIN_ROOT/pyproject.toml")"
    have="$(cat "$stamp" 2>/dev/null || true)"
    # "<sha> <extras>": the demo accepts a venv installed with dev extras too.
    if [[ "$have" == "$want $extras" || ( -z "$extras" && "${have%% *}" == "$want" ) ]]; then
        return 0
    fi
    log "Installing the project into .venv (pip install -e '$spec')"
    (cd "$TWIN_ROOT" && "$PY" -m pip install --disable-pip-version-check -q -e "$spec") ||
        die "pip install -e '$spec' failed"
    printf '%s %s\n' "$want" "$extras" >"$stamp"
}

# npm ci in frontend/, skipped when node_modules matches package-lock.json.
ensure_node_modules() {
    command -v npm >/dev/null 2>&1 || die "npm is needed to build the frontend (Node.js 20+)"
    local lock="$TWIN_ROOT/frontend/package-lock.json" stamp="$TWIN_ROOT/frontend/node_modules/.twin-lock"
    local want
    want="$(fingerprint "$lock")"
    if [[ "$(cat "$stamp" 2>/dev/null || true)" == "$want" ]]; then
        return 0
    fi
    log "Installing frontend packages (npm ci)"
    (cd "$TWIN_ROOT/frontend" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed"
    printf '%s\n' "$want" >"$stamp"
}

# frontend/openapi.json: the API schema drf-spectacular derives from the code (no
# server, database or Redis is touched: REDIS_URL only keeps settings from starting
# the embedded Redis, as in the Dockerfile). The frontend build turns it into
# TypeScript types (npm run schema).
write_openapi_schema() {
    (cd "$TWIN_ROOT" && REDIS_URL="${REDIS_URL:-redis://build-only:6379/0}" TWIN_ALLOW_INSECURE_KEY=1 \
        "$PY" manage.py spectacular --format openapi-json --file frontend/openapi.json) ||
        die "could not write the API schema (manage.py spectacular)"
}

build_frontend() {
    write_openapi_schema
    log "Building the frontend (npm run build)"
    (cd "$TWIN_ROOT/frontend" && npm run --silent build) || die "the frontend build failed"
}

# TWIN_SECRET_KEY from the environment, else from var/secret_key (made once, mode 600).
ensure_secret_key() {
    if [[ -n "${TWIN_SECRET_KEY:-}" ]]; then
        return 0
    fi
    local file="$TWIN_VAR_DIR/secret_key"
    mkdir -p "$TWIN_VAR_DIR"
    if [[ ! -s "$file" ]]; then
        (umask 077 && "$PY" -c 'import secrets; print(secrets.token_urlsafe(50))' >"$file")
    fi
    TWIN_SECRET_KEY="$(cat "$file")"
    export TWIN_SECRET_KEY
}

manage() { (cd "$TWIN_ROOT" && "$PY" manage.py "$@"); }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# With REDIS_URL unset, start the embedded Redis (twin/embedded.py) now, so every
# child process finds it; remember whether we started it, to stop it at the end.
ensure_redis() {
    if [[ -n "${REDIS_URL:-}" ]]; then
        return 0
    fi
    if ! port_open "$TWIN_EMBEDDED_REDIS_PORT"; then
        TWIN_STARTED_REDIS=1
    fi
    (cd "$TWIN_ROOT" && "$PY" -c '
import os
from pathlib import Path
from twin.embedded import ensure_embedded_redis
print(ensure_embedded_redis(Path(os.environ["TWIN_VAR_DIR"])))') >/dev/null ||
        die "the embedded Redis did not start (see $TWIN_VAR_DIR/redis-$TWIN_EMBEDDED_REDIS_PORT.log)"
}

# scripts/demo: with REDIS_URL unset, run the embedded Redis in the foreground under
# its own supervisor (below), so a Redis that dies is started again with a backoff
# like every other child; it keeps its data in an append-only file in $TWIN_VAR_DIR
# (twin/embedded.py), so the runs it had queued survive the restart. An embedded
# Redis someone else already runs on the port is used as it is (not supervised).
supervise_embedded_redis() {
    if [[ -n "${REDIS_URL:-}" ]]; then
        return 0
    fi
    if port_open "$TWIN_EMBEDDED_REDIS_PORT"; then
        warn "an embedded Redis already runs on port $TWIN_EMBEDDED_REDIS_PORT; using it (not supervised by this demo)"
        return 0
    fi
    : >"$TWIN_LOG_DIR/redis.log"
    supervise redis env PYTHONPATH="$TWIN_ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m twin.embedded serve
    for _ in $(seq 1 100); do
        port_open "$TWIN_EMBEDDED_REDIS_PORT" && return 0
        sleep 0.1
    done
    die "the embedded Redis did not start; see $TWIN_LOG_DIR/redis.log:
$(tail -n 20 "$TWIN_LOG_DIR/redis.log")"
}

# Stop the embedded Redis if this command started it.
stop_redis_if_started() {
    if [[ "$TWIN_STARTED_REDIS" == 1 && -x "$PY" ]]; then
        (cd "$TWIN_ROOT" && "$PY" -c 'from twin.embedded import stop_embedded_redis; stop_embedded_redis()') ||
            true
        TWIN_STARTED_REDIS=0
    fi
}

describe_backends() {
    if [[ -n "${DATABASE_URL:-}" ]]; then
        echo "database: ${DATABASE_URL%%\?*}" | sed -E 's#(://[^:/@]+):[^@]*@#\1:***@#'
    else
        echo "database: SQLite in $TWIN_VAR_DIR"
    fi
    if [[ -n "${REDIS_URL:-}" ]]; then
        echo "redis:    $REDIS_URL" | sed -E 's#(://[^:/@]*):[^@]*@#\1:***@#'
    else
        echo "redis:    embedded, redis://127.0.0.1:$TWIN_EMBEDDED_REDIS_PORT/0"
    fi
}

# supervise NAME COMMAND...: run COMMAND under a background supervisor, its output
# appended to $TWIN_LOG_DIR/NAME.log; whenever it exits (a crash, a kill), start
# it again after a backoff (TWIN_DEMO_BACKOFF_MIN 1 s, doubling to
# TWIN_DEMO_BACKOFF_MAX 30 s; back to the minimum once a run lasted
# TWIN_DEMO_BACKOFF_RESET 60 s), saying so in the log and on stderr. COMMAND runs in
# a process group of its own (setsid), so that stopping it reaches its own children
# too (uvicorn's and Celery's worker processes, a shell's background jobs), and
# Ctrl-C on the terminal reaches the demo alone, which stops it in order. SIGTERM or
# SIGINT to the supervisor stops the child's whole group (SIGTERM, then SIGKILL
# after TWIN_DEMO_STOP_S whole seconds, default 12) and then the supervisor. The supervisor's
# pid goes to the caller's CHILDREN array, NAME to CHILD_NAMES. Used by
# scripts/demo; tests/test_scripts.py runs it.
supervise() {
    local name="$1"
    shift
    (
        set +e
        trap - EXIT
        child=""
        pause=""
        # Without setsid (not Linux) the child stays in our group: signal it alone.
        group=()
        command -v setsid >/dev/null 2>&1 && group=(setsid)
        signal_child() {
            if ((${#group[@]})); then
                kill "-$1" -- "-$child" 2>/dev/null
            else
                kill "-$1" "$child" 2>/dev/null
            fi
        }
        stop_child() {
            [[ -n "$pause" ]] && kill -TERM "$pause" 2>/dev/null
            if [[ -n "$child" ]]; then
                signal_child TERM
                # The whole group, not only the leader: a grandchild may outlive it.
                # Counted in tenths (SECONDS ticks whole seconds: too coarse a grace).
                local tenth
                for ((tenth = 0; tenth < ${TWIN_DEMO_STOP_S:-12} * 10; tenth++)); do
                    signal_child 0 || break
                    sleep 0.1
                done
                signal_child KILL
                wait "$child" 2>/dev/null
            fi
            exit 0
        }
        trap stop_child TERM INT
        delay="${TWIN_DEMO_BACKOFF_MIN:-1}"
        while true; do
            started=$SECONDS
            # A background job of a shell without job control is no group leader, so
            # setsid needs no fork: $child is the new group's id.
            "${group[@]}" "$@" >>"$TWIN_LOG_DIR/$name.log" 2>&1 &
            child=$!
            wait "$child"
            rc=$?
            # Whatever the child left behind in its group goes with it.
            ((${#group[@]})) && signal_child KILL
            child=""
            if ((SECONDS - started >= ${TWIN_DEMO_BACKOFF_RESET:-60})); then
                delay="${TWIN_DEMO_BACKOFF_MIN:-1}"
            fi
            note="$(date '+%H:%M:%S') $name exited (status $rc); restarting it in ${delay} s"
            echo "$note" >>"$TWIN_LOG_DIR/$name.log"
            echo "$note (see $TWIN_LOG_DIR/$name.log)" >&2
            sleep "$delay" &
            pause=$!
            wait "$pause"
            pause=""
            delay=$((delay * 2))
            ((delay > ${TWIN_DEMO_BACKOFF_MAX:-30})) && delay="${TWIN_DEMO_BACKOFF_MAX:-30}"
        done
    ) &
    CHILDREN+=($!)
    CHILD_NAMES+=("$name")
}

# stop_children: stop every supervisor in CHILDREN (each stops its child's process
# group, see supervise) and wait for them: TWIN_DEMO_STOP_S (12 s) for the children
# plus 5 s, then SIGKILL to a supervisor still there.
stop_children() {
    local pid deadline
    for pid in "${CHILDREN[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    deadline=$((SECONDS + ${TWIN_DEMO_STOP_S:-12} + 5))
    for pid in "${CHILDREN[@]}"; do
        while kill -0 "$pid" 2>/dev/null && [[ $SECONDS -lt $deadline ]]; do sleep 0.2; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
}
