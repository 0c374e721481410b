"""``GET /metrics``: the twin's own figures in Prometheus' text format, for Grafana.

Each app says what it knows (``twin.telemetry.monitoring``: ingest, the stream,
ticks, power against budget, open alerts; ``twin.scenarios.monitoring``: runs by
status; ``twin.live.clients``: websocket clients), read at scrape time from the
database and Redis, so any web process gives the whole installation's figures
(the web servers and workers are separate processes; ``prometheus_client``'s
in-process counters would each show one process's share). A sample dashboard
is ``docs/grafana/twin.json``.

Who may read it: a request with ``Authorization: Bearer <TWIN_METRICS_TOKEN>``
(when that is set), or from an address in ``TWIN_METRICS_ALLOW`` (comma-separated
networks, default the loopback ``127.0.0.1/8,::1/128``; empty: none). Anything
else is 401 (with a ``WWW-Authenticate`` challenge when a token would do) or 403.
The address is the connection's (``REMOTE_ADDR``): behind a reverse proxy, use
the token.

A user's API token (``Authorization: Token <key>``: DRF's from ``POST /api/token/``, or a
named one from ``/api/tokens/``, filtered by its scope too) reads
it too, filtered by the user's cluster grants (``twin.core.access``): a series
labelled with a cluster the user may not see is left out; the installation-wide
ones (sources up, runs by status, websocket clients) stay.
"""
from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable, Iterator
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import CollectorRegistry, GaugeMetricFamily, Metric

from twin.core.access import ClusterAccess, access_for
from twin.core.tokens import user_for_key

__all__ = ["TwinCollector", "allowed_networks", "metrics_view", "visible_families"]


def allowed_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """``settings.TWIN_METRICS_ALLOW`` (from the environment variable) as networks."""
    return [ipaddress.ip_network(part, strict=False) for part in settings.TWIN_METRICS_ALLOW]


def _token() -> str:
    return str(settings.TWIN_METRICS_TOKEN or "")


def _refusal(request: HttpRequest) -> HttpResponse | None:
    token = _token()
    header = request.headers.get("Authorization", "")
    scheme, _, sent = header.partition(" ")
    if token and scheme.lower() == "bearer" and hmac.compare_digest(sent.strip().encode(),
                                                                    token.encode()):
        return None
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        address = None
    if address is not None and not sent and any(address in net for net in allowed_networks()):
        return None
    if token:
        response = JsonResponse({"detail": "send Authorization: Bearer <TWIN_METRICS_TOKEN>"
                                           if not sent else "wrong metrics token"}, status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    networks = ", ".join(settings.TWIN_METRICS_ALLOW) or "no address"
    return JsonResponse({"detail": f"/metrics is open to {networks} (TWIN_METRICS_ALLOW) or "
                                   f"to a token (TWIN_METRICS_TOKEN)"}, status=403)


class TwinCollector:
    """Every app's families, read when Prometheus scrapes (see the module)."""

    def collect(self) -> Iterator[Metric]:
        from twin.live import clients
        from twin.scenarios import monitoring as scenarios
        from twin.telemetry import monitoring as telemetry

        up = GaugeMetricFamily("twin_source_up",
                               "1 when the source of a group of figures answered the scrape.",
                               labels=["source"])
        yield from telemetry.families(up)
        try:
            yield from scenarios.families()
            up.add_metric(["scenarios_database"], 1)
        except Exception:  # noqa: BLE001 - a scrape answers whatever is away
            up.add_metric(["scenarios_database"], 0)
        yield from clients.families()
        yield up


def _api_user(request: HttpRequest) -> Any:
    """The active user whose API token (DRF's, or a named one: then a copy of the user
    carrying the token's scope, ``twin.core.tokens``) the request carries, if any."""
    scheme, _, key = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "token" or not key.strip():
        return None
    found = user_for_key(key)
    return found[0] if found is not None else None


def visible_families(families: Iterable[Metric], access: ClusterAccess) -> Iterator[Metric]:
    """``families`` without the samples of clusters ``access`` does not show."""
    for family in families:
        family.samples = [sample for sample in family.samples
                          if "cluster" not in sample.labels
                          or access.can_see(sample.labels["cluster"])]
        yield family


class _VisibleCollector:
    def __init__(self, inner: TwinCollector, access: ClusterAccess) -> None:
        self.inner, self.access = inner, access

    def collect(self) -> Iterator[Metric]:
        return visible_families(self.inner.collect(), self.access)


@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    user = _api_user(request)
    collector: Any = TwinCollector()
    if user is not None:
        collector = _VisibleCollector(collector, access_for(user))
    else:
        refusal = _refusal(request)
        if refusal is not None:
            return refusal
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
