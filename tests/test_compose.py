"""docker-compose.yml and the Dockerfile, checked against the code.

No Docker engine runs where the tests run, so instead of starting the stack we
check everything that would break it: each service's command is parsed by the
real CLI it starts (uvicorn, celery, manage.py) and names a real application or
command; every environment variable a service sets is one the settings read;
the settings load from exactly the environment compose gives them (and fail
without the secret key, which compose must take from .env, not from the file);
PostgreSQL and Redis have healthchecks the app services wait for; every
long-running service restarts on exit and has a health check whose command is
real; the two workers serve the jobs and the telemetry queue the settings route
to; and the Dockerfile copies only files that exist and are not excluded by
.dockerignore.

Every check on the services runs twice: on docker-compose.yml, and on it with
docker-compose.million.yml merged over it by compose's merge rules (``merge_compose``),
which is what ``docker compose -f docker-compose.yml -f docker-compose.million.yml``
starts. The override's own tests check what it changes: the processes it asks for
as the real CLIs read them, the same sizing settings in every app service, and
Redis and VictoriaMetrics started for real with its flags.
"""
from __future__ import annotations

import ast
import fnmatch
import importlib
import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import get_commands, load_command_class
from django.core.management.base import CommandError

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
MILLION_FILE = ROOT / "docker-compose.million.yml"
APP_SERVICES = {"migrate", "web", "worker", "worker-telemetry", "beat", "agent"}
REQUIRED_SERVICES = {"postgres", "redis", *APP_SERVICES}
# Commands a service may name before they are written, if it sits under a profile
# (the telemetry agent's service was written before its command).
PENDING_COMMANDS = {"telemetry_agent"}
# What a user puts in .env; the values are dummies for interpolation only.
DOTENV = {"TWIN_SECRET_KEY": "compose-test-key", "POSTGRES_PASSWORD": "compose-test-pw"}

_INTERPOLATION = re.compile(
    r"\$(?:(?P<escaped>\$)|\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))"
)


class MissingVariable(Exception):
    pass


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``, ``${VAR:?msg}``."""

    def substitute(match: re.Match[str]) -> str:
        if match["escaped"]:
            return "$"
        name = match["name"] or match["bare"]
        op, arg = match["op"], match["arg"] or ""
        present = name in env
        empty = not env.get(name)
        if op in (":-", "-"):
            use_default = empty if op == ":-" else not present
            return arg if use_default else env[name]
        if op in (":?", "?"):
            if (empty if op == ":?" else not present):
                raise MissingVariable(f"{name}: {arg}")
            return env[name]
        return env.get(name, "")

    return _INTERPOLATION.sub(substitute, value)


# --- compose's merge of an override file over the base ----------------------------

# Sequences an override replaces whole (compose's merge rules: "command", "entrypoint"
# and a healthcheck's "test" are overridden, not appended). Other sequences (ports,
# volumes, …) merge by rules of their own that no override here needs: merging one is
# an error, so a new case is written down before it is relied on.
REPLACED_SEQUENCES = {("command",), ("entrypoint",), ("healthcheck", "test"), ("profiles",)}


def _environment_map(env: Any) -> dict[str, Any]:
    if isinstance(env, list):
        return dict(item.split("=", 1) if "=" in item else (item, None) for item in env)
    return dict(env or {})


def _merge(base: Any, override: Any, path: tuple[str, ...]) -> Any:
    if path[-1:] == ("environment",):
        # Merged key by key, whichever of the two forms (list or map) each file uses.
        return {**_environment_map(base), **_environment_map(override)}
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = _merge(base[key], value, (*path, key)) if key in base else value
        return merged
    if isinstance(base, list) or isinstance(override, list):
        if path[-2:] in REPLACED_SEQUENCES or path[-1:] in REPLACED_SEQUENCES:
            return override
        raise NotImplementedError(f"merging the sequence {'.'.join(path)}: teach "
                                  f"merge_compose compose's rule for it")
    return override  # scalars: the override wins


def merge_compose(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``docker compose -f base -f override``'s model, for the rules these files use:
    mappings merged key by key (recursively), ``environment`` merged per variable,
    ``command``/``entrypoint``/``healthcheck.test`` replaced, scalars replaced. YAML
    anchors and ``<<`` merge keys resolve within each file before (PyYAML does it).

    Cross-checked once by hand against Debian's docker-compose 1.29.2 (``config`` on
    the two files; it rejects the top-level ``name``, so without it): the same
    commands, environments, health-check tests, profiles and ``deploy`` for every
    service, up to its normalising (``disable: true`` as ``["NONE"]``, cpus as floats)."""
    merged: dict[str, Any] = _merge(base, override, ())
    return merged


def test_merge_follows_compose_rules():
    base = {"services": {"a": {"command": ["x", "1"], "environment": ["A=1", "B=2"],
                               "healthcheck": {"test": ["CMD", "x"], "interval": "5s"},
                               "ports": ["80:80"]}}}
    override = {"services": {"a": {"command": ["y"], "environment": {"B": "3", "C": "4"},
                                   "healthcheck": {"test": ["CMD", "y"]}}},
                "x-extra": {"k": 1}}
    merged = merge_compose(base, override)
    assert merged["services"]["a"] == {
        "command": ["y"], "environment": {"A": "1", "B": "3", "C": "4"},
        "healthcheck": {"test": ["CMD", "y"], "interval": "5s"}, "ports": ["80:80"]}
    assert merged["x-extra"] == {"k": 1}
    with pytest.raises(NotImplementedError, match="services.a.ports"):
        merge_compose(base, {"services": {"a": {"ports": ["81:81"]}}})


def load_compose(which: str) -> dict[str, Any]:
    base = yaml.safe_load(COMPOSE_FILE.read_text())
    if which == "base":
        return base
    return merge_compose(base, yaml.safe_load(MILLION_FILE.read_text()))


@pytest.fixture(scope="module", params=["base", "million"])
def compose(request) -> dict[str, Any]:
    """docker-compose.yml alone, then with docker-compose.million.yml merged over it."""
    return load_compose(request.param)


@pytest.fixture(scope="module")
def services(compose) -> dict[str, dict[str, Any]]:
    return compose["services"]


def command_of(service: dict[str, Any]) -> list[str]:
    command = service["command"]
    return shlex.split(command) if isinstance(command, str) else [str(c) for c in command]


def environment_of(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {key: "" if value is None else str(value) for key, value in env.items()}


def settings_env_names() -> set[str]:
    """Every environment variable name ``twin/settings.py`` reads."""
    tree = ast.parse((ROOT / "twin" / "settings.py").read_text())
    readers = {"get", "getenv", "env_bool", "env_list", "setdefault", "pop"}
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            first = node.args[0]
            if name in readers and isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.add(first.value)
        if (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                and ast.unparse(node.value) == "os.environ"):
            names.add(node.slice.value)
    return {n for n in names if re.fullmatch(r"[A-Z][A-Z0-9_]*", n)}


# --- services, builds ------------------------------------------------------

def test_every_required_service_is_declared(services):
    assert REQUIRED_SERVICES <= set(services), REQUIRED_SERVICES - set(services)


def test_app_services_build_from_the_project_dockerfile(services):
    for name in APP_SERVICES:
        build = services[name]["build"]
        context = (COMPOSE_FILE.parent / build["context"]).resolve()
        assert context == ROOT, name
        assert (context / build.get("dockerfile", "Dockerfile")).is_file(), name


def test_postgres_and_redis_have_healthchecks_the_app_waits_for(services):
    for infra in ("postgres", "redis"):
        test = services[infra]["healthcheck"]["test"]
        assert test and test[0] in ("CMD", "CMD-SHELL"), infra
    for name in APP_SERVICES:
        depends = services[name]["depends_on"]
        for infra in ("postgres", "redis"):
            assert depends[infra]["condition"] == "service_healthy", (name, infra)


def test_long_running_services_wait_for_the_migrate_step(services):
    assert services["migrate"]["restart"] == "no"
    assert "migrate" not in services["migrate"]["depends_on"]  # not on itself (via the anchor)
    assert command_of(services["migrate"])[-2:] == ["migrate", "--noinput"]
    for name in ("web", "worker", "worker-telemetry", "beat", "agent"):
        assert (services[name]["depends_on"]["migrate"]["condition"]
                == "service_completed_successfully"), name


# --- commands ----------------------------------------------------------------

def check_uvicorn(args: list[str]) -> dict[str, Any]:
    """Parse ``args`` as uvicorn's CLI does and check the app; its options as parsed."""
    from uvicorn.main import main as uvicorn_cli

    ctx = uvicorn_cli.make_context("uvicorn", list(args))  # raises on a bad option
    module_name, _, attr = ctx.params["app"].partition(":")
    app = getattr(importlib.import_module(module_name), attr)
    from twin.asgi import application

    assert app is application, f"uvicorn serves {ctx.params['app']}, not twin.asgi:application"
    return dict(ctx.params)


def check_celery(args: list[str]) -> dict[str, Any]:
    """Parse ``args`` as celery's CLI does, with our app; the subcommand's options."""
    from celery import Celery
    from celery.app.utils import find_app
    from celery.bin.base import CLIContext
    from celery.bin.celery import celery as celery_cli

    index = next(i for i, token in enumerate(args) if token in celery_cli.commands)
    ctx = celery_cli.make_context("celery", args[: index + 1])
    app = find_app(ctx.params["app"])  # how `celery -A` resolves it
    from twin.celery import app as twin_app

    assert isinstance(app, Celery) and app is twin_app
    ctx.obj = CLIContext(app=app, no_color=True, workdir=None, quiet=True)
    sub = celery_cli.commands[args[index]]
    assert sub.name in ("worker", "beat"), sub.name
    # raises on a bad option
    return dict(sub.make_context(sub.name, args[index + 1:], parent=ctx).params)


def check_manage(args: list[str], service: dict[str, Any]) -> None:
    name, options = args[0], args[1:]
    commands = get_commands()
    if name not in commands:
        assert name in PENDING_COMMANDS, f"manage.py has no command {name!r}"
        # Not written yet: it must not start by default.
        assert service.get("profiles"), f"{name!r} does not exist yet: keep it under a profile"
        return
    command = load_command_class(commands[name], name)
    command.create_parser("manage.py", name).parse_args(options)  # CommandError if bad


def check_command(tokens: list[str], service: dict[str, Any]) -> None:
    program = Path(tokens[0]).name
    if program == "uvicorn":
        check_uvicorn(tokens[1:])
    elif program == "celery":
        check_celery(tokens[1:])
    elif program.startswith("python") and tokens[1] == "manage.py":
        assert (ROOT / "manage.py").is_file()
        check_manage(tokens[2:], service)
    else:
        pytest.fail(f"unknown program {tokens[0]!r}: teach tests/test_compose.py to check it")


def test_every_app_command_is_real(services):
    expected = {
        "migrate": "python", "web": "uvicorn", "worker": "celery",
        "worker-telemetry": "celery", "beat": "celery", "agent": "python",
    }
    for name in APP_SERVICES:
        tokens = command_of(services[name])
        assert Path(tokens[0]).name == expected[name], name
        check_command(tokens, services[name])
    assert command_of(services["worker"])[3] == "worker"
    assert command_of(services["worker-telemetry"])[3] == "worker"
    assert command_of(services["beat"])[3] == "beat"


def test_the_checks_catch_a_broken_command(services):
    with pytest.raises(Exception, match="No such option"):
        check_uvicorn(["twin.asgi:application", "--no-such-flag"])
    with pytest.raises(ModuleNotFoundError):
        check_uvicorn(["twin.nowhere:application"])
    with pytest.raises(ModuleNotFoundError):
        check_celery(["-A", "twin_missing", "worker"])
    with pytest.raises(AssertionError, match="no command"):
        check_manage(["no_such_command"], {"profiles": ["x"]})
    with pytest.raises(CommandError, match="unrecognized arguments"):
        check_manage(["migrate", "--no-such-option"], {})


def option(tokens: list[str], name: str) -> str:
    return tokens[tokens.index(name) + 1]


def test_the_workers_serve_the_jobs_queue_and_the_telemetry_queue(services, tmp_path):
    """One worker per queue, as the settings route them under compose's environment
    (telemetry never waits behind scenario runs), each with its own node name."""
    env = {k: interpolate(v, DOTENV) for k, v in environment_of(services["worker"]).items()}
    probe = ("import json\nfrom django.conf import settings as s\n"
             "print(json.dumps([s.CELERY_TASK_DEFAULT_QUEUE, s.TWIN_TELEMETRY_QUEUE,"
             " s.CELERY_TASK_ROUTES]))\n")
    base = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "twin.settings",
            "TWIN_VAR_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env={**base, **env},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    jobs, telemetry, routes = json.loads(result.stdout)
    assert routes == {"twin.telemetry.*": {"queue": telemetry}} and jobs != telemetry
    jobs_worker, telemetry_worker = (command_of(services[n]) for n in ("worker",
                                                                      "worker-telemetry"))
    assert option(jobs_worker, "-Q") == jobs
    assert option(telemetry_worker, "-Q") == telemetry
    assert option(jobs_worker, "-n") != option(telemetry_worker, "-n")


def test_every_long_running_service_restarts_and_has_a_real_health_check(services):
    for name, service in services.items():
        if name == "migrate":  # one-shot: the others wait for it to complete
            assert service["restart"] == "no" and service["healthcheck"] == {"disable": True}
            continue
        assert service["restart"] in ("unless-stopped", "always"), name
        test = service["healthcheck"]["test"]
        assert test[0] in ("CMD", "CMD-SHELL") and len(test) > 1, name
        assert service["healthcheck"].get("disable") is not True, name
        if name in APP_SERVICES:
            tokens = test[1:]
            assert tokens[:3] == ["python", "manage.py", "healthcheck"], name
            check_manage(tokens[2:], service)
    kinds = {command_of(services[n])[0]: services[n]["healthcheck"]["test"][4]
             for n in ("web", "beat")}
    assert kinds == {"uvicorn": "web", "celery": "beat"}
    for name, node in (("worker", "jobs"), ("worker-telemetry", "telemetry")):
        test = services[name]["healthcheck"]["test"]
        assert test[4:] == ["worker", "--name", node], name
        assert option(command_of(services[name]), "-n") == f"{node}@%h", name


def test_redis_keeps_queued_jobs_across_a_restart(services):
    tokens = command_of(services["redis"])
    assert option(tokens, "--appendonly") == "yes"
    assert any(v.endswith(":/data") for v in services["redis"]["volumes"])


def test_telemetry_agent_is_opt_in_until_its_command_exists(services):
    agent = services["agent"]
    agent_tokens = command_of(agent)
    assert agent_tokens[:3] == ["python", "manage.py", "telemetry_agent"]
    assert agent["profiles"] == ["agent"]
    # No service outside a profile may name a command that does not exist.
    commands = get_commands()
    for name, service in services.items():
        if "command" not in service or service.get("profiles"):
            continue
        tokens = command_of(service)
        if tokens[:2] == ["python", "manage.py"]:
            assert tokens[2] in commands, name
    if "telemetry_agent" not in commands:
        # Pending: accepted only because it sits under a profile.
        with pytest.raises(AssertionError, match="keep it under a profile"):
            check_manage(["telemetry_agent"], {})
    # Either way the agent's command line passes the same check as the others
    # (once the command exists, its real parser validates the options).
    check_manage(agent_tokens[2:], agent)


# --- environment ---------------------------------------------------------------

def test_every_variable_a_service_sets_is_read_by_the_settings(services):
    read = settings_env_names()
    assert {"DATABASE_URL", "REDIS_URL", "TWIN_SECRET_KEY", "TWIN_ALLOWED_HOSTS"} <= read
    for name in APP_SERVICES:
        unknown = set(environment_of(services[name])) - read
        assert not unknown, f"{name} sets {sorted(unknown)}, which twin/settings.py never reads"


def test_secrets_come_from_the_environment_not_the_file(services):
    for name in APP_SERVICES:
        env = environment_of(services[name])
        assert re.fullmatch(r"\$\{TWIN_SECRET_KEY:\?[^}]+\}", env["TWIN_SECRET_KEY"]), name
        with pytest.raises(MissingVariable, match="TWIN_SECRET_KEY"):
            interpolate(env["TWIN_SECRET_KEY"], {})
        with pytest.raises(MissingVariable, match="POSTGRES_PASSWORD"):
            interpolate(env["DATABASE_URL"], {"TWIN_SECRET_KEY": "x"})
    with pytest.raises(MissingVariable):
        interpolate(services["postgres"]["environment"]["POSTGRES_PASSWORD"], {})


def _settings_under(env: dict[str, str], var_dir: Path) -> subprocess.CompletedProcess[str]:
    probe = (
        "import json\n"
        "from django.conf import settings\n"
        "s = settings\n"
        "print(json.dumps({'engine': s.DATABASES['default']['ENGINE'],"
        " 'db': s.DATABASES['default']['NAME'], 'host': s.DATABASES['default']['HOST'],"
        " 'redis': s.REDIS_URL, 'broker': s.CELERY_BROKER_URL,"
        " 'hosts': s.ALLOWED_HOSTS, 'debug': s.DEBUG, 'public': s.TWIN_PUBLIC_READ,"
        " 'key': s.SECRET_KEY}))\n"
    )
    base = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "twin.settings",
            "TWIN_VAR_DIR": str(var_dir)}
    return subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env={**base, **env},
                          capture_output=True, text=True, timeout=60)


def test_settings_load_from_exactly_the_compose_environment(services, tmp_path):
    for name in ("web", "worker"):
        env = {k: interpolate(v, DOTENV) for k, v in environment_of(services[name]).items()}
        result = _settings_under(env, tmp_path)
        assert result.returncode == 0, result.stderr
        loaded = json.loads(result.stdout)
        assert loaded["engine"] == "django.db.backends.postgresql"
        assert (loaded["host"], loaded["db"]) == ("postgres", "twin")
        assert loaded["redis"] == loaded["broker"] == "redis://redis:6379/0"
        assert loaded["key"] == DOTENV["TWIN_SECRET_KEY"]
        assert "localhost" in loaded["hosts"] and loaded["debug"] is False
        assert loaded["public"] is False

        # The secret key is required: without it the settings refuse to load.
        del env["TWIN_SECRET_KEY"]
        refused = _settings_under(env, tmp_path)
        assert refused.returncode != 0
        assert "TWIN_SECRET_KEY is not set" in refused.stderr


# --- Redis and VictoriaMetrics, started with their commands ----------------------

def test_redis_starts_with_its_command(services, tmp_path):
    """The redis-server of the tests (Redis 7, as the image) accepts the service's
    flags and runs with them; the port and directory are the test's own."""
    import redis

    from twin.core.localnet import free_port, stop_process

    tokens = command_of(services["redis"])
    assert tokens[0] == "redis-server"
    binary = shutil.which("redis-server")
    assert binary, "redis-server is not installed (scripts/test installs Redis)"
    port = free_port()
    proc = subprocess.Popen([binary, *tokens[1:], "--port", str(port), "--bind", "127.0.0.1",
                             "--dir", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        client = redis.Redis(port=port, socket_timeout=2)
        deadline = time.monotonic() + 10
        while True:
            assert proc.poll() is None, f"redis-server refused the command: {proc.stdout.read()}"
            try:
                client.ping()
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "redis-server did not answer"
                time.sleep(0.05)
        config = client.config_get("*")
        assert config["appendonly"] == "yes"
        if "--io-threads" in tokens:
            assert config["io-threads"] == option(tokens, "--io-threads")
        client.close()
    finally:
        stop_process(proc)


def test_victoria_accepts_its_flags(services, tmp_path):
    """Debian's victoria-metrics (the same 1.79.5 as the image; scripts/test installs it)
    parses the service's flags: an unknown one stops it before -version answers."""
    binary = shutil.which("victoria-metrics")
    assert binary, "victoria-metrics is not installed (apt-get install victoria-metrics)"
    flags = [interpolate(f, DOTENV) for f in command_of(services["victoria"])]
    flags = [f"-storageDataPath={tmp_path}" if f.startswith("-storageDataPath=") else f
             for f in flags]
    tag = services["victoria"]["image"].rpartition(":v")[2]
    assert tag == "1.79.5", "the image and the tests' binary differ: check the flags by hand"

    def run(extra: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([binary, *flags, *extra, "-version"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=30)

    result = run([])
    assert result.returncode == 0, result.stdout
    refused = run(["-no.such.flag=1"])
    assert refused.returncode != 0 and "no.such.flag" in refused.stdout


# --- docker-compose.million.yml ---------------------------------------------------

# Settings that web and the workers must agree on (web claims drain slots when it
# enqueues; the workers drain, shard the tick and write the history).
MILLION_SIZING = ("TWIN_TICK_SHARD_CARDS", "TWIN_TELEMETRY_DRAINERS", "TWIN_VICTORIA_STEP_S",
                  "TWIN_TELEMETRY_APPLY_ON_INGEST", "TWIN_TELEMETRY_MAX_TICK_HZ")


@pytest.fixture(scope="module")
def base_services() -> dict[str, dict[str, Any]]:
    return load_compose("base")["services"]


@pytest.fixture(scope="module")
def million_services() -> dict[str, dict[str, Any]]:
    return load_compose("million")["services"]


def test_million_override_changes_only_services_the_base_declares():
    """A service only in the override would start half-defined (no image, no env)."""
    override = yaml.safe_load(MILLION_FILE.read_text())
    base = yaml.safe_load(COMPOSE_FILE.read_text())
    assert set(override["services"]) <= set(base["services"])
    assert {key for key in override if not key.startswith("x-")} == {"services"}
    text = MILLION_FILE.read_text()
    assert "docker compose -f docker-compose.yml -f docker-compose.million.yml" in text
    assert "docs/scaling.md" in text


def _without(params: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k != key}


def test_million_commands_add_processes_and_keep_the_rest(base_services, million_services):
    web_base = check_uvicorn(command_of(base_services["web"])[1:])
    web = check_uvicorn(command_of(million_services["web"])[1:])
    assert web["workers"] > (web_base["workers"] or 1)
    assert _without(web, "workers") == _without(web_base, "workers")  # --lifespan off, …

    name = "worker-telemetry"
    worker_base = check_celery(command_of(base_services[name])[1:])
    worker = check_celery(command_of(million_services[name])[1:])
    assert worker["concurrency"] > worker_base["concurrency"]
    assert _without(worker, "concurrency") == _without(worker_base, "concurrency")

    # Redis and VictoriaMetrics: the base's flags (persistence, storage, retention) first.
    for infra in ("redis", "victoria"):
        base_tokens = command_of(base_services[infra])
        assert command_of(million_services[infra])[:len(base_tokens)] == base_tokens, infra


def test_million_web_yields_the_cores_to_the_telemetry_workers(base_services,
                                                               million_services):
    """Where they share cores, the rounds (latency-bound) get them before the ingest
    (throughput-bound): the web's CPU weight is below the telemetry worker's, which
    keeps Docker's default (1,024), and the base file sets no weights at all."""
    assert all("cpu_shares" not in service for service in base_services.values())
    web = million_services["web"]["cpu_shares"]
    assert isinstance(web, int) and 2 <= web < 1024  # Docker's range starts at 2
    assert "cpu_shares" not in million_services["worker-telemetry"]
    assert "cpu_shares" not in million_services["redis"]


def test_million_sizing_is_one_in_every_app_service_and_read_by_the_settings(
        million_services, tmp_path):
    sizing = {name: {key: environment_of(million_services[name]).get(key)
                     for key in MILLION_SIZING} for name in APP_SERVICES}
    first = sizing["web"]
    assert None not in first.values(), first
    assert all(values == first for values in sizing.values()), sizing

    probe = ("import json\nfrom django.conf import settings as s\n"
             "from twin.telemetry.config import conf\n"
             "from twin.telemetry.enqueue import apply_on_ingest, drainers\n"
             "from twin.telemetry.processing.shards import shard_cards\n"
             "print(json.dumps([s.TELEMETRY_TICK_SHARD_CARDS, shard_cards(), drainers(),"
             " s.TWIN_VICTORIA_STEP_S, apply_on_ingest(), conf().tick_min_s]))\n")
    env = {k: interpolate(v, DOTENV) for k, v in environment_of(million_services["web"]).items()}
    base = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "twin.settings",
            "TWIN_VAR_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env={**base, **env},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    shard, used_shard, drain_slots, step, applied, tick_min_s = json.loads(result.stdout)
    assert shard == used_shard == int(first["TWIN_TICK_SHARD_CARDS"])
    assert drain_slots == int(first["TWIN_TELEMETRY_DRAINERS"])
    assert step == float(first["TWIN_VICTORIA_STEP_S"])
    assert applied is (first["TWIN_TELEMETRY_APPLY_ON_INGEST"] == "1") is True
    assert tick_min_s == 1 / float(first["TWIN_TELEMETRY_MAX_TICK_HZ"]) == 1.0


def test_million_preset_ticks_in_shards_beside_its_drains(million_services):
    """The million preset is sharded, on supernode boundaries; the telemetry worker has
    processes left for a round's shards while every drain slot holds one."""
    from twin.hardware.presets import PRESETS

    preset = PRESETS["million"]
    cards = preset.supernode.cards * preset.default_supernodes
    assert cards == 1_048_576
    env = environment_of(million_services["worker-telemetry"])
    shard = int(env["TWIN_TICK_SHARD_CARDS"])
    assert 0 < shard < cards and shard % preset.supernode.cards == 0
    concurrency = check_celery(command_of(million_services["worker-telemetry"])[1:])[
        "concurrency"]
    assert concurrency > int(env["TWIN_TELEMETRY_DRAINERS"])


def test_million_agent_streams_the_million_cluster_and_stays_opt_in(million_services):
    from twin.hardware.presets import PRESETS

    agent = million_services["agent"]
    assert agent["profiles"] == ["agent"]
    cluster = option(command_of(agent), "--cluster")
    assert cluster == PRESETS["million"].default_name
    assert option(agent["healthcheck"]["test"], "--cluster") == cluster


def _bytes(size: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)\s*([KMG]?)B?", str(size)).groups()
    return float(number) * 1024 ** " KMG".index(unit or " ")


def test_million_victoria_reserves_what_it_is_limited_to(million_services):
    resources = million_services["victoria"]["deploy"]["resources"]
    limits, reservations = resources["limits"], resources["reservations"]
    assert float(reservations["cpus"]) <= float(limits["cpus"])
    assert _bytes(reservations["memory"]) <= _bytes(limits["memory"])


# --- Dockerfile ------------------------------------------------------------------

def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs with continuation lines joined."""
    joined = re.sub(r"\\\n", " ", path.read_text())
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def dockerignore_patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip().rstrip("/") for line in lines if line.strip() and not line.startswith("#")]


def ignored(path: str, patterns: list[str]) -> bool:
    parts = Path(path).parts
    for pattern in patterns:
        bare = pattern.removeprefix("**/")
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            if fnmatch.fnmatch(prefix, pattern) or fnmatch.fnmatch(parts[i - 1], bare):
                return True
    return False


def test_dockerfile_copies_exist_and_are_not_ignored():
    instructions = dockerfile_instructions(ROOT / "Dockerfile")
    stages = {m.group(1) for word, rest in instructions if word == "FROM"
              for m in [re.search(r"\bAS\s+(\S+)", rest, re.IGNORECASE)] if m}
    assert {"frontend", "app"} <= stages
    patterns = dockerignore_patterns()
    copies = 0
    for word, rest in instructions:
        if word not in ("COPY", "ADD"):
            continue
        args = shlex.split(rest)
        flags = [a for a in args if a.startswith("--")]
        sources = [a for a in args if not a.startswith("--")][:-1]
        from_stage = next((f.split("=", 1)[1] for f in flags if f.startswith("--from=")), None)
        if from_stage:
            assert from_stage in stages, from_stage
            continue
        for source in sources:
            copies += 1
            assert (ROOT / source).exists(), f"COPY {source}: no such file in the build context"
            assert not ignored(source.rstrip("/"), patterns), f"COPY {source} is .dockerignored"
    assert copies >= 5


def test_dockerignore_keeps_local_state_out():
    patterns = dockerignore_patterns()
    for path in (".venv", ".env", "var", "frontend/node_modules", ".git",
                 "twin/__pycache__", "staticfiles"):
        assert ignored(path, patterns), path
    for path in ("twin", "simulation", "manage.py", "pyproject.toml", "frontend/src"):
        assert not ignored(path, patterns), path


def test_dockerfile_installs_editable_and_builds_the_frontend():
    text = (ROOT / "Dockerfile").read_text()
    # Editable keeps BASE_DIR at /app, where settings look for frontend/dist.
    assert re.search(r"pip install -e \.", text)
    assert "npm ci" in text and "npm run build" in text
    assert "COPY --from=frontend /src/frontend/dist ./frontend/dist" in text
    assert 'outDir: "dist"' in (ROOT / "frontend" / "vite.config.ts").read_text()
    package = json.loads((ROOT / "frontend" / "package.json").read_text())
    assert "build" in package["scripts"]


def test_dockerfile_sets_only_variables_the_code_reads():
    read = settings_env_names() | {"DJANGO_SETTINGS_MODULE"}
    for word, rest in dockerfile_instructions(ROOT / "Dockerfile"):
        if word != "ENV":
            continue
        for name in re.findall(r"(\w+)=", rest):
            if not name.startswith(("PYTHON", "PIP_")):
                assert name in read, f"Dockerfile sets {name}, which nothing reads"


def test_dockerfile_default_command_is_the_web_server():
    cmd = next(rest for word, rest in dockerfile_instructions(ROOT / "Dockerfile") if word == "CMD")
    tokens = json.loads(cmd)
    assert tokens[0] == "uvicorn"
    check_uvicorn(tokens[1:])
