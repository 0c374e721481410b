"""The scheduling kind: replay a workload on a cluster under one or several policies.

Nodes come from the run's cluster (one node per server: its cards, failed and
maintenance cards excluded, its SR-IOV tenant limit, as the live placement sees
them: ``twin.jobs.capacity``), or from an uploaded trace's node list, or — with
neither — ``servers`` identical servers of ``gpus_per_server`` cards. The
workload is an uploaded trace's jobs (``trace``: an id of ``/api/jobs/traces/``) or
``jobs`` jobs of the library's synthetic generator. Each policy of ``policies``
(comma-separated: ``fgd,best-fit,random``) replays the same workload on the same
nodes (``simulation.scheduling.simulate``: ``mode``, ``seed``, ``target_load``),
the multi-card placements priced by ``default_allreduce`` with the cluster's own
scale-up (its accelerator's NVLink/HCCS Gb/s) and NIC figures. The parameters are
``replay_trace``'s.

``from_live`` (with a cluster): the run's snapshot of the live twin
(``twin.scenarios.snapshot.live_state``: the one it forked, or frozen at submit
and stored with the run) gives the failed cards, out of the nodes, and the
running jobs, pinned to the cards they hold
(``simulate(initial=...)``) — for their remaining expected duration (as of the
snapshot) in ``full`` mode, for the whole run in ``arrival-only`` mode or when a
job has no expected duration. The policy under test places only the workload.
A piece on a card that failed under its job is dropped.

Each policy's result also carries a bounded per-job table and a per-rack
playback of its placements (:mod:`.schedulingdetail`); the racks and their
cards are in ``racks``.

A trace is named by id and checked by hash: ``inputs`` hold its id and SHA-256,
and the worker refuses to replay a trace whose stored rows no longer match.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from simulation.scheduling import (
    MODES,
    POLICIES,
    Nodes,
    SchedulingInputError,
    Workload,
    default_allreduce,
    simulate,
    synthetic_workload,
)
from simulation.snapshot import LiveSnapshot
from twin.scenarios.kinds import schedulingdetail as detail
from twin.scenarios.kinds.base import (
    FieldSpec,
    Progress,
    ScenarioInputError,
    ScenarioKind,
    fmt,
    int_option,
    jsonable,
    register,
)
from twin.scenarios.snapshot import live_state

__all__ = ["MAX_JOBS", "MAX_POLICIES", "SPLIT_MIN_JOBS", "SPLIT_MIN_NODES", "SchedulingKind"]

MAX_JOBS = 100_000
"""Jobs of one run (synthetic, or a trace's): the issue's largest replay."""
MAX_POLICIES = len(POLICIES)
MAX_SERVERS = 131_072
"""A million cards in 8-card servers."""
DEFAULT_JOBS, DEFAULT_SERVERS, DEFAULT_GPUS = 2000, 64, 8
"""Synthetic jobs and uniform nodes when not given. They are not the fields' described
defaults, so that a form (which sends every described default) can run on a cluster or
a trace, where giving them is refused."""
SPLIT_MIN_JOBS = 2_000
SPLIT_MIN_NODES = 128
"""A run with several policies is split (one part per policy) from this many jobs
and nodes: smaller replays take less than a part's fixed cost (a task, a row,
the nodes and workload loaded again), ~0.1-0.3 s (``docs/benchmarks.md`` "sweeps")."""


def _policies(value: Any) -> list[str]:
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise ScenarioInputError.one("params.policies", "one policy or several, separated by "
                                                        "commas (e.g. fgd,best-fit,random)")
    out: list[str] = []
    for i, item in enumerate(items):
        name = item.strip() if isinstance(item, str) else item
        if not isinstance(name, str) or name not in POLICIES:
            raise ScenarioInputError.one(
                f"params.policies[{i}]",
                f"unknown policy {name!r} (choose from {', '.join(sorted(POLICIES))})")
        if name not in out:
            out.append(name)
    return out


def _int_or(mine: Mapping[str, Any], spec: FieldSpec, fallback: int) -> int:
    """The integer option ``spec`` (checked against its bounds), ``fallback`` if absent."""
    return int_option({spec.name: mine.get(spec.name, fallback)}, spec)


def _number(mine: Mapping[str, Any], spec: FieldSpec) -> float:
    value = mine.get(spec.name, spec.default)
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            (spec.min is not None and value < spec.min) or \
            (spec.max is not None and value > spec.max):
        raise ScenarioInputError.one(f"params.{spec.name}",
                                     f"a number from {spec.min:g} to {spec.max:g}, got {value!r}")
    return float(value)


@register
class SchedulingKind(ScenarioKind):
    name = "scheduling"
    label = "Scheduling policies"
    description = ("Replay a trace or synthetic jobs on the cluster under one or several "
                   "placement policies: GPU allocation rate, utilisation, fragmentation, "
                   "queueing and AllReduce times.")
    fields = (
        FieldSpec("policies", "choice_list", "Policies", "One or several, replayed side by "
                  "side (a list, or one comma-separated string: fgd,best-fit,random).",
                  default=["fgd", "best-fit", "topology-aware"], choices=tuple(POLICIES)),
        FieldSpec("mode", "choice", "Mode", "arrival-only: jobs never leave, arrivals go on "
                  "past capacity (the FGD paper); full: jobs run for their duration and queue.",
                  default="arrival-only", choices=MODES),
        FieldSpec("trace", "integer", "Trace", "An uploaded trace (/api/jobs/traces/): its jobs, "
                  "and its node list when there is no cluster. Empty: synthetic jobs.", min=1),
        FieldSpec("jobs", "integer", "Synthetic jobs", "Jobs drawn from the documented "
                  f"distributions when there is no trace (empty: {DEFAULT_JOBS:,}).", min=1,
                  max=MAX_JOBS),
        FieldSpec("target_load", "number", "Arrived load", "arrival-only: stop when the arrived "
                  "GPU demand is this share of the cluster's cards.", default=1.3, min=0.01,
                  max=100),
        FieldSpec("servers", "integer", "Servers", "Without a cluster or a trace node list: "
                  f"this many identical servers (empty: {DEFAULT_SERVERS}).", min=1,
                  max=MAX_SERVERS),
        FieldSpec("gpus_per_server", "integer", "Cards per server", "Of those servers "
                  f"(empty: {DEFAULT_GPUS}).", min=1, max=64),
        FieldSpec("allreduce_bytes", "integer", "AllReduce size (bytes)", "The collective each "
                  "multi-card placement is priced for.", default=1 << 30, min=1),
        FieldSpec("seed", "integer", "Seed", "Synthetic jobs, random policy, resampling.",
                  default=0, min=0),
        FieldSpec("from_live", "boolean", "From the live twin", "Start from the twin's running "
                  "jobs and failed cards.", default=False, needs_cluster=True),
    )

    # ------------------------------------------------------------- prepare
    def prepare(self, params: Mapping[str, Any], cluster: Any | None) -> dict[str, Any]:
        rest, mine = self.split(params)
        if rest:
            key = sorted(rest)[0]
            allowed = ", ".join(sorted(self.options))
            raise ScenarioInputError.one(f"params.{key}", f"unknown field for a scheduling "
                                                          f"scenario (allowed: {allowed})")
        options: dict[str, Any] = {
            "policies": _policies(mine.get("policies", self.field("policies").default)),
            "mode": mine.get("mode", "arrival-only"),
            "target_load": _number(mine, self.field("target_load")),
            "seed": int_option(mine, self.field("seed")),
            "allreduce_bytes": int_option(mine, self.field("allreduce_bytes")),
        }
        if options["mode"] not in MODES:
            raise ScenarioInputError.one("params.mode", f"one of {', '.join(MODES)}, got "
                                                        f"{options['mode']!r}")
        from_live = mine.get("from_live", False)
        if not isinstance(from_live, bool):
            raise ScenarioInputError.one("params.from_live", "true or false")
        if from_live and cluster is None:
            raise ScenarioInputError.one("params.from_live", "needs a cluster (the live twin's "
                                                             "jobs and failed cards)")
        trace = self._trace(mine)
        inputs: dict[str, Any] = {"options": options}
        inputs["workload"] = ({"source": "trace", "trace": trace} if trace else
                              {"source": "synthetic", "jobs": _int_or(mine, self.field("jobs"),
                                                                      DEFAULT_JOBS)})
        if trace and "jobs" in mine:
            raise ScenarioInputError.one("params.jobs", "the jobs come from the trace; give "
                                                        "either trace or jobs")
        inputs["nodes"] = self._nodes(mine, cluster, trace, from_live, inputs)
        return inputs

    def _trace(self, mine: Mapping[str, Any]) -> dict[str, Any] | None:
        if mine.get("trace") is None:
            return None
        from twin.jobs.models import Trace

        trace_id = int_option(mine, self.field("trace"))
        row = Trace.objects.filter(pk=trace_id).values("id", "name", "sha256", "job_count",
                                                       "node_count").first()
        if row is None:
            raise ScenarioInputError.one("params.trace", f"no trace {trace_id} (upload one "
                                                         f"to /api/jobs/traces/)")
        if row["job_count"] > MAX_JOBS:
            raise ScenarioInputError.one("params.trace", f"{row['job_count']:,} jobs: at most "
                                                         f"{MAX_JOBS:,} per run")
        return row

    def _nodes(self, mine: Mapping[str, Any], cluster: Any | None, trace: dict[str, Any] | None,
               from_live: bool, inputs: dict[str, Any]) -> dict[str, Any]:
        shaped = [k for k in ("servers", "gpus_per_server") if k in mine]
        if cluster is not None:
            if shaped:
                raise ScenarioInputError.one(f"params.{shaped[0]}", f"the nodes come from "
                                                                    f"cluster {cluster.name!r}")
            return self._cluster_nodes(cluster, from_live, inputs)
        if trace and trace["node_count"]:
            if shaped:
                raise ScenarioInputError.one(f"params.{shaped[0]}", "the nodes come from the "
                                                                    "trace's node list")
            return {"source": "trace", "trace": trace}
        return {"source": "uniform",
                "servers": _int_or(mine, self.field("servers"), DEFAULT_SERVERS),
                "gpus_per_server": _int_or(mine, self.field("gpus_per_server"), DEFAULT_GPUS)}

    def _cluster_nodes(self, cluster: Any, from_live: bool,
                       inputs: dict[str, Any]) -> dict[str, Any]:
        from django.db.models import Min

        from twin.hardware.models import Card, Server
        from twin.jobs.capacity import live_capacity

        live = live_capacity(cluster.pk)
        if not live.records:
            raise ScenarioInputError.one("cluster", f"cluster {cluster.name!r} has no servers "
                                                    f"to schedule on")
        scale_up = Card.objects.filter(supernode__cluster=cluster).aggregate(
            g=Min("accelerator__scaleup_gbps"))["g"]
        nic = Server.objects.filter(rack__cluster=cluster).aggregate(g=Min("nic_gbps"))["g"]
        inputs["allreduce"] = {"nvlink_gbps": float(scale_up) * 8 / 2 if scale_up else 3600.0,
                               "nic_gbps": float(nic) if nic else 400.0}
        out: dict[str, Any] = {"source": "cluster", "cluster": {"id": cluster.pk,
                                                                "name": cluster.name},
                               "records": live.records, "server_ids": live.server_ids}
        if from_live:
            snapshot = live_state(cluster)
            _fail_as_forked(live, snapshot)
            out["live_jobs"] = _pinned(snapshot, live)
            out["failed_cards"] = sum(len(r["failed_gpus"]) for r in live.records)
        return out

    # ----------------------------------------------------------------- run
    def run(self, inputs: Mapping[str, Any], progress: Progress) -> dict[str, Any]:
        return self._replay(inputs, inputs["options"]["policies"], progress)

    # A sweep: the policies replay independently (each simulate() is seeded by
    # ``seed`` alone), so each part replays a contiguous run of them — when a
    # replay is long enough to be worth a part (SPLIT_MIN_JOBS, SPLIT_MIN_NODES).
    def parts(self, inputs: Mapping[str, Any], most: int) -> list[dict[str, Any]]:
        work, nodes = inputs["workload"], inputs["nodes"]
        jobs = work["jobs"] if work["source"] == "synthetic" else work["trace"]["job_count"]
        servers = {"uniform": lambda: nodes["servers"], "cluster": lambda: len(nodes["records"]),
                   "trace": lambda: nodes["trace"]["node_count"]}[nodes["source"]]()
        if jobs < SPLIT_MIN_JOBS or servers < SPLIT_MIN_NODES:
            return []
        count = min(most, len(inputs["options"]["policies"]))
        if count < 2:
            return []
        chunks = np.array_split(np.arange(len(inputs["options"]["policies"])), count)
        return [{"policies": chunk.tolist()} for chunk in chunks]

    def run_part(self, inputs: Mapping[str, Any], part: Mapping[str, Any],
                 progress: Progress) -> dict[str, Any]:
        policies = [inputs["options"]["policies"][i] for i in part["policies"]]
        return self._replay(inputs, policies, progress)

    def merge(self, inputs: Mapping[str, Any],
              partials: list[dict[str, Any]]) -> dict[str, Any]:
        return {**partials[0], "policies": [r for p in partials for r in p["policies"]]}

    def _replay(self, inputs: Mapping[str, Any], policies: list[str],
                progress: Progress) -> dict[str, Any]:
        """Replay the run's workload under ``policies``, in order."""
        progress(0.02, "reading the nodes and jobs")
        nodes, node_info = _load_nodes(inputs["nodes"])
        pinned = inputs["nodes"].get("live_jobs") or []
        work, work_info = _load_workload(inputs, pinned)
        options = inputs["options"]
        price = default_allreduce(float(options["allreduce_bytes"]),
                                  **(inputs.get("allreduce") or {}))
        results = []
        share = 1.0 / len(policies)
        for i, policy in enumerate(policies):

            def tick(done: float, i: int = i, policy: str = policy) -> None:
                progress(0.05 + 0.93 * share * (i + done), f"{policy}: {done:.0%} of arrivals")

            try:
                result = simulate(nodes, work, policy, mode=options["mode"], seed=options["seed"],
                                  allreduce=price, progress=tick,
                                  target_load=options["target_load"], keep_placements=True,
                                  initial=[{"placement": p["placement"],
                                            "remaining_s": p["remaining_s"]} for p in pinned])
            except SchedulingInputError as exc:
                raise ScenarioInputError.one(f"params.{exc.field}", exc.reason) from exc
            results.append({**result.to_dict(),
                            "job_table": detail.job_table(result, work, nodes, price),
                            "rack_timeline": detail.rack_timeline(result, nodes, pinned)})
        out = {"policies": results, "nodes": node_info, "workload": work_info,
               "mode": options["mode"], "allreduce_bytes": options["allreduce_bytes"],
               "racks": detail.rack_capacity(nodes)}
        return jsonable(out)

    def rows(self, result: Mapping[str, Any]) -> list[tuple[str, str]]:
        nodes, work = result.get("nodes") or {}, result.get("workload") or {}
        out = [("nodes", f"{fmt(nodes.get('count'))} nodes, {fmt(nodes.get('gpus'))} cards "
                         f"({nodes.get('source')})"),
               ("workload", f"{fmt(work.get('jobs'))} jobs ({work.get('source')}), "
                            f"mode {result.get('mode')}")]
        if work.get("note"):
            out.append(("from live", str(work["note"])))
        for r in result.get("policies") or []:
            out.extend(_slowest_row(r))
        for r in result.get("policies") or []:
            jobs = r.get("jobs") or {}
            ar = r.get("allreduce") or {}
            p50 = ar.get("p50")
            out.append((r.get("policy", "?"),
                        f"allocation {r['gpu_allocation_rate']:.1%}, utilisation "
                        f"{r.get('utilisation', 0):.1%}, unallocated "
                        f"{fmt(r.get('unallocated_gpus'))} cards, placed "
                        f"{fmt(jobs.get('placed'))} / failed {fmt(jobs.get('failed'))}, "
                        f"AllReduce p50 {'—' if p50 is None else f'{p50 * 1e3:.2f} ms'}, "
                        f"{r.get('wall_s', 0):.2f} s"))
        return out


def _slowest_row(r: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The job table's three slowest rows of a policy, as one line."""
    table = r.get("job_table") or {}
    rows = sorted((x for x in table.get("rows") or [] if x.get("slowest")),
                  key=lambda x: -(x.get("jct_s") or x.get("allreduce_s") or 0))[:3]
    if not rows:
        return []

    def one(x: Mapping[str, Any]) -> str:
        what = (f"JCT {x['jct_s']:,.0f} s" if x.get("jct_s") is not None else
                f"AllReduce {x['allreduce_s'] * 1e3:.2f} ms"
                if x.get("allreduce_s") is not None else "running")
        return f"{x['job']} ({x['size']:g} cards, {what}, {x['nodes']} node(s))"

    return [(f"{r.get('policy', '?')} slowest", "; ".join(one(x) for x in rows)
             + f" — table: {table.get('shown')}")]


def _card_places(card_ids: set[int]) -> dict[int, tuple[int, int]]:
    """card id → (server id, slot), for the cards named (one query)."""
    from twin.hardware.models import Card

    return {int(c): (int(s), int(slot)) for c, s, slot in Card.objects.filter(
        pk__in=sorted(card_ids)).order_by().values_list("id", "server_id", "slot")}


def _fail_as_forked(live: Any, snapshot: LiveSnapshot) -> None:
    """Make the nodes' failed cards the snapshot's (failed or in maintenance when it
    was taken), keeping the empty slots: the run starts from the forked state even
    when it reuses an earlier run's snapshot."""
    from twin.jobs.constants import UNAVAILABLE_CARD_STATES

    node_of = live.node_of_server
    down = snapshot.down_cards(*UNAVAILABLE_CARD_STATES)
    now_down = set(_unavailable_now(live.cluster_id))
    places = _card_places(down | now_down)
    per_node: dict[int, set[int]] = {}
    for card, (server, slot) in places.items():
        if card in now_down:
            node = node_of.get(server)
            if node is not None:
                live.records[node]["failed_gpus"] = [
                    g for g in live.records[node]["failed_gpus"] if g != slot]
    for card in down:
        if card in places and places[card][0] in node_of:
            per_node.setdefault(node_of[places[card][0]], set()).add(places[card][1])
    for node, slots in per_node.items():
        rec = live.records[node]
        rec["failed_gpus"] = sorted(set(rec["failed_gpus"]) | {g for g in slots
                                                               if g < rec["gpus"]})


def _unavailable_now(cluster_id: int) -> list[int]:
    from twin.hardware.models import Card
    from twin.jobs.constants import UNAVAILABLE_CARD_STATES

    return list(Card.objects.filter(server__rack__cluster_id=cluster_id,
                                    status__in=UNAVAILABLE_CARD_STATES)
                .order_by().values_list("id", flat=True))


def _pinned(snapshot: LiveSnapshot, live: Any) -> list[dict[str, Any]]:
    """The snapshot's running jobs as ``simulate(initial=...)`` pins them: their pieces
    (not on a card that failed under them) as nodes and slots of ``live``, and their
    remaining expected seconds when the snapshot was taken."""
    node_of = live.node_of_server
    places = _card_places({c for job in snapshot.running for c in job.cards})
    failed = {(i, g) for i, rec in enumerate(live.records) for g in rec["failed_gpus"]}
    out = []
    for job in snapshot.running:
        pieces = []
        for card, milli in zip(job.cards, job.share_milli, strict=True):
            server, slot = places.get(card, (-1, -1))
            node = node_of.get(server)
            if node is not None and (node, slot) not in failed:
                pieces.append([node, slot, milli / 1000.0])
        if not pieces:
            continue
        out.append({"name": job.name, "tenant": job.tenant, "placement": pieces,
                    "remaining_s": job.remaining_s(snapshot.taken_at)})
    return out


def _trace_row(ref: Mapping[str, Any]) -> Any:
    from twin.jobs.models import Trace

    row = Trace.objects.filter(pk=ref["id"]).first()
    if row is None or row.sha256 != ref["sha256"]:
        raise ScenarioInputError.one("params.trace", f"trace {ref['id']} was deleted or "
                                                     f"changed since the run was submitted")
    return row


def _load_nodes(spec: Mapping[str, Any]) -> tuple[Nodes, dict[str, Any]]:
    source = spec["source"]
    if source == "cluster":
        nodes = Nodes.from_records(spec["records"])
        info = {"cluster": spec["cluster"]}
    elif source == "trace":
        data = _trace_row(spec["trace"]).nodes_dict() or {}
        nodes = Nodes.from_records(data.get("nodes") or [])
        info = {"trace": spec["trace"]["id"]}
    else:
        nodes = Nodes.uniform(int(spec["servers"]), int(spec["gpus_per_server"]))
        info = {}
    return nodes, {"source": source, "count": len(nodes), "gpus": nodes.total_gpus,
                   "failed_cards": int(nodes.failed.sum()), **info}


def _load_workload(inputs: Mapping[str, Any],
                   live_jobs: list[dict[str, Any]]) -> tuple[Workload, dict[str, Any]]:
    spec = inputs["workload"]
    options = inputs["options"]
    if spec["source"] == "trace":
        records = _trace_row(spec["trace"]).workload_dict().get("jobs") or []
        work = Workload.from_records(records)
    else:
        work = synthetic_workload(int(spec["jobs"]), seed=int(options["seed"]))
    info: dict[str, Any] = {"source": spec["source"], "jobs": len(work)}
    if live_jobs:
        cards = sum(p[2] for job in live_jobs for p in job["placement"])
        info["live_jobs"] = len(live_jobs)
        info["note"] = (f"{len(live_jobs)} running job(s) of the twin hold their {cards:g} "
                        f"card(s) from the start (pinned: "
                        + ("for their remaining expected time" if options["mode"] == "full"
                           else "for the whole run") + "); the policy places only the workload")
    info["gpu_demand"] = float(work.gpu_demand.sum())
    return work, info
