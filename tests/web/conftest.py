"""Fixtures for the pages Django serves: collected static files, real servers, a browser.

``collected_static`` runs ``collectstatic`` once per session into a private
directory with the *production* storage (whitenoise's compressed manifest), so
the tests see the same hashed URLs a deployment serves, without touching the
project's ``staticfiles/``.

``uvicorn_server`` starts ``uvicorn twin.asgi:application`` as a subprocess on a
free port, pointed at the test database (as the Celery worker fixture is), so a
browser can drive the real stack. Tests using it need ``transactional_db`` (or
committed data) for the server to see their rows.

``live_stack`` is the whole product as ``scripts/demo`` runs it, for the 3D
dashboard tests: uvicorn (restartable on the same port, for the reconnect
test), the session's real Celery worker and a Celery beat sending the 1 s
telemetry tick, all on the worker's private queue and this session's telemetry
key and channel-layer prefixes. ``dashboard_data`` commits the demo cluster
(``seed-512`` × 8 = 4,096 cards) for one test, ``simulated_agent`` streams it
through ``manage.py telemetry_agent``, ``TelemetryProbe`` posts hand-written
batches through the same ingestion endpoint, and ``chromium_page`` opens
Debian's Chromium with Playwright, recording every console error, page error,
failed request and HTTP error status as a ``Problem``.
"""
from __future__ import annotations

import contextlib
import itertools
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import override_settings
from playwright.sync_api import ConsoleMessage, Page, expect, sync_playwright

# Imported for their module-level setup: this session's telemetry key prefix and
# channel-layer prefix, set in the environment before any subprocess starts.
from tests.conftest import (
    ARTIFACTS,
    ROOT,
    _worker_env,
    asgi_server,
    wait_for_other_sessions_to_close,
    wait_until,
)
from tests.live.conftest import CHANNEL_PREFIX
from tests.telemetry.conftest import PREFIX, flush_namespace
from twin.core.localnet import free_port, stop_process

PRODUCTION_STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

CHROMIUM = "/usr/bin/chromium"
# WebGL and compositing both in SwiftShader (software Vulkan through ANGLE), the same on
# every machine. Not ``--disable-gpu``: its software compositor reads every WebGL frame
# back and Chromium logs "GPU stall due to ReadPixels" as a console warning each time.
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--use-angle=swiftshader", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic",
]
VIEWER_PASSWORD = "viewer-pass-123"


def require_frontend_build() -> Path:
    """The Vite manifest, or a failure that says how to build it."""
    manifest = Path(settings.VITE_MANIFEST)
    if not manifest.exists():
        pytest.fail(
            f"{manifest} is missing: build the frontend first (cd frontend && npm ci && "
            "npm run build; bash scripts/test does it)",
            pytrace=False,
        )
    return manifest


@pytest.fixture(scope="session")
def vite_manifest() -> dict[str, dict]:
    return json.loads(require_frontend_build().read_text())


@pytest.fixture(scope="session")
def collected_static(tmp_path_factory: pytest.TempPathFactory, vite_manifest) -> Path:
    root = tmp_path_factory.mktemp("static")
    with override_settings(STATIC_ROOT=root, STORAGES=PRODUCTION_STORAGES):
        call_command("collectstatic", interactive=False, verbosity=0)
    return root


@pytest.fixture
def production_static(settings, collected_static: Path) -> Path:
    """Serve and resolve static files as a deployment does (manifest + whitenoise)."""
    settings.STATIC_ROOT = collected_static
    settings.STORAGES = PRODUCTION_STORAGES
    return collected_static


@pytest.fixture(scope="session")
def uvicorn_server(django_db_setup, django_db_blocker, collected_static: Path) -> Iterator[str]:
    """Base URL of a real ``uvicorn twin.asgi:application`` on the test database."""
    from django.db import connection

    with django_db_blocker.unblock():
        db_settings = dict(connection.settings_dict)
    env = _worker_env(db_settings)
    env["TWIN_STATIC_ROOT"] = str(collected_static)
    env.pop("TWIN_PUBLIC_READ", None)
    try:
        with asgi_server(env, "uvicorn.log", "/login/", log_level="info") as base:
            yield base
    finally:
        with django_db_blocker.unblock():
            wait_for_other_sessions_to_close(connection)


@pytest.fixture
def allow_sync_db_in_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Playwright's sync API keeps an event loop in this thread; Django would then
    refuse ORM calls as "async unsafe". The test itself is synchronous, so allow it,
    for the tests that ask for this fixture only."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


# --------------------------------------------------------------------------
# the browser
# --------------------------------------------------------------------------

class Problem(str):
    """Something the page did wrong (a console error, a failed request…), with the
    ``time.monotonic()`` it happened at: the reconnect test accepts connection
    errors only while the server is down."""

    at: float

    def __new__(cls, text: str) -> Problem:
        self = super().__new__(cls, text)
        self.at = time.monotonic()
        return self


def watch_problems(page: Page) -> list[Problem]:
    """Record on ``page.problems`` every console error, uncaught exception, failed
    request and HTTP status ≥ 400 the page meets (tests assert it stays empty)."""
    problems: list[Problem] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            problems.append(Problem(f"console {message.type}: {message.text}"))

    page.on("console", on_console)
    page.on("pageerror", lambda exc: problems.append(Problem(f"page error: {exc}")))
    page.on("requestfailed", lambda req: problems.append(
        Problem(f"request failed: {req.method} {req.url} {req.failure}")))
    page.on("response", lambda resp: resp.status >= 400 and problems.append(
        Problem(f"HTTP {resp.status}: {resp.request.method} {resp.url}")))
    page.problems = problems  # type: ignore[attr-defined]
    return problems


@contextlib.contextmanager
def chromium_page(width: int = 1440, height: int = 900) -> Iterator[Page]:
    """A page of headless Chromium (Debian's package, driven by Playwright) whose
    problems are recorded (``watch_problems``). Open it only after the test's data
    is committed: no ORM call should run while Playwright's event loop is active
    (a query from inside it would open a second, never-closed connection)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (bash scripts/test does)",
                    pytrace=False)
    # ``expect`` polls for 5 s by default: less than one status-bar refresh plus a tick.
    expect.set_options(timeout=20_000)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        page.set_default_timeout(20_000)
        watch_problems(page)
        try:
            yield page
        finally:
            context.close()
            browser.close()


def log_in(page: Page, base: str, username: str, password: str) -> None:
    """Log in through the real form, starting from the dashboard's redirect."""
    page.goto(f"{base}/")
    expect(page).to_have_url(f"{base}/login/?next=/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    expect(page).to_have_url(f"{base}/")


def image_stats(page: Page, png: bytes) -> dict[str, Any]:
    """Decode a PNG screenshot in the browser (no imaging library in the test
    environment) and describe it: size, distinct colours, the most common
    colour (the background) and the share of pixels that are not it."""
    import base64

    helper = page.context.new_page()
    try:
        return helper.evaluate(
            """async (b64) => {
                const blob = await (await fetch("data:image/png;base64," + b64)).blob();
                const bitmap = await createImageBitmap(blob);
                const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
                const g = canvas.getContext("2d");
                g.drawImage(bitmap, 0, 0);
                const d = g.getImageData(0, 0, bitmap.width, bitmap.height).data;
                const counts = new Map();
                for (let i = 0; i < d.length; i += 4) {
                    const k = (d[i] << 16) | (d[i + 1] << 8) | d[i + 2];
                    counts.set(k, (counts.get(k) || 0) + 1);
                }
                let background = 0, most = 0;
                for (const [k, n] of counts) if (n > most) { background = k; most = n; }
                const pixels = bitmap.width * bitmap.height;
                return {width: bitmap.width, height: bitmap.height, distinct: counts.size,
                        background: "#" + background.toString(16).padStart(6, "0"),
                        foreground: 1 - most / pixels};
            }""",
            base64.b64encode(png).decode(),
        )
    finally:
        helper.close()


# --------------------------------------------------------------------------
# the live stack: uvicorn (restartable) + the session's worker + beat
# --------------------------------------------------------------------------

class RestartableServer:
    """``uvicorn twin.asgi:application`` on one fixed port that a test can stop and
    start again (its clients expect it back where it was)."""

    def __init__(self, env: dict[str, str], log_stem: str) -> None:
        self.env = env
        self.log_stem = log_stem
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.starts = 0
        self._running: contextlib.ExitStack | None = None

    @property
    def running(self) -> bool:
        return self._running is not None

    def start(self) -> None:
        if self._running is not None:
            return
        self.starts += 1
        log = f"{self.log_stem}.log" if self.starts == 1 else f"{self.log_stem}-{self.starts}.log"
        stack = contextlib.ExitStack()
        stack.enter_context(asgi_server(self.env, log, "/login/", log_level="info",
                                        port=self.port))
        self._running = stack

    def stop(self) -> None:
        """SIGTERM and wait: uvicorn closes its websockets (1012) and exits."""
        if self._running is not None:
            running, self._running = self._running, None
            running.close()


@dataclass
class LiveStack:
    server: RestartableServer
    queue: str
    env: dict[str, str]

    @property
    def base(self) -> str:
        return self.server.base


def stack_env(db_settings: dict[str, Any], queue: str) -> dict[str, str]:
    """Environment of every process of the stack: the test database, Redis, the
    worker's queue, this session's telemetry and channel prefixes."""
    env = _worker_env(db_settings)
    env["TWIN_CELERY_QUEUE"] = queue
    env["TWIN_TELEMETRY_PREFIX"] = PREFIX
    env["TWIN_CHANNEL_PREFIX"] = CHANNEL_PREFIX
    env.pop("TWIN_PUBLIC_READ", None)
    return env


@pytest.fixture(scope="module")
def celery_beat(celery_worker: str, django_db_setup, django_db_blocker,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """``celery beat`` as the demo runs it (``CELERY_BEAT_SCHEDULE``: the 1 s
    telemetry tick that notices stale cards and keeps frames coming when nothing
    arrives, scrapes, the scenario reaper), sending to the session worker's queue."""
    from django.db import connection

    with django_db_blocker.unblock():
        db_settings = dict(connection.settings_dict)
    schedule = tmp_path_factory.mktemp("beat") / "schedule"
    ARTIFACTS.mkdir(exist_ok=True)
    log_path = ARTIFACTS / "celery-beat.log"
    log = open(log_path, "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "twin", "beat", "-s", str(schedule), "-l", "info",
         "--max-interval", "1"],
        cwd=ROOT, env=stack_env(db_settings, celery_worker), stdout=log,
        stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while "Sending due task telemetry-tick" not in log_path.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"celery beat did not start sending ticks; see {log_path}")
            time.sleep(0.2)
        yield
    finally:
        stop_process(proc)
        log.close()


@pytest.fixture(scope="module")
def live_stack(celery_worker: str, celery_beat: None, collected_static: Path,
               django_db_setup, django_db_blocker) -> Iterator[LiveStack]:
    """uvicorn + the real worker + beat on the test database (see the module docstring).
    A test that stops the server gets it started again here if it did not."""
    from django.db import connection

    with django_db_blocker.unblock():
        db_settings = dict(connection.settings_dict)
    env = stack_env(db_settings, celery_worker)
    env["TWIN_STATIC_ROOT"] = str(collected_static)
    server = RestartableServer(env, "live-uvicorn")
    flush_namespace()
    server.start()
    try:
        yield LiveStack(server=server, queue=celery_worker, env=env)
    finally:
        server.stop()
        flush_namespace()
        with django_db_blocker.unblock():
            wait_for_other_sessions_to_close(connection)


@pytest.fixture
def server_back_up(live_stack: LiveStack) -> Iterator[RestartableServer]:
    """The stack's server, started again after the test whatever happened to it."""
    yield live_stack.server
    live_stack.server.start()


# --------------------------------------------------------------------------
# data, telemetry
# --------------------------------------------------------------------------

def http_json(url: str, *, token: str = "", scheme: str = "Token", body: Any = None,
              timeout: float = 10.0) -> tuple[int, Any]:
    """GET (or POST ``body`` as JSON) with an ``Authorization`` header; (status, JSON)."""
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"{scheme} {token}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


@dataclass
class DashboardData:
    """The committed rows a dashboard test works on (read before any browser opens)."""

    base: str
    cluster: int
    username: str
    password: str
    api_token: str  # the viewer's DRF token (reads from the test process)
    agent_token: str  # a telemetry agent of the cluster, for hand-written batches
    supernodes: list[int]
    cards: list[dict[str, Any]]  # the first supernode's cards: id, serial, index, x, y, z, server
    links: dict[frozenset[int], int] = field(default_factory=dict)  # {card pair: Link id}

    def api(self, path: str) -> Any:
        status, body = http_json(f"{self.base}{path}", token=self.api_token)
        assert status == 200, (path, status, body)
        return body


@pytest.fixture
def dashboard_data(transactional_db, live_stack: LiveStack) -> DashboardData:
    """The demo cluster (``build_cluster --preset seed-512 --supernodes 8``: 4,096
    cards in 107 racks), a viewer who may run scenarios, an agent token, committed
    where the stack sees them."""
    from django.contrib.auth.models import Permission, User
    from rest_framework.authtoken.models import Token

    from twin.hardware.models import Card, Cluster, Link, SuperNode
    from twin.telemetry.models import TelemetryAgent

    with open(os.devnull, "w") as devnull:
        call_command("build_cluster", preset="seed-512", supernodes=8, name="demo",
                     no_progress=True, stdout=devnull)
    cluster = Cluster.objects.get(name="demo")
    user = User.objects.create_user("viewer", "viewer@example.com", VIEWER_PASSWORD)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="scenarios"))
    token = Token.objects.create(user=user)
    _, agent_token = TelemetryAgent.issue(cluster, "probe")
    supernodes = list(SuperNode.objects.filter(cluster=cluster).order_by("index")
                      .values_list("pk", flat=True))
    cards = [dict(row, server=row.pop("server_id")) for row in
             Card.objects.filter(supernode_id=supernodes[0]).order_by("index")
             .values("id", "serial", "index", "x", "y", "z", "server_id")]
    links = {frozenset(pair[1:]): pair[0] for pair in Link.objects.filter(
        a_card__supernode_id=supernodes[0], b_card__supernode_id=supernodes[0])
        .values_list("id", "a_card_id", "b_card_id")}
    return DashboardData(base=live_stack.base, cluster=cluster.pk, username=user.username,
                         password=VIEWER_PASSWORD, api_token=token.key,
                         agent_token=agent_token, supernodes=supernodes, cards=cards,
                         links=links)


class TelemetryProbe:
    """Posts hand-written batches (JSON rows) through the real ingestion endpoint
    with an agent token, numbering them as an agent must."""

    def __init__(self, data: DashboardData) -> None:
        self.data = data
        self._seq = itertools.count(1)

    def send(self, readings: dict[int, dict[str, float]]) -> dict[str, Any]:
        """``{card id: {metric: value}}`` → the endpoint's answer (asserted 202)."""
        doc = {"seq": next(self._seq), "ts": time.time(),
               "cards": [{"card": card, **values} for card, values in readings.items()]}
        status, body = http_json(
            f"{self.data.base}/api/telemetry/clusters/{self.data.cluster}/batches/",
            token=self.data.agent_token, scheme="Bearer", body=doc)
        assert status == 202, (status, body)
        assert body["accepted"] == len(readings), body
        return body


@pytest.fixture
def telemetry_probe(dashboard_data: DashboardData) -> TelemetryProbe:
    return TelemetryProbe(dashboard_data)


@pytest.fixture
def simulated_agent(dashboard_data: DashboardData, live_stack: LiveStack) -> Iterator[str]:
    """``manage.py telemetry_agent`` streaming the demo cluster at 2 Hz (no injected
    faults, so nothing random opens an alert), until every card reports."""
    ARTIFACTS.mkdir(exist_ok=True)
    log_path = ARTIFACTS / "telemetry-agent.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "telemetry_agent", "--cluster", "demo", "--url",
             dashboard_data.base, "--hz", "2", "--fault-rate", "0", "--seed", "5"],
            cwd=ROOT, env=live_stack.env, stdout=log, stderr=subprocess.STDOUT)
    try:
        def reporting() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"the telemetry agent exited; see {log_path}")
            live = dashboard_data.api(f"/api/telemetry/clusters/{dashboard_data.cluster}/")
            return live["reporting"] == len(dashboard_data.cards) * len(
                dashboard_data.supernodes)

        wait_until(reporting, 60, "every card of the demo cluster to report")
        yield "demo"
    finally:
        stop_process(proc)  # SIGTERM: the agent finishes its current send and exits


__all__ = [
    "CHROMIUM",
    "CHROMIUM_ARGS",
    "PRODUCTION_STORAGES",
    "DashboardData",
    "LiveStack",
    "Problem",
    "RestartableServer",
    "TelemetryProbe",
    "allow_sync_db_in_event_loop",
    "celery_beat",
    "chromium_page",
    "collected_static",
    "dashboard_data",
    "http_json",
    "image_stats",
    "live_stack",
    "log_in",
    "production_static",
    "require_frontend_build",
    "server_back_up",
    "simulated_agent",
    "stack_env",
    "telemetry_probe",
    "uvicorn_server",
    "vite_manifest",
    "watch_problems",
]
