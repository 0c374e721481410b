"""Ingestion endpoints: plain Django views on the hot path, agent-token auth.

These are not DRF views on purpose: a columnar batch of 65,536 cards is a
6.8 MB body that must be read once, parsed with numpy and handed to Redis;
DRF's parsers and content negotiation would add copies and nothing useful.

Authentication: ``Authorization: Bearer <token>`` (or ``Token <token>``) with
a ``TelemetryAgent`` token. No or an unknown token → 401 with
``WWW-Authenticate: Bearer``; a token of another cluster's agent → 403, and so is
the token of an agent whose owner (``created_by``) may not change its cluster
(per-cluster grants, ``twin.core.access``).
Token lookups are cached per process for ``TOKEN_CACHE_S`` seconds, so a
deactivated or rotated token stops working within that time. A rotation keeps the
replaced token working until ``previous_token_expires`` (its grace period); after
that it is answered 401 saying when it was replaced and since when it no longer
works, and the attempt is noted on the agent (``old_token_refused_at``, for the
alert of ``twin.telemetry.agent_watch``).

A cluster that is not in the database answers 410 Gone when it was deleted
(its agents went with it; ``state.was_deleted``) and 404 when it never was,
to any request that carries a token — checked against the database on every
request, so neither the token cache nor a layout still published in Redis
lets a batch for a deleted cluster through.

Answers (JSON): 202 with ``accepted`` (card-samples), ``values``, ``rejected``
(each sample with its reason, at most ``ingest.MAX_LISTED`` listed) and
``rejected_total``, the sequence bookkeeping (``duplicate``, ``gap``); 200 for
a duplicate (nothing stored); 400 malformed (nothing stored; a sequence number
outside 0 … 2^63 − 1 is one); 409 stale layout version; 413 body too large; 415
wrong content type; 503 + ``Retry-After`` when the workers are behind (or the
agent row could not be written after the batch was queued: see :func:`_finish`).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import redis
from django.conf import settings
from django.contrib.auth.models import User
from django.db import DatabaseError, transaction
from django.db.models import Case, F, Q, Value, When
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from twin.core.access import access_for
from twin.core.perprocess import TtlCache
from twin.telemetry import enqueue, ingest, prometheus, remote_write, state, trace
from twin.telemetry.models import TelemetryAgent, hash_token

__all__ = ["AgentAuth", "authenticate_agent", "ingest_batch", "ingest_facility",
           "ingest_prometheus", "ingest_remote_write", "layout_view", "coolant_view",
           "caps_view", "whoami"]

logger = logging.getLogger(__name__)

TOKEN_CACHE_S = 5.0
COUNTER_MAX = 2**63 - 1
"""The largest value of the agent row's counters (PositiveBigIntegerField)."""
_cache: TtlCache[AgentAuth | str] = TtlCache(max_entries=10_000)
"""Token digest → the agent (or why the token is refused), per process."""


@dataclass(frozen=True)
class AgentAuth:
    agent_id: int
    cluster_id: int
    name: str
    #: The agent's owner (the user who created it) may change its cluster: without
    #: it the agent's batches are refused (``twin.core.access``; no owner: allowed).
    owner_may_change: bool = True


def _error(status: int, detail: str, **extra: Any) -> JsonResponse:
    response = JsonResponse({"detail": detail, **extra}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="telemetry"'
    return response


def _token_of(request: HttpRequest) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() in ("bearer", "token") and token.strip():
        return token.strip()
    return None


def authenticate_agent(request: HttpRequest) -> AgentAuth | JsonResponse:
    token = _token_of(request)
    if not token:
        return _error(401, "send the agent's token: Authorization: Bearer <token> (create an "
                           "agent under /api/telemetry/agents/ to get one)")
    digest = hash_token(token)
    auth = _cache.get(digest)
    if auth is None:
        auth, until = _lookup(digest)
        _cache.put(digest, auth, min(TOKEN_CACHE_S, until))
    if isinstance(auth, str):
        return _error(401, auth)
    return auth


def _lookup(digest: str) -> tuple[AgentAuth | str, float]:
    """The agent a token's digest belongs to (its current token, or the replaced one
    within its grace period), with how long that holds in seconds; else why not."""
    now = timezone.now()
    row = (TelemetryAgent.objects
           .filter(Q(token_hash=digest) | Q(previous_token_hash=digest,
                                            previous_token_expires__gt=now), is_active=True)
           .values("pk", "cluster_id", "name", "token_hash", "previous_token_expires",
                   "created_by").first())
    if row is not None:
        until = TOKEN_CACHE_S if row["token_hash"] == digest else \
            (row["previous_token_expires"] - now).total_seconds()
        owner = (User.objects.filter(pk=row["created_by"]).first()
                 if row["created_by"] is not None else None)
        may_change = owner is None or access_for(owner).can_change(row["cluster_id"])
        return AgentAuth(row["pk"], row["cluster_id"], row["name"], may_change), until
    old = (TelemetryAgent.objects.filter(previous_token_hash=digest)
           .values("pk", "name", "token_rotated_at", "previous_token_expires").first())
    if old is None:
        return "invalid or deactivated agent token", TOKEN_CACHE_S
    TelemetryAgent.objects.filter(pk=old["pk"]).update(old_token_refused_at=now)
    return (f"invalid or deactivated agent token: the token of agent {old['name']!r} was "
            f"replaced at {old['token_rotated_at']:%Y-%m-%d %H:%M:%S} UTC and stopped working "
            f"at {old['previous_token_expires']:%Y-%m-%d %H:%M:%S} UTC; send the new token "
            f"(the rotation showed it once)"), TOKEN_CACHE_S


#: Larger ids are no database row (and would overflow the database's integer).
MAX_ID = 2**63 - 1


def _missing_cluster(cluster_id: int) -> JsonResponse:
    """410 for a deleted cluster, 404 for one that never was."""
    try:
        deleted = state.was_deleted(cluster_id)
    except redis.RedisError:
        deleted = False  # still true: there is no such cluster
    if deleted:
        return _error(410, f"cluster {cluster_id} was deleted, and its agents with it: stop "
                           f"sending its telemetry")
    return _error(404, f"no cluster {cluster_id}")


def _cluster_gone(cluster_id: int) -> JsonResponse | None:
    """The answer when ``cluster_id`` is not in the database (one primary-key lookup)."""
    from twin.hardware.models import Cluster

    if 0 < int(cluster_id) <= MAX_ID and Cluster.objects.filter(pk=cluster_id).exists():
        return None
    return _missing_cluster(cluster_id)


def _authorize(request: HttpRequest, cluster_id: int) -> AgentAuth | JsonResponse:
    auth = authenticate_agent(request)
    if isinstance(auth, JsonResponse) and _token_of(request) is None:
        return auth
    gone = _cluster_gone(cluster_id)
    if gone is not None:
        return gone
    if isinstance(auth, JsonResponse):
        return auth
    if auth.cluster_id != int(cluster_id):
        return _error(403, f"agent {auth.name!r} may only send telemetry for cluster "
                           f"{auth.cluster_id}, not {cluster_id}")
    if not auth.owner_may_change:
        return _error(403, f"agent {auth.name!r} belongs to a user who may no longer change "
                           f"cluster {auth.cluster_id}: ask an administrator for a 'change' "
                           f"grant, or create the agent as a user who has one")
    return auth


def _max_body() -> int:
    return int(getattr(settings, "TELEMETRY_MAX_BODY_BYTES",
                       settings.DATA_UPLOAD_MAX_MEMORY_SIZE))


def _read_body(request: HttpRequest) -> bytes | JsonResponse:
    limit = _max_body()
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return _error(400, "bad Content-Length")
    if declared > limit:
        return _error(413, f"the body is {declared:,} bytes; the limit is {limit:,}: send "
                           "fewer cards per batch", limit=limit)
    body = request.read(limit + 1)
    if len(body) > limit:
        return _error(413, f"the body is over the {limit:,}-byte limit: send fewer cards "
                           "per batch", limit=limit)
    return body


def _saturating_add(name: str, amount: int) -> Any:
    """``name + amount`` for a counter column, held at the column's maximum instead
    of overflowing it (a gap can be up to 2^63 − 2 batches on its own)."""
    if amount <= 0:
        return F(name)
    return Case(When(**{f"{name}__gt": COUNTER_MAX - amount}, then=Value(COUNTER_MAX)),
                default=F(name) + amount)


def _record(auth: AgentAuth, seq: int | None, batch: ingest.Batch,
            result: enqueue.EnqueueResult) -> None:
    """Bookkeeping on the agent row: one UPDATE per batch.

    ``last_sequence`` is set to the number Redis holds after the script
    (``result.current``), for duplicates too: a row left behind by a failed write
    is repaired by the agent's next batch, whatever that batch is.
    """
    updates: dict[str, Any] = {"last_seen": timezone.now(), "batches": F("batches") + 1}
    if seq is not None and result.current is not None:
        updates["last_sequence"] = result.current
    if result.status == "duplicate":
        updates["duplicates"] = F("duplicates") + 1
    else:
        if result.status in ("queued", "applied", "empty"):
            updates["samples"] = F("samples") + batch.accepted_cards()
            updates["rejected"] = F("rejected") + batch.rejected_total
        if result.gap:
            updates["gaps"] = F("gaps") + 1
            updates["missed_batches"] = _saturating_add("missed_batches", result.gap)
        if result.restart:
            updates["restarts"] = F("restarts") + 1
    TelemetryAgent.objects.filter(pk=auth.agent_id).update(**updates)


def _finish(auth: AgentAuth, seq: int | None, batch: ingest.Batch,
            extra: dict[str, Any] | None = None, *, queued_status: int = 202) -> JsonResponse:
    """Enqueue the batch and record it on the agent row.

    Redis and the row move together: Redis decides (the script checks the
    sequence number and appends the batch atomically), and the row *follows*
    it. Both happen in this request, inside one database transaction that
    first locks the agent's row, so two requests of one agent update the row in
    the order their scripts ran. The row can always be re-derived: each answer
    writes Redis's number into it (duplicates included), and when Redis has lost
    the number (a restart without persistence) the script is given the row's.
    Should the row's UPDATE fail after the script queued the batch, the batch
    stays queued (it was accepted, and un-queuing it could race a worker that
    already read it); the agent is told to resend the same batch, which the
    script then answers as a duplicate while the row catches up.
    """
    result: enqueue.EnqueueResult | None = None
    try:
        with transaction.atomic():
            stored = (TelemetryAgent.objects.select_for_update().filter(pk=auth.agent_id)
                      .values_list("last_sequence", flat=True).first())
            result = enqueue.enqueue(batch, agent_id=auth.agent_id, seq=seq,
                                     last_known_seq=lambda: stored)
            if result.status != "busy":
                _record(auth, seq, batch, result)
    except DatabaseError:
        if result is None:
            raise  # nothing was queued: the database is down before anything happened
        logger.exception("agent %s: batch queued but its row not updated", auth.agent_id)
        _kick(result, batch)
        response = _error(503, "the batch is queued but the agent's bookkeeping could not "
                               "be written; resend this batch (same seq): the resend is "
                               "answered as a duplicate and brings the bookkeeping up to "
                               "date")
        response["Retry-After"] = "1"
        return response
    if result.status == "busy":
        response = _error(503, "the telemetry workers are behind; retry this batch (same seq) "
                               "shortly")
        response["Retry-After"] = "1"
        return response
    _kick(result, batch)
    duplicate = result.status == "duplicate"
    body = {
        "seq": seq, "duplicate": duplicate, "gap": result.gap, "restart": result.restart,
        "accepted": 0 if duplicate else batch.accepted_cards(),
        "values": 0 if duplicate else batch.accepted_values(),
        "rejected": [] if duplicate else batch.rejected,
        "rejected_total": 0 if duplicate else batch.rejected_total,
        **({"dropped": batch.dropped} if batch.dropped and not duplicate else {}),
        **(extra or {}),
    }
    return JsonResponse(body, status=200 if duplicate else queued_status)


def _kick(result: enqueue.EnqueueResult, batch: ingest.Batch) -> None:
    """Start the drain task for the slot the script claimed, if any; after a batch
    applied here (``TELEMETRY_APPLY_ON_INGEST``), see that a tick follows."""
    from twin.telemetry.tasks import after_enqueue

    after_enqueue(result, batch.cluster_id)


@csrf_exempt
@require_POST
def ingest_batch(request: HttpRequest, cluster_id: int) -> HttpResponse:
    """Native batches: row form or columnar, JSON or msgpack (see ``ingest``)."""
    span = trace.Span("ingest", cluster=cluster_id)
    auth = _authorize(request, cluster_id)
    if isinstance(auth, JsonResponse):
        return auth
    span.mark("auth")
    body = _read_body(request)
    if isinstance(body, JsonResponse):
        return body
    span.mark("body")
    try:
        doc = ingest.decode_document(body, request.content_type or "")
        seq = ingest.parse_seq(doc)
        batch = ingest.parse_native(doc, state.layout(cluster_id))
    except ingest.BadBatch as exc:
        return JsonResponse(exc.as_dict(), status=exc.status)
    except KeyError:  # deleted since the check above
        return _missing_cluster(cluster_id)
    span.mark("parse")
    response = _finish(auth, seq, batch)
    span.mark("enqueue")
    if trace.enabled():
        from twin.telemetry.config import redis_client

        span.finish(redis_client(), batch_ts=batch.ts, status=response.status_code)
    return response


@csrf_exempt
@require_POST
def ingest_facility(request: HttpRequest, cluster_id: int) -> HttpResponse:
    """Facility readings (CDU, PDU, power shelf: ``twin.facility.batches``): each
    element's reading is stored as its latest (``twin.facility.readings``) and stands in
    for the model at the next ticks until it expires. 202 with what was stored; 400 with
    ``errors`` per field (nothing stored); 415 not JSON; 401/403/404/410/413 as batches.
    """
    auth = _authorize(request, cluster_id)
    if isinstance(auth, JsonResponse):
        return auth
    ctype = (request.content_type or "").lower()
    if ctype not in ("application/json", ""):
        return _error(415, f"unsupported content type {ctype!r}: send application/json")
    body = _read_body(request)
    if isinstance(body, JsonResponse):
        return body
    from twin.facility import batches, readings
    from twin.telemetry.config import conf, redis_client

    now = time.time()
    ttl = readings.ttl_s()
    try:
        got = batches.parse_batch(body, cluster_id, now, ttl)
    except batches.BadFacilityBatch as exc:
        return JsonResponse(exc.as_dict(), status=400)
    stored = readings.store(redis_client(), conf().prefix, cluster_id, got, now, ttl)
    TelemetryAgent.objects.filter(pk=auth.agent_id).update(last_seen=timezone.now())
    return JsonResponse({"accepted": stored, "ttl_s": ttl,
                         "elements": [f"{rd.chain}:{rd.key}" for rd in got]}, status=202)


@csrf_exempt
@require_POST
def ingest_prometheus(request: HttpRequest, cluster_id: int) -> HttpResponse:
    """Prometheus text exposition (what a DCGM exporter serves), pushed.

    An optional ``X-Telemetry-Seq`` header gives it a sequence number.
    """
    auth = _authorize(request, cluster_id)
    if isinstance(auth, JsonResponse):
        return auth
    ctype = (request.content_type or "").lower()
    if ctype not in ("text/plain", "application/openmetrics-text", ""):
        return _error(415, f"unsupported content type {ctype!r}: send the exposition as "
                           "text/plain; version=0.0.4")
    body = _read_body(request)
    if isinstance(body, JsonResponse):
        return body
    seq_header = request.headers.get("X-Telemetry-Seq")
    seq = None
    if seq_header is not None:
        try:
            seq = ingest.parse_seq_header(seq_header.strip())
        except ingest.BadBatch as exc:
            return JsonResponse(exc.as_dict(), status=exc.status)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return _error(400, "the exposition is not UTF-8 text")
    samples, broken, n_broken = prometheus.parse_exposition(text)
    if not samples and n_broken:
        return _error(400, "no line of the body is a Prometheus sample", broken_lines=broken,
                      broken_total=n_broken)
    try:
        lay = state.layout(cluster_id)
    except KeyError:  # deleted since the check above
        return _missing_cluster(cluster_id)
    batch = prometheus.batch_from_exposition(samples, lay)
    return _finish(auth, seq, batch, {"broken_lines": broken, "broken_total": n_broken,
                                      "samples": len(samples)})


REMOTE_WRITE_TYPES = ("application/x-protobuf", "")
REMOTE_WRITE_INFLATION = 8
"""How much larger than the body limit a remote-write body may be once decompressed
(snappy shrinks label-heavy protobuf 5–10 times)."""


@csrf_exempt
@require_POST
def ingest_remote_write(request: HttpRequest, cluster_id: int) -> HttpResponse:
    """Prometheus remote write 1.0 (``twin.telemetry.remote_write``), from Prometheus,
    vmagent or any compatible sender configured with the agent's token.

    Answers as the specification asks senders to read them: **200** stored (with
    the usual counts; a sender only looks at the class), **4xx** for what a
    resend cannot fix — 400 a body that is no snappy-compressed ``WriteRequest``
    (the reason in ``detail``), 401/403 the token, 404/410 the cluster, 413 too
    large, 415 a content type or encoding other than ``application/x-protobuf`` +
    ``snappy`` (remote write 2.0 senders fall back to 1.0 on a 415) — and **503**
    + ``Retry-After`` only for what a resend can fix (workers behind; Redis or the
    database away). Series of other metric families are ignored (``dropped``).
    """
    auth = _authorize(request, cluster_id)
    if isinstance(auth, JsonResponse):
        return auth
    ctype = (request.content_type or "").lower()
    if ctype not in REMOTE_WRITE_TYPES or "proto=io.prometheus.write.v2" in (
            request.headers.get("Content-Type") or ""):
        return _error(415, f"unsupported content type {request.headers.get('Content-Type')!r}: "
                           "remote write 1.0 sends application/x-protobuf "
                           "(prometheus.WriteRequest)")
    encoding = (request.headers.get("Content-Encoding") or "").strip().lower()
    if encoding != "snappy":
        return _error(415, f"unsupported content encoding {encoding or 'none'!r}: remote "
                           "write bodies are snappy-compressed (Content-Encoding: snappy)")
    body = _read_body(request)
    if isinstance(body, JsonResponse):
        return body
    try:
        limit = _max_body() * REMOTE_WRITE_INFLATION
        size = remote_write.uncompressed_length(body)
        if size > limit:
            return _error(413, f"the request decompresses to {size:,} bytes; the limit is "
                               f"{limit:,}: lower queue_config.max_samples_per_send",
                          limit=limit)
        samples, stale, counts = remote_write.decode_samples(remote_write.decompress(body))
    except remote_write.BadWriteRequest as exc:
        return _error(400, str(exc))
    try:
        lay = state.layout(cluster_id)
    except KeyError:  # deleted since the check above
        return _missing_cluster(cluster_id)
    batch = prometheus.batch_from_exposition(samples, lay, where="series")
    if stale:
        batch.dropped["stale_marker"] = stale
    return _finish(auth, None, batch, counts, queued_status=200)


def _refuse_reader(request: HttpRequest, cluster_id: int) -> JsonResponse | None:
    """Why this reader may not read the cluster's live layout, coolant or caps, or None:
    an agent of another cluster or a bad token (``_authorize``); for a logged-in user,
    a cluster they may not see answers as an unknown one (404), a deleted one 410."""
    if not (request.user.is_authenticated and request.user.is_active):
        auth = _authorize(request, cluster_id)
        return auth if isinstance(auth, JsonResponse) else None
    if not access_for(request.user).can_see(cluster_id):  # another tenant's: unknown
        return _error(404, f"no cluster {cluster_id}")
    return _cluster_gone(cluster_id)


@require_GET
def layout_view(request: HttpRequest, cluster_id: int) -> HttpResponse:
    """The card order for columnar batches: ``{"layout", "count", "card_ids"}``.

    For an agent of this cluster (token) or a logged-in user.
    """
    refused = _refuse_reader(request, cluster_id)
    if refused is not None:
        return refused
    try:
        lay = state.layout(cluster_id)
    except KeyError:
        return _missing_cluster(cluster_id)
    return JsonResponse({"cluster": lay.cluster_id, "layout": lay.version, "count": lay.n,
                         "card_ids": lay.card_ids.tolist()})


@require_GET
def coolant_view(request: HttpRequest, cluster_id: int) -> HttpResponse:
    """Each card's coolant supply (liquid racks) or inlet air (air racks) in the live
    plant at the last tick, in the layout's card order (null: no plant, or not yet):
    ``{"layout", "ts", "inlet_c"}``. What the simulated agent heats its cards from.

    For an agent of this cluster (token) or a logged-in user.
    """
    refused = _refuse_reader(request, cluster_id)
    if refused is not None:
        return refused
    try:
        lay = state.layout(cluster_id)
    except KeyError:
        return _missing_cluster(cluster_id)
    racks = state.plant_racks(cluster_id, lay.version)
    summary = state.plant_summary(cluster_id)
    if racks is None or summary is None:
        return JsonResponse({"layout": lay.version, "ts": None, "inlet_c": None})
    per_card = racks["supply_c"][lay.groups["rack"].of_card]
    return JsonResponse({"layout": lay.version, "ts": summary.get("ts"),
                         "inlet_c": [None if v != v else round(float(v), 2) for v in per_card]})


@require_GET
def caps_view(request: HttpRequest, cluster_id: int) -> HttpResponse:
    """Each card's power cap (W) from live capping (``twin.facility.capping_live``), in
    the layout's card order: ``{"layout", "ts", "mode", "policy", "caps_w"}``. ``caps_w``
    is null unless the cluster's capping policy is ``apply`` (``propose`` caps are
    recorded, not binding) and the caps are of the current layout. What an agent obeys.

    For an agent of this cluster (token) or a logged-in user.
    """
    refused = _refuse_reader(request, cluster_id)
    if refused is not None:
        return refused
    try:
        lay = state.layout(cluster_id)
    except KeyError:
        return _missing_cluster(cluster_id)
    from twin.facility.capping_live import read_caps
    from twin.telemetry.config import conf, redis_client

    got = read_caps(redis_client(), conf().prefix, cluster_id)
    if got is None or got.get("v") != lay.version or len(got["caps_w"]) != lay.n:
        return JsonResponse({"layout": lay.version, "ts": None, "mode": "off",
                             "policy": None, "caps_w": None})
    caps = None if got["mode"] != "apply" else [round(float(v), 1) for v in got["caps_w"]]
    return JsonResponse({"layout": lay.version, "ts": got.get("ts"), "mode": got["mode"],
                         "policy": got.get("policy"), "caps_w": caps})


@require_GET
def whoami(request: HttpRequest) -> HttpResponse:
    """Which agent and cluster a token belongs to (agents use it to find their cluster)."""
    auth = authenticate_agent(request)
    if isinstance(auth, JsonResponse):
        return auth
    from twin.hardware.models import Cluster

    name = Cluster.objects.filter(pk=auth.cluster_id).values_list("name", flat=True).first()
    if name is None:  # deleted while the token was still cached
        return _missing_cluster(auth.cluster_id)
    return JsonResponse({"agent": auth.agent_id, "name": auth.name,
                         "cluster": auth.cluster_id, "cluster_name": name})
