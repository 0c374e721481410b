"""What telemetry tells the twin's own ``/metrics`` (``twin.web.metrics`` serves it).

Every figure is read at scrape time from where all processes write it — the
agents' rows and the open alerts in the database, the stream, the tick
statistics and the rollups in Redis — never from counters in the process that
happens to answer the scrape: the web servers and the workers are separate
processes (and machines), so an in-process counter would show one process's
share. ``families()`` yields prometheus_client metric families; a source that
is away (Redis, the database) is reported as ``twin_source_up{source=…} 0`` and
its families left out, so the scrape still answers.

=========================================== ====== ==========================================
family                                      type   what
=========================================== ====== ==========================================
twin_ingest_batches_total{cluster}          ctr    batches the cluster's agents sent
twin_ingest_card_samples_total{cluster}     ctr    card-samples accepted (rate: ingest rate)
twin_ingest_rejected_total{cluster}         ctr    values rejected (unknown card, range, …)
twin_ingest_duplicates_total{cluster}       ctr    batches ignored as repeats
twin_ingest_missed_batches_total{cluster}   ctr    sequence numbers never received
twin_ingest_stream_length                   gauge  batches waiting on the ingest stream
twin_ingest_stream_bytes                    gauge  their bytes (backpressure at the limit)
twin_ingest_stream_oldest_age_seconds       gauge  ingest lag: age of the oldest waiting batch
twin_ingest_apply_errors_total              ctr    stream entries that could not be applied
twin_telemetry_tick_seconds{cluster}        summ.  tick durations (count, sum) of all workers
twin_telemetry_tick_last_seconds{cluster}   gauge  the last tick's duration
twin_telemetry_tick_age_seconds{cluster}    gauge  since the last tick (stale state if large)
twin_cluster_cards{cluster}                 gauge  cards in the layout
twin_cluster_cards_reporting{cluster}       gauge  fresh cards at the last tick
twin_cluster_power_draw_watts{cluster}      gauge  measured draw (cards + static), last tick
twin_cluster_power_budget_watts{cluster}    gauge  sum of the racks' budgets
twin_racks_over_budget{cluster}             gauge  racks drawing more than their budget
twin_rack_power_draw_watts{cluster,rack}    gauge  per rack (clusters of ≤ TWIN_METRICS_MAX_RACKS)
twin_rack_power_budget_watts{cluster,rack}  gauge  per rack, the same
twin_alerts_open{cluster,rule,severity}     gauge  open alerts
twin_facility_redfish_values_refused_total{cluster,source}  ctr  readings a Redfish source
                                                   gave that were refused (wrong units,
                                                   NaN, out of bounds; its ``values_refused``)
twin_facility_pue{cluster}                  gauge  PUE now (clusters with a facility)
twin_facility_power_watts{cluster,part}     gauge  it, facility, losses, pumps, fans, chillers
twin_facility_cdu_load_ratio{cluster,cdu}   gauge  CDU heat / planned capacity
twin_facility_cdu_temperature_celsius{cluster,cdu,side}  gauge  supply / return
twin_facility_cdu_flow_kg_per_second{cluster,cdu}  gauge  technology-loop flow
twin_facility_feed_headroom_watts{cluster,feed}  gauge  planned rating − input
twin_facility_pdu_load_ratio{cluster,pdu}   gauge  PDU (busway, shelf) input / its rating
twin_facility_pdu_input_watts{cluster,pdu}  gauge  PDU (busway, shelf) input
twin_facility_element_headroom_watts{cluster,element,kind,chain}  gauge  every rated element:
                                                   rating (planned, running) − load
twin_facility_element_load_ratio{cluster,element,kind,chain}  gauge  load / that rating
twin_facility_ambient_celsius{cluster,bulb}  gauge  dry / wet bulb the plant ran under
twin_facility_elements_out_of_service{cluster}  gauge  elements failed, in maintenance,
                                                   degraded or with units failed
twin_capping_cards_capped{cluster}         gauge  cards a limit caps (live capping on)
twin_capping_capped_watts{cluster}         gauge  sum of those cards' caps
twin_capping_throughput_lost_ratio{cluster}  gauge  throughput the caps cost (DVFS)
twin_capping_binding_limits{cluster}       gauge  limits binding: racks, power elements, site
=========================================== ====== ==========================================
"""
from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import numpy as np
from django.conf import settings
from django.db.models import Count, Sum
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)

from twin.facility.capping_live import read_summary
from twin.facility.live import rated_rows
from twin.telemetry import keys, state
from twin.telemetry.config import conf
from twin.telemetry.processing.stream import GROUP
from twin.telemetry.processing.tickparts import stream_age_s

__all__ = ["families"]

log = logging.getLogger(__name__)


def max_racks() -> int:
    """Per-rack power series only for clusters up to this many racks (a million-card
    cluster has 26,000: the cluster totals and the count over budget cover it)."""
    return int(getattr(settings, "TWIN_METRICS_MAX_RACKS", 5000))


def families(up: GaugeMetricFamily) -> Iterator[Metric]:
    """Telemetry's metric families; ``up`` gets a sample per source read."""
    try:
        yield from _database()
        up.add_metric(["telemetry_database"], 1)
    except Exception:  # noqa: BLE001 - a scrape must answer whatever is away
        log.warning("/metrics: telemetry's database figures unavailable", exc_info=True)
        up.add_metric(["telemetry_database"], 0)
    try:
        yield from _redis()
        up.add_metric(["telemetry_redis"], 1)
    except Exception:  # noqa: BLE001 - the same
        log.warning("/metrics: telemetry's Redis figures unavailable", exc_info=True)
        up.add_metric(["telemetry_redis"], 0)


def _database() -> Iterator[Metric]:
    from twin.telemetry.models import Alert, TelemetryAgent

    rows = list(TelemetryAgent.objects.values("cluster_id").annotate(
        batches=Sum("batches"), samples=Sum("samples"), rejected=Sum("rejected"),
        duplicates=Sum("duplicates"), missed=Sum("missed_batches")).order_by("cluster_id"))
    spec = [("batches", "twin_ingest_batches", "Batches the cluster's agents sent."),
            ("samples", "twin_ingest_card_samples",
             "Card-samples accepted from the cluster's agents (rate(): the ingest rate)."),
            ("rejected", "twin_ingest_rejected", "Values rejected, each with a reason."),
            ("duplicates", "twin_ingest_duplicates", "Batches ignored as repeats."),
            ("missed", "twin_ingest_missed_batches", "Sequence numbers never received.")]
    out = []
    for field, name, doc in spec:
        family = CounterMetricFamily(name, doc, labels=["cluster"])
        for row in rows:
            family.add_metric([str(row["cluster_id"])], float(row[field] or 0))
        out.append(family)
    alerts = GaugeMetricFamily("twin_alerts_open", "Open alerts by rule and severity.",
                               labels=["cluster", "rule", "severity"])
    for row in (Alert.objects.filter(ended__isnull=True)
                .values("cluster_id", "rule", "severity").annotate(n=Count("id"))
                .order_by("cluster_id", "rule", "severity")):
        alerts.add_metric([str(row["cluster_id"]), row["rule"], row["severity"]], row["n"])
    out.append(alerts)
    out.append(_redfish_refused())
    yield from out


def _redfish_refused() -> Metric:
    """Per Redfish source, the readings refused since it was added (the source row's
    ``values_refused``, which every poller process adds to in the database)."""
    from twin.facility.models import RedfishSource

    family = CounterMetricFamily(
        "twin_facility_redfish_values_refused", "Readings a Redfish source gave that were "
        "refused (not a number, wrong units, out of range or over the element's physical "
        "bound), since the source was added.", labels=["cluster", "source"])
    for cluster_id, name, refused in (RedfishSource.objects.order_by("site__cluster_id", "name")
                                      .values_list("site__cluster_id", "name", "values_refused")):
        family.add_metric([str(cluster_id), name], float(refused))
    return family


def _redis() -> Iterator[Metric]:
    r = state.redis_client()
    now = time.time()
    stream = keys.stream()
    length = int(r.xlen(stream)) if r.exists(stream) else 0
    age = stream_age_s(r.time(), r.xrange(stream, count=1)) if length else 0.0
    pending = 0
    if length:
        try:
            pending = int(r.xpending(stream, GROUP)["pending"])
        except Exception:  # noqa: BLE001 - no consumer group yet
            pending = 0
    gauges = [
        ("twin_ingest_stream_length", "Batches waiting on the ingest stream.", length),
        ("twin_ingest_stream_pending", "Batches a worker has read but not yet applied.",
         pending),
        ("twin_ingest_stream_bytes", "Bytes of the batches waiting on the ingest stream.",
         int(r.get(keys.stream_bytes()) or 0)),
        ("twin_ingest_stream_oldest_age_seconds",
         "Ingest lag: age of the oldest batch waiting on the stream (0 when empty).", age),
    ]
    out: list[Metric] = [GaugeMetricFamily(name, doc, value=value) for name, doc, value in gauges]
    out.append(CounterMetricFamily("twin_ingest_apply_errors",
                                   "Stream entries the workers could not apply.",
                                   value=int(r.get(keys.ingest_errors()) or 0)))
    out.extend(_clusters(r, now))
    yield from out


def _clusters(r: object, now: float) -> list[Metric]:
    """Per cluster with live state: ticks, cards, power against budget."""
    from twin.hardware.models import Cluster

    ids = sorted(int(x) for x in r.smembers(keys.clusters()))  # type: ignore[attr-defined]
    ids = list(Cluster.objects.filter(pk__in=ids).order_by("pk").values_list("pk", flat=True))
    tick = SummaryMetricFamily("twin_telemetry_tick_seconds",
                               "Durations of the cluster's ticks, all workers together.",
                               labels=["cluster"])
    last = GaugeMetricFamily("twin_telemetry_tick_last_seconds",
                             "Duration of the cluster's last tick.", labels=["cluster"])
    age = GaugeMetricFamily("twin_telemetry_tick_age_seconds",
                            "Seconds since the cluster's last tick.", labels=["cluster"])
    cards = GaugeMetricFamily("twin_cluster_cards", "Cards in the cluster's layout.",
                              labels=["cluster"])
    reporting = GaugeMetricFamily("twin_cluster_cards_reporting",
                                  "Cards with a fresh reading at the last tick.",
                                  labels=["cluster"])
    draw = GaugeMetricFamily("twin_cluster_power_draw_watts",
                             "Measured draw of the cluster (cards + static), last tick.",
                             labels=["cluster"])
    budget = GaugeMetricFamily("twin_cluster_power_budget_watts",
                               "Sum of the cluster's rack budgets.", labels=["cluster"])
    over = GaugeMetricFamily("twin_racks_over_budget",
                             "Racks whose measured draw is over their budget.",
                             labels=["cluster"])
    rack_draw = GaugeMetricFamily("twin_rack_power_draw_watts",
                                  "A rack's measured draw (cards + static), last tick.",
                                  labels=["cluster", "rack"])
    rack_budget = GaugeMetricFamily("twin_rack_power_budget_watts", "A rack's power budget.",
                                    labels=["cluster", "rack"])
    plant = _PlantFamilies()
    limit = max_racks()
    for cid in ids:
        c = str(cid)
        plant.add(c, state.plant_summary(cid))
        plant.add_caps(c, read_summary(r, conf().prefix, cid))
        stats = r.hgetall(keys.tick_stats(cid))  # type: ignore[attr-defined]
        if stats:
            tick.add_metric([c], count_value=int(stats.get(b"count", 0)),
                            sum_value=float(stats.get(b"sum", 0.0)))
            last.add_metric([c], float(stats.get(b"last", 0.0)))
        last_tick = r.get(keys.last_tick(cid))  # type: ignore[attr-defined]
        if last_tick:
            age.add_metric([c], max(now - float(last_tick), 0.0))
        try:
            racks = state.rollup(cid, "rack", "power_w")
            whole = state.rollup(cid, "cluster", "power_w")
        except KeyError:  # deleted between the two reads
            continue
        cards.add_metric([c], int(whole["cards"][0]) if len(whole["cards"]) else 0)
        reporting.add_metric([c], int(whole["reporting"][0]) if len(whole["reporting"]) else 0)
        if len(whole["draw_w"]) and np.isfinite(whole["draw_w"][0]):
            draw.add_metric([c], float(whole["draw_w"][0]))
        if len(whole["budget_w"]):
            budget.add_metric([c], float(whole["budget_w"][0]))
        with np.errstate(invalid="ignore"):
            over.add_metric([c], int((racks["draw_w"] > racks["budget_w"]).sum()))
        if len(racks["ids"]) <= limit:
            for name, d, b in zip(racks["names"], racks["draw_w"].tolist(),
                                  racks["budget_w"].tolist(), strict=True):
                if d == d:  # NaN: no card of the rack reported
                    rack_draw.add_metric([c, name], d)
                rack_budget.add_metric([c, name], b)
    return [tick, last, age, cards, reporting, draw, budget, over, rack_draw, rack_budget,
            *plant.families()]


class _PlantFamilies:
    """The live plant's gauges (``twin.facility.live``, at the cluster's last tick)."""

    def __init__(self) -> None:
        self.pue = GaugeMetricFamily("twin_facility_pue", "PUE now, from the plant's parts.",
                                     labels=["cluster"])
        self.power = GaugeMetricFamily(
            "twin_facility_power_watts", "Plant power by part (it, facility, losses, pumps, "
            "fans, chillers).", labels=["cluster", "part"])
        self.cdu_load = GaugeMetricFamily("twin_facility_cdu_load_ratio",
                                          "CDU heat over its planned capacity.",
                                          labels=["cluster", "cdu"])
        self.cdu_temp = GaugeMetricFamily("twin_facility_cdu_temperature_celsius",
                                          "CDU technology-loop supply and return.",
                                          labels=["cluster", "cdu", "side"])
        self.cdu_flow = GaugeMetricFamily("twin_facility_cdu_flow_kg_per_second",
                                          "CDU technology-loop flow.", labels=["cluster", "cdu"])
        self.feed = GaugeMetricFamily("twin_facility_feed_headroom_watts",
                                      "A feed's planned rating minus its input.",
                                      labels=["cluster", "feed"])
        self.pdu_load = GaugeMetricFamily("twin_facility_pdu_load_ratio",
                                          "A PDU's (busway's, power shelf's) input over its "
                                          "rating.", labels=["cluster", "pdu"])
        self.pdu_input = GaugeMetricFamily("twin_facility_pdu_input_watts",
                                           "A PDU's (busway's, power shelf's) input.",
                                           labels=["cluster", "pdu"])
        self.headroom = GaugeMetricFamily(
            "twin_facility_element_headroom_watts", "Every rated element: its rating (planned, "
            "no more than its running units give) minus its load.",
            labels=["cluster", "element", "kind", "chain"])
        self.load = GaugeMetricFamily(
            "twin_facility_element_load_ratio", "Every rated element: load over that rating.",
            labels=["cluster", "element", "kind", "chain"])
        self.ambient = GaugeMetricFamily("twin_facility_ambient_celsius",
                                         "Dry and wet bulb the plant ran under (weather "
                                         "series at now, else the design day).",
                                         labels=["cluster", "bulb"])
        self.out = GaugeMetricFamily("twin_facility_elements_out_of_service",
                                     "Elements failed, in maintenance, degraded or with "
                                     "units failed.", labels=["cluster"])
        self.reading = GaugeMetricFamily(
            "twin_facility_reading", "A measured facility reading that stands in for the "
            "model (native batch or Redfish; the other gauges show it too).",
            labels=["cluster", "element", "quantity", "source"])
        self.predicted = GaugeMetricFamily(
            "twin_facility_model_prediction", "The model's own figure of a quantity that is "
            "measured now (what the model_drift rule compares).",
            labels=["cluster", "element", "quantity"])

        self.caps = [GaugeMetricFamily(f"twin_capping_{name}", doc, labels=["cluster"])
                     for name, doc in (
                         ("cards_capped", "Cards a limit caps (live power capping on)."),
                         ("capped_watts", "The sum of the capped cards' caps."),
                         ("throughput_lost_ratio", "The throughput the caps cost (DVFS)."),
                         ("binding_limits", "Limits binding: racks, power elements, site."))]

    def add_caps(self, c: str, s: dict[str, object] | None) -> None:
        """Live capping's gauges (``twin.facility.capping_live.read_summary``)."""
        if not s:
            return
        for fam, k in zip(self.caps, ("cards_capped", "capped_w", "throughput_lost",
                                      "limits_binding"), strict=True):
            v = s.get(k)
            if isinstance(v, int | float):
                fam.add_metric([c], float(v))

    def add(self, c: str, s: dict[str, object] | None) -> None:
        if not s:
            return
        if isinstance(s.get("pue"), float):
            self.pue.add_metric([c], float(s["pue"]))  # type: ignore[arg-type]
        for part in ("it", "facility", "losses", "pumps", "fans", "chillers"):
            v = s.get(f"{part}_w")
            if isinstance(v, int | float):
                self.power.add_metric([c, part], float(v))
        for cdu in s.get("cdus") or []:  # type: ignore[attr-defined]
            key = str(cdu["key"])
            if cdu.get("load_fraction") is not None:
                self.cdu_load.add_metric([c, key], float(cdu["load_fraction"]))
            for side in ("supply", "return"):
                if cdu.get(f"{side}_c") is not None:
                    self.cdu_temp.add_metric([c, key, side], float(cdu[f"{side}_c"]))
            if cdu.get("flow_kg_s") is not None:
                self.cdu_flow.add_metric([c, key], float(cdu["flow_kg_s"]))
        for feed in s.get("feeds") or []:  # type: ignore[attr-defined]
            if feed.get("headroom_w") is not None:
                self.feed.add_metric([c, str(feed["key"])], float(feed["headroom_w"]))
        for pdu in s.get("pdus") or []:  # type: ignore[attr-defined]
            if pdu.get("load_fraction") is not None:
                self.pdu_load.add_metric([c, str(pdu["key"])], float(pdu["load_fraction"]))
            if pdu.get("input_w") is not None:
                self.pdu_input.add_metric([c, str(pdu["key"])], float(pdu["input_w"]))
        for e in rated_rows(s.get("rated")):  # type: ignore[arg-type]
            labels = [c, str(e["key"]), str(e["kind"]), str(e["chain"])]
            if e.get("headroom_w") is not None:
                self.headroom.add_metric(labels, float(e["headroom_w"]))
            if e.get("load_fraction") is not None:
                self.load.add_metric(labels, float(e["load_fraction"]))
        amb = s.get("ambient")
        if isinstance(amb, dict):
            for bulb in ("dry", "wet"):
                if amb.get(f"{bulb}_bulb_c") is not None:
                    self.ambient.add_metric([c, bulb], float(amb[f"{bulb}_bulb_c"]))
        if isinstance(s.get("out_of_service"), list):
            self.out.add_metric([c], float(len(s["out_of_service"])))  # type: ignore[arg-type]
        for e in [*(s.get("cdus") or []), *(s.get("feeds") or []),  # type: ignore[misc]
                  *(s.get("pdus") or [])]:
            model = e.get("model") or {}
            for q in e.get("measured") or []:
                got = e.get("input_w" if q == "power_w" else q)
                if got is not None:
                    self.reading.add_metric([c, str(e["key"]), q,
                                             str(e.get("reading_source", ""))], float(got))
                if model.get(q) is not None:
                    self.predicted.add_metric([c, str(e["key"]), q], float(model[q]))

    def families(self) -> list[Metric]:
        return [self.pue, self.power, self.cdu_load, self.cdu_temp, self.cdu_flow, self.feed,
                self.pdu_load, self.pdu_input, self.headroom, self.load, self.ambient, self.out,
                self.reading, self.predicted, *self.caps]
