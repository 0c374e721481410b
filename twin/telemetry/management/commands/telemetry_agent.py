"""``manage.py telemetry_agent``: stream simulated card telemetry into the twin over HTTP.

It behaves like a real agent: it holds a token, sends numbered batches to the
public ingest endpoints (columnar msgpack, JSON rows, or DCGM-exporter text)
and retries a passing failure — a 5xx, a 429, a refused connection, as when it
starts before the server, its Redis or its database — with the same sequence
number and a backoff (0.5 s doubling to 30 s), for as long as it takes. It exits
(one line, non-zero status) only on a 4xx that retrying cannot fix: a token the
server refuses even after reading it again, another cluster's token (403), a
cluster that is gone (404, 410).

The token: ``--token``, or ``--token-file`` (also ``TWIN_AGENT_TOKEN_FILE``), read
again on a 401 so that a rotated token written there is taken up without a
restart, or ``TWIN_AGENT_TOKEN``. With none of them it creates (or re-keys) the
agent ``--agent-name`` of the cluster through the ORM, and re-keys it again when
the server refuses its token (a rotation whose grace period ended): the demo's
agent so follows a rotation by itself. Re-keying moves the token other processes
use for that name into the rotation's grace period (``TelemetryAgent.set_new_token``).

    python manage.py telemetry_agent --cluster demo --hz 1
    python manage.py telemetry_agent --cluster demo --format dcgm --duration 60
    python manage.py telemetry_agent --cluster demo --batches 10   # ten batches taken, then stop
"""
from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError

from twin.telemetry.client import AgentClient, Answer, Backoff, TokenSource, is_transient
from twin.telemetry.metrics import METRICS, N_METRICS
from twin.telemetry.simulator import INLET_C, Simulator

FORMATS = ("native", "rows", "dcgm")
COOLANT_POLL_S = 5.0
"""How often the agent reads its cards' coolant from the live plant (GET …/coolant/)."""
DEFAULT_CHUNK = {"native": 65_536, "rows": 1_024, "dcgm": 256}


class Command(BaseCommand):
    help = ("Simulate the cards of a cluster and send their telemetry through the twin's "
            "HTTP ingest endpoint with an agent token.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", required=True, help="Cluster name (or id).")
        parser.add_argument("--url", default="http://127.0.0.1:8000",
                            help="Base URL of the twin (default %(default)s).")
        parser.add_argument("--hz", type=float, default=1.0,
                            help="Samples per card per second (default %(default)s).")
        parser.add_argument("--format", choices=FORMATS, default="native",
                            help="native: columnar msgpack (fast); rows: JSON per-card "
                                 "objects; dcgm: Prometheus text as the DCGM exporter writes it.")
        parser.add_argument("--duration", type=float, default=0.0,
                            help="Stop after this many seconds (0: run until stopped).")
        parser.add_argument("--batches", type=int, default=0,
                            help="Stop once the twin has taken this many batches (0: no "
                                 "limit; with --duration, whichever comes first).")
        parser.add_argument("--token", default="", help="Agent token (default: create/re-key "
                                                        "--agent-name through the database).")
        parser.add_argument("--token-file", default=os.environ.get("TWIN_AGENT_TOKEN_FILE", ""),
                            help="File holding the agent token, read again when the server "
                                 "refuses it (a rotation); with neither --token nor "
                                 "TWIN_AGENT_TOKEN, the re-keyed token is written there.")
        parser.add_argument("--agent-name", default="",
                            help="Agent to create or re-key (default: sim-<cluster>).")
        parser.add_argument("--fault-rate", type=float, default=2e-5,
                            help="Injected faults per card per second (default %(default)s).")
        parser.add_argument("--chunk", type=int, default=0,
                            help="Cards per POST (default: 65536 native, 1024 rows, 256 dcgm).")
        parser.add_argument("--backoff-max", type=float, default=30.0,
                            help="Longest pause between two tries while the twin is away "
                                 "(s; the pause starts at 0.5 s and doubles; default "
                                 "%(default)s).")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--quiet", action="store_true", help="Print only errors.")

    def handle(self, *args: Any, **opts: Any) -> None:
        from twin.hardware.models import Card, Cluster
        from twin.telemetry.models import TelemetryAgent

        if opts["hz"] <= 0 or opts["hz"] > 50:
            raise CommandError("--hz must be in (0, 50]")
        if opts["batches"] < 0:
            raise CommandError("--batches must be 0 (no limit) or more")
        most = int(opts["batches"]) or None
        self.quiet = opts["quiet"]
        self._said = {}
        self.backoff_max = max(0.5, float(opts["backoff_max"]))
        stop = {"flag": False}
        signal.signal(signal.SIGTERM, lambda *_: stop.update(flag=True))
        deadline = time.monotonic() + opts["duration"] if opts["duration"] > 0 else float("inf")
        self.should_stop = (  # type: ignore[method-assign]
            lambda: stop["flag"] or time.monotonic() >= deadline)
        name = str(opts["cluster"])
        cluster = self._from_db(lambda: (
            Cluster.objects.filter(name=name).first()
            or (Cluster.objects.filter(pk=int(name)).first() if name.isdigit() else None)))
        if cluster is None:
            raise CommandError(f"no cluster named {name!r}; build one first: manage.py "
                               f"build_cluster --preset seed-512 --name {name}")
        tokens = TokenSource(opts["token"], opts["token_file"] or None)
        if not tokens.token:
            agent_name = opts["agent_name"] or f"sim-{cluster.name}"[:100]

            def rekey() -> str:
                def write() -> str:
                    agent = TelemetryAgent.objects.filter(cluster=cluster,
                                                          name=agent_name).first()
                    if agent is None:
                        return TelemetryAgent.issue(cluster, agent_name,
                                                    description="telemetry_agent command")[1]
                    token = agent.set_new_token()
                    agent.is_active = True
                    agent.save()
                    return token

                token = self._from_db(write)
                self._say(f"agent {agent_name!r}: token (re)issued through the database")
                return token

            tokens = TokenSource("", opts["token_file"] or None, reissue=rekey)
            tokens.refresh()
        client = AgentClient(opts["url"], tokens)
        fmt = opts["format"]
        chunk = opts["chunk"] or DEFAULT_CHUNK[fmt]
        layout = self._wait_for_layout(client, cluster.pk)
        if layout is None:
            client.close()
            return
        card_ids = np.array(layout["card_ids"], dtype=np.int64)
        rows = {r[0]: r for r in self._from_db(lambda: list(
            Card.objects.filter(pk__in=card_ids.tolist()).values_list(
                "id", "accelerator__tdp_w", "accelerator__idle_w", "accelerator__hbm_gib",
                "server_id", "uuid", "server__hostname", "slot", "accelerator__name")))}
        meta = [rows[int(c)] for c in card_ids]
        sim = Simulator(np.array([m[1] for m in meta], float), np.array([m[2] for m in meta],
                                                                         float),
                        np.array([m[3] for m in meta], float), np.array([m[4] for m in meta]),
                        seed=opts["seed"], fault_rate=opts["fault_rate"])
        self._say(f"agent for cluster {cluster.name} (id {cluster.pk}): {len(card_ids):,} cards, "
                  f"{opts['hz']:g} Hz, format {fmt}, {chunk} cards per POST, to {opts['url']}")
        period = 1.0 / opts["hz"]
        backoff = Backoff(0.5, self.backoff_max)
        next_at = time.monotonic()
        seq = 0
        totals = {"posts": 0, "taken": 0, "accepted": 0, "rejected": 0, "errors": 0}
        last_report = time.monotonic()
        last_coolant = float("-inf")
        try:
            while not self.should_stop() and (most is None or totals["taken"] < most):
                if time.monotonic() - last_coolant >= COOLANT_POLL_S:
                    last_coolant = time.monotonic()
                    self._read_coolant(client, cluster.pk, layout, sim)
                    self._read_caps(client, cluster.pk, layout, sim)
                values, _reporting = sim.step(period)
                ts = time.time()
                failing = False
                for start in range(0, len(card_ids), chunk):
                    seq += 1
                    end = min(start + chunk, len(card_ids))
                    answer = self._send(client, fmt, cluster.pk, layout, seq, ts, start, end,
                                        values, card_ids, meta)
                    if answer is None or is_transient(answer.status):
                        # The server, its Redis or its database is away: try the next
                        # round after a growing pause instead of hammering it.
                        totals["errors"] += 1
                        failing = True
                        pause = backoff.next(answer.retry_after if answer else None)
                        self._say_once("away", f"the twin is not taking batches ("
                                       f"{answer.status if answer else 'no connection'}); "
                                       f"retrying with a backoff (now {pause:g} s)")
                        self._sleep(pause)
                        break
                    if answer.status == 409:  # the hardware changed: new card order
                        layout = self._wait_for_layout(client, cluster.pk)
                        if layout is None:
                            return
                        break
                    if answer.status in (401, 403, 404, 410):  # retrying cannot fix these
                        raise CommandError(self._refused(answer, cluster.name))
                    totals["posts"] += 1
                    if answer.status >= 300:
                        totals["errors"] += 1
                        self.stderr.write(f"POST seq {seq}: {answer.status} {answer.body}")
                        continue
                    totals["taken"] += 1
                    totals["accepted"] += int(answer.body.get("accepted", 0))
                    totals["rejected"] += int(answer.body.get("rejected_total", 0))
                if not failing:
                    backoff.reset()
                    if self._said.pop("away", None):
                        self._say("the twin takes batches again")
                if time.monotonic() - last_report >= 10:
                    last_report = time.monotonic()
                    self._say(f"seq {seq}: {totals['posts']} posts, {totals['accepted']:,} "
                              f"card-samples accepted, {totals['rejected']} values rejected, "
                              f"{totals['errors']} errors")
                next_at += period
                pause = next_at - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                else:
                    next_at = time.monotonic()
        except KeyboardInterrupt:
            pass
        finally:
            client.close()
        self._say(f"stopped after seq {seq}: {totals['accepted']:,} card-samples accepted, "
                  f"{totals['rejected']} values rejected, {totals['errors']} errors")

    # ------------------------------------------------------------------
    quiet = False
    backoff_max = 30.0
    _said: dict[str, bool]

    def should_stop(self) -> bool:
        """Replaced in :meth:`handle` (SIGTERM, ``--duration``)."""
        return False

    def _say(self, text: str) -> None:
        if not self.quiet:
            self.stdout.write(text)

    def _read_coolant(self, client: AgentClient, cluster_id: int, layout: dict[str, Any],
                      sim: Simulator) -> None:
        """Heat the cards from their rack's coolant in the live plant (if it has one)."""
        try:
            answer = client.coolant(cluster_id)
        except OSError:
            return
        inlet = answer.body.get("inlet_c") if answer.status == 200 else None
        if inlet is None or answer.body.get("layout") != layout.get("layout") \
                or len(inlet) != sim.n:
            return
        sim.inlet_c = np.array([INLET_C if v is None else float(v) for v in inlet])

    def _read_caps(self, client: AgentClient, cluster_id: int, layout: dict[str, Any],
                   sim: Simulator) -> None:
        """Obey live power caps (``GET …/caps/``): none served, none held."""
        try:
            answer = client.caps(cluster_id)
        except OSError:
            return
        caps = answer.body.get("caps_w") if answer.status == 200 else None
        if caps is None or answer.body.get("layout") != layout.get("layout") \
                or len(caps) != sim.n:
            sim.caps_w = None
            return
        sim.caps_w = np.array([float(v) for v in caps])

    def _say_once(self, key: str, text: str) -> None:
        """Say ``text`` once per spell of trouble (no line per retry)."""
        if not self._said.get(key):
            self._said[key] = True
            self._say(text)

    def _sleep(self, seconds: float) -> None:
        """Sleep, waking early when the command is told to stop."""
        until = time.monotonic() + seconds
        while not self.should_stop() and time.monotonic() < until:
            time.sleep(min(0.2, until - time.monotonic()))

    def _from_db(self, query: Callable[[], Any]) -> Any:
        """Run an ORM call, retrying with a backoff while the database is away."""
        from django.db import close_old_connections

        backoff = Backoff(0.5, self.backoff_max)
        while True:
            try:
                return query()
            except DatabaseError as exc:
                if self.should_stop():
                    raise CommandError(f"the database is away: {exc}".strip()) from exc
                self._say_once("db", f"the database is away ({str(exc).strip()[:120]}); "
                                     f"retrying with a backoff")
                close_old_connections()
                self._sleep(backoff.next())

    @staticmethod
    def _refused(answer: Answer, cluster: str) -> str:
        detail = " ".join(str(answer.body.get("detail", "")).split()) or "no detail"
        return f"the twin refused the agent of cluster {cluster!r} ({answer.status}): {detail}"

    def _wait_for_layout(self, client: AgentClient, cluster_id: int) -> dict[str, Any] | None:
        """The layout, waiting with a backoff for as long as the server is away or answers
        a passing error (5xx, 429); None if told to stop meanwhile."""
        from twin.hardware.models import Cluster

        backoff = Backoff(0.5, self.backoff_max)
        reread = False
        while not self.should_stop():
            try:
                answer = client.layout(cluster_id)
            except OSError as exc:
                self._say_once("layout", f"the twin at {client.host}:{client.port} does not "
                                         f"answer ({exc}); retrying with a backoff")
                self._sleep(backoff.next())
                continue
            if answer.status == 200:
                self._said.pop("layout", None)
                return answer.body
            if answer.status == 401 and not reread and client.tokens.refresh():
                reread = True
                continue
            if not is_transient(answer.status):
                name = self._from_db(lambda: Cluster.objects.filter(pk=cluster_id)
                                     .values_list("name", flat=True).first()) or cluster_id
                raise CommandError(self._refused(answer, str(name)))
            self._say_once("layout", f"the twin answers {answer.status} "
                                     f"({answer.body.get('detail', '')}); retrying with a "
                                     f"backoff")
            self._sleep(backoff.next(answer.retry_after))
        return None

    def _send(self, client: AgentClient, fmt: str, cluster_id: int, layout: dict[str, Any],
              seq: int, ts: float, start: int, end: int, values: np.ndarray,
              card_ids: np.ndarray, meta: list[tuple]) -> Any:
        block = values[:, start:end]
        try:
            if fmt == "native":
                doc = {"seq": seq, "ts": ts,
                       "cards": {"range": [start, end - start], "layout": layout["layout"]},
                       "columns": {m.key: block[m.index].astype("<f4").tobytes()
                                   for m in METRICS if np.isfinite(block[m.index]).any()}}
                return client.send_with_retry(lambda: client.post_batch(cluster_id, doc))
            if fmt == "rows":
                cards = []
                for k in range(end - start):
                    row = {"card": int(card_ids[start + k])}
                    for i in range(N_METRICS):
                        v = block[i, k]
                        if v == v:
                            row[METRICS[i].key] = round(float(v), 3)
                    if len(row) > 1:
                        cards.append(row)
                doc = {"seq": seq, "ts": ts, "cards": cards}
                return client.send_with_retry(lambda: client.post_batch(cluster_id, doc, "json"))
            text = dcgm_exposition(block, meta[start:end])
            return client.send_with_retry(lambda: client.post_exposition(cluster_id, text, seq))
        except OSError:
            return None


def dcgm_exposition(block: np.ndarray, meta: list[tuple]) -> str:
    """Render values as a DCGM exporter would (labels gpu, UUID, device, modelName,
    Hostname; units converted back to DCGM's)."""
    lines: list[str] = []
    labels = [f'gpu="{m[7]}",UUID="GPU-{m[5]}",device="nvidia{m[7]}",modelName="{m[8]}",'
              f'Hostname="{m[6]}",DCGM_FI_DRIVER_VERSION="550.54.15"' for m in meta]
    for metric in METRICS:
        if not metric.dcgm:
            continue
        field = metric.dcgm[0]
        row = block[metric.index]
        lines.append(f"# HELP {field} {metric.label} ({metric.unit}).")
        lines.append(f"# TYPE {field} gauge")
        for k, value in enumerate(row):
            if value == value:
                raw = float(value) / metric.dcgm_scale
                text = f"{raw:.0f}" if metric.dcgm_scale != 1.0 and raw > 1e4 else f"{raw:.6g}"
                lines.append(f"{field}{{{labels[k]}}} {text}")
    return "\n".join(lines) + "\n"
