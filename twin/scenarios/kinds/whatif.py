"""The what-if kind: from the live twin now, over a horizon, events against doing nothing.

A job that names a ``training_model`` runs at the training model's pace for its
placement and clock (``simulation.whatif.speed``): the layout carries the cluster's
accelerator figures (the catalogue row, ``accelerator_figures``) for it.

It always forks: ``prepare`` reads the run's snapshot
(``twin.scenarios.snapshot.live_state``: the one the run forked with ``fork`` /
``fork_from``, or frozen now and stored with the run; a cluster without live telemetry
forks its inventory and the result's ``fork.note`` says so), the cluster's layout
(servers, their cards by slot, racks, supernodes, which servers a switch carries; the
accelerator's TDP and idle draw) in a few bulk queries, and validates every event
against this cluster: a target that does not exist here (or is another cluster's) is a
400 on ``params.events[i].target``; a horizon over the limit on ``params.horizon_h``.
``run`` (the Celery worker, via the runner) is :func:`simulation.whatif.run_whatif`:
the baseline and the perturbed case from the same snapshot and seed, side by side.

**The plant** for facility events (CDU or feed trip, wet bulb) and PUE is obtained in
one place, :func:`plant_for` (the facility app's ``plant_for_cluster``); a cluster
without a facility has none, and its facility events are refused with a 400 saying so.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simulation.scheduling import POLICIES
from simulation.snapshot import LiveSnapshot
from simulation.whatif import (
    FACILITY_KINDS,
    MAX_EVENTS,
    MAX_HORIZON_S,
    MIN_HORIZON_S,
    Layout,
    WhatIfInputError,
    WhatIfSpec,
    run_whatif,
    summary_rows,
)
from twin.scenarios.hardware import accelerator_figures
from twin.scenarios.kinds.base import (
    FieldSpec,
    Progress,
    ScenarioInputError,
    ScenarioKind,
    jsonable,
    register,
)
from twin.scenarios.snapshot import live_state

__all__ = ["WhatIfKind", "plant_for"]

SWITCH_KINDS = ("leaf", "spine", "core", "pcie_switch")


def plant_for(cluster: Any) -> Any | None:
    """The cluster's facility plant (``simulation.facility.plant.Plant``), or None.

    The single place the what-if obtains it (``twin.facility.plant.plant_for_cluster``):
    None for a cluster without a facility, and for a plant the engine cannot simulate
    (then facility events are refused as for a cluster without one, and the kind's
    result has no facility side). ``cluster`` is a ``Cluster`` or its id.
    """
    from simulation.facility.plant import PlantError
    from simulation.facility.validate import validate
    from twin.facility.models import Site
    from twin.facility.plant import plant_for_cluster

    cluster_id = getattr(cluster, "pk", cluster)
    if not Site.objects.filter(cluster_id=cluster_id).exists():
        return None
    try:
        plant = plant_for_cluster(cluster_id)
        validate(plant)
    except PlantError:
        return None
    return plant


def _err(exc: WhatIfInputError) -> ScenarioInputError:
    return ScenarioInputError.one(f"params.{exc.field}", exc.message)


@register
class WhatIfKind(ScenarioKind):
    name = "whatif"
    label = "What if, from now"
    description = ("Fork the live twin and play events (failures, drains, jobs, policy, "
                   "power caps, the site's contract) over a horizon, side by side with doing "
                   "nothing: job "
                   "completions, lost card-hours, queue wait, utilisation, energy, peak "
                   "rack power, availability.")
    fields = (
        FieldSpec("events", "object_list", "Events", "A list of events, each {at_s, kind, target, "
                  "value, duration_s, policy, job} (docs/whatif.md): fail_card/server/rack/"
                  "switch, drain_*, add_job, cancel_job, resize_job, change_policy, "
                  "change_spares, "
                  "cap_power, change_contract (value: the site's new contract, kW), cdu_trip, "
                  "feed_trip, raise_wet_bulb.", default=[],
                  needs_cluster=True),
        FieldSpec("horizon_h", "number", "Horizon (h)", "How far from now.", default=24.0,
                  min=MIN_HORIZON_S / 3600, max=MAX_HORIZON_S / 3600, needs_cluster=True),
        FieldSpec("policy", "choice", "Policy", "The scheduling policy (an event may change "
                  "it).", default="fifo-first-fit", choices=tuple(POLICIES),
                  needs_cluster=True),
        FieldSpec("seed", "integer", "Seed", "Random failures (the same in both cases).",
                  default=0, min=0, needs_cluster=True),
        FieldSpec("failure_rate", "number", "Failure rate ×", "Multiplier on the calibrated "
                  "card and host failure rates (0: none).", default=1.0, min=0, max=1000,
                  needs_cluster=True),
        FieldSpec("checkpoint_interval_min", "number", "Checkpoint interval (min)",
                  "A failed job loses the work since its last checkpoint.", default=30.0,
                  min=1 / 60, max=1e5, needs_cluster=True),
        FieldSpec("restart_s", "number", "Restart (s)", "From a failure to running again "
                  "elsewhere.", default=300.0, min=0, max=86400, needs_cluster=True),
        FieldSpec("default_duration_h", "number", "Default duration (h)", "For a queued job "
                  "without an expected duration.", default=4.0, min=1 / 3600, max=1e4,
                  needs_cluster=True),
        FieldSpec("spares", "integer", "Hot spares", "Cards in the spare pool: a failed job "
                  "swaps them in and resumes in place (an event may change the pool).",
                  default=0, min=0, max=1_048_576, needs_cluster=True),
        FieldSpec("compute_share", "number", "Compute-bound share", "Of a step; only it "
                  "slows under a power cap (jobs without a training model).", default=0.7,
                  min=0, max=1, needs_cluster=True),
        FieldSpec("pue", "number", "Site PUE", "Turns the site's contract (facility kW) "
                  "into the cards' budget: contract / PUE less the racks' static non-card "
                  "load. 1.1: a liquid-cooled hall "
                  "(assumption).", default=1.1, min=1, max=5, needs_cluster=True,
                  advanced=True),
    )

    # ------------------------------------------------------------- prepare
    def prepare(self, params: Mapping[str, Any], cluster: Any | None) -> dict[str, Any]:
        rest, mine = self.split(params)
        if rest:
            key = sorted(rest)[0]
            raise ScenarioInputError.one(f"params.{key}", f"unknown field for a what-if "
                                                          f"(allowed: "
                                                          f"{', '.join(sorted(self.options))})")
        if cluster is None:
            raise ScenarioInputError.one("cluster", "a what-if forks a cluster's live state: "
                                                    "give a cluster")
        plant = plant_for(cluster)
        # the contract in force at the fork: the site's (a change_contract event moves it)
        spec = self._spec(mine, None if plant is None else plant.site.contract_kw)
        snapshot = live_state(cluster)
        layout = cluster_layout(cluster)
        check_targets(spec, layout, snapshot, plant, cluster.name)
        return {"spec": spec.to_dict(), "layout": layout.to_dict(),
                "snapshot": snapshot.to_dict(), "has_plant": plant is not None,
                "cluster_id": cluster.pk,
                "note": snapshot.note or ""}

    def _spec(self, mine: Mapping[str, Any], contract_kw: float | None = None) -> WhatIfSpec:
        data: dict[str, Any] = {"contract_kw": contract_kw}
        if "events" in mine:
            if not isinstance(mine["events"], list) or len(mine["events"]) > MAX_EVENTS:
                raise ScenarioInputError.one("params.events", f"a list of at most "
                                                              f"{MAX_EVENTS} events")
            data["events"] = mine["events"]
        scale = {"horizon_h": ("horizon_s", 3600.0),
                 "checkpoint_interval_min": ("checkpoint_interval_s", 60.0),
                 "default_duration_h": ("default_duration_s", 3600.0)}
        for name in ("horizon_h", "checkpoint_interval_min", "default_duration_h",
                     "failure_rate", "restart_s", "compute_share", "pue"):
            f = self.field(name)
            value = mine.get(name, f.default)
            if isinstance(value, bool) or not isinstance(value, int | float) or \
                    not (f.min or 0) <= value <= (f.max if f.max is not None else 1e300):
                raise ScenarioInputError.one(f"params.{name}", f"a number from {f.min:g} to "
                                                               f"{f.max:g}, got {value!r}")
            key, factor = scale.get(name, (name, 1.0))
            data[key] = float(value) * factor
        data["seed"] = mine.get("seed", 0)
        data["spares"] = mine.get("spares", 0)
        data["policy"] = mine.get("policy", self.field("policy").default)
        try:
            spec = WhatIfSpec.from_dict(data)
        except WhatIfInputError as exc:
            back = {"horizon_s": "horizon_h", "checkpoint_interval_s": "checkpoint_interval_min",
                    "default_duration_s": "default_duration_h"}
            raise ScenarioInputError.one(f"params.{back.get(exc.field, exc.field)}",
                                         exc.message) from exc
        return spec

    # ----------------------------------------------------------------- run
    def run(self, inputs: Mapping[str, Any], progress: Progress) -> dict[str, Any]:
        progress(0.01, "reading the snapshot")
        snapshot = LiveSnapshot.from_dict(inputs["snapshot"])
        layout = Layout.from_dict(inputs["layout"])
        spec = WhatIfSpec.from_dict(inputs["spec"])
        try:
            plant = plant_for(inputs["cluster_id"]) if inputs.get("has_plant") else None
            result = run_whatif(snapshot, layout, spec, plant=plant, progress=progress)
        except WhatIfInputError as exc:
            raise _err(exc) from exc
        out = result.to_dict()
        out["horizon_h"] = spec.horizon_s / 3600
        out["events"] = [e.to_dict() for e in spec.events]
        if inputs.get("note"):
            out["note"] = inputs["note"]
        progress(1.0, "done")
        return jsonable(out)

    def rows(self, result: Mapping[str, Any]) -> list[tuple[str, str]]:
        out = [("horizon", f"{result.get('horizon_h', 0):g} h, {len(result.get('events') or [])}"
                           f" event(s), {result.get('random_failures', 0)} random failure(s) "
                           f"in both cases")]
        if result.get("note"):
            out.append(("forked", str(result["note"])))
        out.extend(summary_rows(result))
        jobs = (result.get("jobs") or {}).get("rows") or []
        for row in jobs[:3]:
            out.append((f"job {row['job']}", f"completion {row['baseline_completion_s']} → "
                                             f"{row['completion_s']} s, lost "
                                             f"{row['lost_card_h']:.3g} card-h"))
        return out


# ------------------------------------------------------------------ the cluster
def cluster_layout(cluster: Any) -> Layout:
    """The cluster's servers, cards by slot, racks, supernodes, switches, and each rack's
    static non-card draw (servers' overhead, network devices: the hardware's draw terms
    without the cards, one grouped query) — bulk queries."""
    from django.db.models import Max, Min

    from twin.hardware.models import Card, NetworkDevice, Rack, Server

    servers = list(Server.objects.filter(rack__cluster=cluster).order_by("rack_id", "id")
                   .values_list("id", "rack_id", "supernode_id"))
    if not servers:
        raise ScenarioInputError.one("cluster", f"cluster {cluster.name!r} has no servers")
    slots: dict[int, dict[int, int]] = {}
    for cid, sid, slot in Card.objects.filter(server__rack__cluster=cluster).order_by() \
            .values_list("id", "server_id", "slot"):
        slots.setdefault(sid, {})[slot] = cid
    cards = []
    for sid, _, _ in servers:
        row = slots.get(sid, {})
        width = max(row) + 1 if row else 0
        cards.append(tuple(row.get(s, -1) for s in range(width)))
    by_rack: dict[int, list[int]] = {}
    for sid, rid, _ in servers:
        by_rack.setdefault(rid, []).append(sid)
    switches: dict[int, tuple[int, ...]] = {}
    for did, rid, sid in NetworkDevice.objects.filter(cluster=cluster, kind__in=SWITCH_KINDS) \
            .order_by().values_list("id", "rack_id", "server_id"):
        switches[did] = (sid,) if sid else tuple(by_rack.get(rid, ())) if rid else ()
    power = Card.objects.filter(server__rack__cluster=cluster).aggregate(
        tdp=Max("accelerator__tdp_w"), idle=Min("accelerator__idle_w"),
        slug=Min("accelerator__slug"))
    figures = accelerator_figures(power["slug"]) if power["slug"] else None
    racks = list(dict.fromkeys(r for _, r, _ in servers))
    static = {d.rack_id: float(d.w) for d in
              Rack.objects.filter(pk__in=racks).draw_by_rack(static_only=True).rows()}
    return Layout(tuple(s for s, _, _ in servers), tuple(r for _, r, _ in servers),
                  tuple(n or 0 for _, _, n in servers), tuple(cards), switches,
                  float(power["tdp"] or 700.0), float(power["idle"] or 100.0),
                  accelerator={k: float(v) if isinstance(v, int | float) or hasattr(v, "is_nan")
                               else v for k, v in figures.items()} if figures else None,
                  rack_static_w=tuple(static.get(r, 0.0) for r in racks))


def check_targets(spec: WhatIfSpec, layout: Layout, snapshot: LiveSnapshot, plant: Any | None,
                  cluster_name: str) -> None:
    """Every event's target exists in this cluster (400 on ``params.events[i].target``)."""
    known: dict[str, set[int]] = {
        "card": {c for row in layout.cards for c in row if c >= 0},
        "server": set(layout.server_ids), "rack": set(layout.rack_ids),
        "switch": set(layout.switches)}
    jobs = {j.id for j in snapshot.running} | {j.id for j in snapshot.queue}
    for i, ev in enumerate(spec.events):
        where = f"params.events[{i}]"
        if ev.kind in FACILITY_KINDS and plant is None:
            raise ScenarioInputError.one(f"{where}.kind", f"{ev.kind} needs a facility model; "
                                                          f"cluster {cluster_name!r} has no "
                                                          f"facility")
        element = ev.element
        if element is not None and ev.target not in known[element]:
            raise ScenarioInputError.one(f"{where}.target", f"no {element} {ev.target} in "
                                                            f"cluster {cluster_name!r}")
        if ev.kind == "cap_power" and ev.target not in (None, "") and \
                ev.target not in known["rack"]:
            raise ScenarioInputError.one(f"{where}.target", f"no rack {ev.target} in cluster "
                                                            f"{cluster_name!r}")
        if ev.kind in ("cancel_job", "resize_job") and ev.target not in jobs:
            raise ScenarioInputError.one(f"{where}.target", f"no job {ev.target} running or "
                                                            f"queued in the snapshot, nor added"
                                                            f" by an earlier event")
        if ev.kind == "add_job" and ev.job is not None and ev.job.get("id") is not None:
            jobs.add(int(ev.job["id"]))
