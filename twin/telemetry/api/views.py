"""REST API of telemetry for people and dashboards (the ingest endpoints are in
``ingest_views``).

* ``agents/``: create an agent (the answer shows its token once), list, rename,
  deactivate, ``rotate-token``; sequence bookkeeping (gaps, duplicates) is
  read-only on each agent.
* ``targets/``: Prometheus scrape targets (e.g. DCGM exporters).
* ``alerts/``: list and filter (cluster, rule, severity, level, active,
  acknowledged, card, rack, supernode), ``acknowledge``; ``alerts/groups/`` the
  same filters, grouped by rule, severity and rack or supernode (``?by=``).
* ``health/``: cards whose derived health is not OK.
* ``history/``: the 1-minute downsampled history.
* ``clusters/<id>/``: the live headline; ``clusters/<id>/rollup/?level=&metric=``;
  ``cards/<id>/``: one card's live state, health, open alerts and sparkline.
* ``metrics/``: the metric set with units, ranges and DCGM fields.
"""
from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
from django.conf import settings
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action, api_view, permission_classes
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import BrowsableAPIRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from twin.core.access import access_for
from twin.core.aggregates import CachedListMixin, cached
from twin.core.api.access import ClusterScopedMixin, require_visible
from twin.core.api.pagination import HistoryPagination
from twin.core.api.permissions import TwinModelPermissions
from twin.core.api.renderers import LargeJSONRenderer
from twin.core.api.viewsets import TwinModelViewSet
from twin.core.unavailable import check_redis
from twin.hardware.models import Card, Cluster
from twin.telemetry import bridge, grouping, state, victoria
from twin.telemetry.api.serializers import (
    AlertGroupSerializer,
    AlertSerializer,
    CardHealthSerializer,
    MetricSerializer,
    MinuteSerializer,
    RotateTokenSerializer,
    ScrapeTargetSerializer,
    TelemetryAgentSerializer,
)
from twin.telemetry.filtersets import (
    AlertFilterSet,
    CardHealthFilterSet,
    MinuteFilterSet,
    ScrapeTargetFilterSet,
    TelemetryAgentFilterSet,
)
from twin.telemetry.metrics import HISTORY_METRICS, METRIC_KEYS
from twin.telemetry.models import Alert, CardHealth, ScrapeTarget, TelemetryAgent, TelemetryMinute

__all__ = [
    "AlertViewSet",
    "CardHealthViewSet",
    "MinuteViewSet",
    "ScrapeTargetViewSet",
    "TelemetryAgentViewSet",
    "card_live",
    "cluster_live",
    "cluster_rollup",
    "metric_list",
    "rack_plant",
]


class TelemetryAgentViewSet(TwinModelViewSet):
    queryset = TelemetryAgent.objects.select_related("cluster")
    cluster_field = "cluster"
    serializer_class = TelemetryAgentSerializer
    filterset_class = TelemetryAgentFilterSet
    ordering_fields = ["id", "name", "last_seen", "batches", "gaps", "duplicates"]

    def perform_create(self, serializer: Any) -> None:
        super().perform_create(serializer)
        # The read-back instance is a fresh row: carry the one-time token over.
        serializer.instance._new_token = serializer._new_token

    @extend_schema(request=RotateTokenSerializer, responses=TelemetryAgentSerializer)
    @action(detail=True, methods=["post"], url_path="rotate-token",
            permission_classes=[IsAuthenticated])
    def rotate_token(self, request: Request, pk: str | None = None) -> Response:
        """Replace the agent's token; the answer shows the new one, once. The replaced
        token keeps working for ``grace_s`` seconds (``previous_token_expires``)."""
        if not request.user.has_perm("telemetry.change_telemetryagent"):
            return Response({"detail": "You may not change telemetry agents."},
                            status=status.HTTP_403_FORBIDDEN)
        body = RotateTokenSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        agent = self.get_object()
        token = agent.set_new_token(body.validated_data.get("grace_s"))
        agent.save(update_fields=list(TelemetryAgent.TOKEN_FIELDS))
        agent._new_token = token  # type: ignore[attr-defined]
        return Response(self.get_serializer(agent).data)


class ScrapeTargetViewSet(TwinModelViewSet):
    queryset = ScrapeTarget.objects.all()
    cluster_field = "cluster"
    serializer_class = ScrapeTargetSerializer
    filterset_class = ScrapeTargetFilterSet
    ordering_fields = ["id", "endpoint", "last_scraped", "last_status"]


class AlertViewSet(ClusterScopedMixin, CachedListMixin, mixins.ListModelMixin,
                   mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Alerts, newest first. Rows are written by the rules, never through the API.
    A page is cached (per user and query) until the next write to the alerts."""

    cache_domains = ("alerts", "inventory")  # (filters by rack, supernode)

    queryset = Alert.objects.select_related("acknowledged_by")
    cluster_field = "cluster"
    serializer_class = AlertSerializer
    filterset_class = AlertFilterSet
    permission_classes = [TwinModelPermissions]
    ordering_fields = ["id", "started", "ended", "severity"]

    @extend_schema(parameters=[OpenApiParameter("by", str, enum=list(grouping.BY),
                                                description="Group card alerts by their "
                                                            "rack (default) or supernode.")],
                   responses=AlertGroupSerializer(many=True))
    @action(detail=False, methods=["get"], url_path="groups")
    def groups(self, request: Request) -> Response:
        """The filtered alerts grouped by rule, severity and rack (or supernode), most
        severe and largest first: ``?cluster=1&active=true`` is the dashboard's list,
        one line per group with its count, however many alerts are open."""
        by = request.query_params.get("by", "rack")
        if by not in grouping.BY:
            raise ValidationError({"by": f"one of {', '.join(grouping.BY)}"})
        groups = grouping.group_alerts(self.filter_queryset(self.get_queryset()), by)
        page = self.paginate_queryset(groups)
        return self.get_paginated_response(AlertGroupSerializer(page, many=True).data)

    @extend_schema(request=None, responses=AlertSerializer)
    @action(detail=True, methods=["post"], permission_classes=[IsAuthenticated])
    def acknowledge(self, request: Request, pk: str | None = None) -> Response:
        """Mark the alert as seen by you (needs ``telemetry.change_alert``)."""
        if not request.user.has_perm("telemetry.change_alert"):
            return Response({"detail": "You may not acknowledge alerts."},
                            status=status.HTTP_403_FORBIDDEN)
        alert = self.get_object()
        if alert.acknowledged_at is None:
            alert.acknowledged_by = request.user
            alert.acknowledged_at = timezone.now()
            alert.save(update_fields=["acknowledged_by", "acknowledged_at"])
            bridge.group_send(state.group_name(alert.cluster_id), {
                "type": state.ALERT_EVENT, "cluster": alert.cluster_id,
                "event": "acknowledged", "alert": alert.as_event()})
        return Response(self.get_serializer(alert).data)


class CardHealthViewSet(ClusterScopedMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    """Cards whose derived health is warning, critical or stale (no row: OK)."""

    queryset = CardHealth.objects.all()
    cluster_field = "cluster"
    serializer_class = CardHealthSerializer
    filterset_class = CardHealthFilterSet
    permission_classes = [TwinModelPermissions]


class MinuteViewSet(ClusterScopedMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    """The 1-minute history (mean and max of every metric per minute).

    From the database (``TelemetryMinute``) by default; with ``TWIN_VICTORIA_URL``
    set, computed by VictoriaMetrics for any card, rack, supernode or the cluster
    (``twin.telemetry.victoria``), in the same shape. That path needs ``cluster``,
    ``level`` and ``object_id`` (not for ``level=cluster``); ``since`` defaults to
    ``TELEMETRY_RETENTION_DAYS`` ago, ``until`` to now; a row covers a minute up to a
    25 h window and whole minutes past it (at most 1,500 rows:
    ``victoria.history_step``). ``limit`` goes to 1,500, a chart's window in one page.
    """

    queryset = TelemetryMinute.objects.all()
    cluster_field = "cluster"
    serializer_class = MinuteSerializer
    filterset_class = MinuteFilterSet
    permission_classes = [TwinModelPermissions]
    pagination_class = HistoryPagination
    renderer_classes = [LargeJSONRenderer, BrowsableAPIRenderer]

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        if not victoria.enabled():
            return super().list(request, *args, **kwargs)
        filters = MinuteFilterSet(request.query_params, queryset=self.get_queryset())
        if not filters.is_valid():
            raise ValidationError(filters.errors)
        data = filters.form.cleaned_data
        cluster = data.get("cluster")
        level = data.get("level") or ""
        object_id = data.get("object_id")
        errors = {}
        if cluster is None:
            errors["cluster"] = "required when the history is in VictoriaMetrics"
        else:
            cluster = getattr(cluster, "pk", cluster)
        if not level:
            errors["level"] = "required when the history is in VictoriaMetrics"
        elif level == "cluster":
            object_id = cluster if object_id is None else object_id
        elif object_id is None:
            errors["object_id"] = "required when the history is in VictoriaMetrics"
        if errors:
            raise ValidationError(errors)
        require_visible(request, cluster)
        get_object_or_404(Cluster, pk=cluster)
        until = data.get("until") or timezone.now()
        since = data.get("since") or until - dt.timedelta(
            days=float(getattr(settings, "TELEMETRY_RETENTION_DAYS", 7)))
        static_w = None
        if level != "card":  # racks and up: draw_w includes the group's static draw
            lay = state.layout(int(cluster))
            index = lay.groups.get(level)
            if index is not None and lay.n:
                try:
                    static_w = float(index.static_w[index.position(int(object_id))])
                except KeyError:
                    static_w = None
        rows = victoria.query_history(int(cluster), level, int(object_id), since, until,
                                      static_w=static_w)
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(page if page is not None else rows)


def _jsonable(arr: np.ndarray) -> list[Any]:
    if arr.dtype.kind == "f":
        return [None if v != v else round(float(v), 4) for v in arr.tolist()]
    return arr.tolist()


@extend_schema(responses=MetricSerializer(many=True))
@api_view(["GET"])
@permission_classes([IsAuthenticated])
def metric_list(request: Request) -> Response:
    """The metric set: keys, units, valid ranges, DCGM fields and conversions."""
    return Response(MetricSerializer.all())


@extend_schema(responses={200: dict})
@api_view(["GET"])
@permission_classes([IsAuthenticated])
def cluster_live(request: Request, cluster_id: int) -> Response:
    """The cluster's live headline: cards reporting, power vs budget, utilization,
    hottest card, health counts, open alerts by severity."""
    require_visible(request, cluster_id)
    cluster = get_object_or_404(Cluster, pk=cluster_id)
    check_redis()  # a frozen Redis: 503 within a second (twin.core.unavailable)
    body = state.summary(cluster.pk)
    body["open_alerts"] = cached("alerts", f"open:{cluster.pk}", lambda: {
        sev: Alert.objects.filter(cluster=cluster, ended__isnull=True, severity=sev).count()
        for sev in ("critical", "warning", "info")})
    body["agents"] = list(TelemetryAgent.objects.filter(cluster=cluster).values(
        "id", "name", "last_seen", "last_sequence", "gaps", "missed_batches", "duplicates"))
    return Response(body)


@extend_schema(responses={200: dict})
@api_view(["GET"])
@permission_classes([IsAuthenticated])
def rack_plant(request: Request, cluster_id: int, rack_id: int) -> Response:
    """One rack in the live plant at the last tick, for the dashboard's rack panel:
    coolant ``supply_c``/``return_c``/``flow_kg_s`` and modelled ``card_c``
    (``state.plant_racks``), its hottest card's reading ``max_gpu_temp_c`` (the
    ``gpu_temp_c`` rollup's max), its cards' live caps ``caps_w`` and their share of
    ``budget_w``, and whether a limit ``binding`` there (``capping_mode`` "off": no
    caps). Null where the plant or capping has no value (and for a rack without cards).
    One rack: a few numbers, read from the per-rack arrays, never per card. 404 for a
    rack not in the cluster."""
    require_visible(request, cluster_id)
    get_object_or_404(Cluster, pk=cluster_id)
    check_redis()
    try:
        lay = state.layout(cluster_id)
    except KeyError as exc:
        raise NotFound(f"cluster {cluster_id} has no live layout") from exc
    racks = lay.groups["rack"]
    at = np.flatnonzero(racks.ids == rack_id)
    if not len(at):
        # A rack of the cluster without cards (a network rack): no live plant row.
        from twin.hardware.models import Rack

        rack = get_object_or_404(Rack, pk=rack_id, cluster_id=cluster_id)
        return Response({"rack": rack_id, "layout": lay.version, "ts": None,
                         "budget_w": rack.power_budget_w, "max_gpu_temp_c": None,
                         "supply_c": None, "return_c": None, "flow_kg_s": None,
                         "card_c": None, "capping_mode": "off", "caps_w": None,
                         "cap_share": None, "binding": None})
    k = int(at[0])

    def num(v: Any, places: int) -> float | None:
        f = float(v)
        return None if f != f else round(f, places)

    body: dict[str, Any] = {"rack": rack_id, "layout": lay.version,
                            "budget_w": num(racks.budget_w[k], 0)}
    temps = state.rollup(cluster_id, "rack", "gpu_temp_c")
    body["max_gpu_temp_c"] = num(temps["max"][k], 1) if temps["count"][k] > 0 else None
    body["ts"] = temps["ts"]
    plant = state.plant_racks(cluster_id, lay.version)
    for name in ("supply_c", "return_c", "flow_kg_s", "card_c"):
        body[name] = None if plant is None else num(plant[name][k], 3 if name == "flow_kg_s"
                                                    else 1)
    from twin.facility.capping_live import frame_section
    from twin.telemetry.config import conf, redis_client

    caps = frame_section(redis_client(), conf().prefix, cluster_id, lay.version,
                         len(racks.names))
    body["capping_mode"] = "off" if caps is None else caps["mode"]
    cap = None if caps is None else float(caps["rack_caps_w"][k])
    body["caps_w"] = cap
    body["cap_share"] = (round(cap / float(racks.budget_w[k]), 4)
                         if cap is not None and racks.budget_w[k] > 0 else None)
    body["binding"] = None if caps is None else bool(caps["rack_binding"][k])
    return Response(body)


@extend_schema(parameters=[OpenApiParameter("level", str, enum=list(state.LEVELS)),
                           OpenApiParameter("metric", str, enum=list(METRIC_KEYS))],
               responses={200: dict})
@api_view(["GET"])
@permission_classes([IsAuthenticated])
def cluster_rollup(request: Request, cluster_id: int) -> Response:
    """Per-group statistics of one metric at the last tick."""
    require_visible(request, cluster_id)
    get_object_or_404(Cluster, pk=cluster_id)
    level = request.query_params.get("level", "rack")
    metric = request.query_params.get("metric", "power_w")
    errors = {}
    if level not in state.LEVELS:
        errors["level"] = f"one of {', '.join(state.LEVELS)}"
    if metric not in METRIC_KEYS:
        errors["metric"] = f"one of {', '.join(METRIC_KEYS)}"
    if errors:
        raise ValidationError(errors)
    check_redis()
    data = state.rollup(cluster_id, level, metric)
    return Response({k: _jsonable(v) if isinstance(v, np.ndarray) else v
                     for k, v in data.items()})


@extend_schema(parameters=[OpenApiParameter("history", str, enum=list(HISTORY_METRICS)),
                           OpenApiParameter("n", int)],
               responses={200: dict})
@api_view(["GET"])
@permission_classes([IsAuthenticated])
def card_live(request: Request, card_id: int) -> Response:
    """One card: latest values, health, open alerts, and a sparkline (``?history=``)."""
    card = Card.objects.filter(pk=card_id).values("id", "supernode__cluster_id", "serial").first()
    if card is None or not access_for(request.user).can_see(card["supernode__cluster_id"]):
        raise NotFound(f"no card {card_id}")
    cluster_id = card["supernode__cluster_id"]
    check_redis()
    body = state.card_state(cluster_id, card_id)
    body["serial"] = card["serial"]
    body["cluster"] = cluster_id
    row = CardHealth.objects.filter(card_id=card_id).values("status", "reasons", "since").first()
    body["health_detail"] = row
    body["alerts"] = AlertSerializer(
        Alert.objects.filter(card_id=card_id, ended__isnull=True), many=True,
        context={"request": request}).data
    metric = request.query_params.get("history")
    if metric:
        if metric not in HISTORY_METRICS:
            raise ValidationError({"history": f"one of {', '.join(HISTORY_METRICS)}"})
        try:
            n = min(max(int(request.query_params.get("n", 60)), 1), 10_000)
        except ValueError:
            raise ValidationError({"n": "an integer"}) from None
        body["history"] = {"metric": metric,
                           "points": state.history(cluster_id, card_id, metric, n)}
    return Response(body)
