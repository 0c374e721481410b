"""The resilience kind: failures, checkpoints and recovery of one training job.

Runs :func:`simulation.resilience.simulate_resilience`: interruptions by cause
(per-component rates calibrated on Llama 3's Table 5, scaled to the job), the
effective training time ratio, lost work, time to recover, the optimal
checkpoint interval (Young, Daly, simulated) with the ETTR-vs-interval curve, a
failure timeline, availability and the spares a target needs.

The job's hardware comes from the run's cluster (its cards, cards per server and
accelerator) or from ``accelerator`` (a catalogue slug) and ``cards``. On a cluster the
storage tiers are the cluster's own (:func:`cluster_tiers`): its servers' host memory
and local NVMe, its parallel file system's aggregate bandwidth and capacity (Σ over
its file-system appliances); an explicit ``pfs_gbps`` overrides the file system's
bandwidth (a what-if), and a cluster without appliances takes the default. The
result's ``storage`` says where each tier's figures came from. The model
is ``params_b`` (billions of parameters) or ``model``, a slug of :data:`MODELS`.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simulation.resilience import CLASSES, DGX_H100_TIERS, simulate_resilience
from simulation.resilience import ResilienceInputError as TopologyErrorAlias
from simulation.resilience.study import ettr_curve, sweep_intervals
from twin.scenarios.inputs import ConversionError, resilience_cluster
from twin.scenarios.kinds.base import (
    FieldSpec,
    Progress,
    ScenarioInputError,
    ScenarioKind,
    fmt,
    jsonable,
    register,
)

__all__ = ["MODELS", "SPLIT_MIN_RUNS", "ResilienceKind", "cluster_tiers"]

MODELS: dict[str, float] = {
    "llama3-8b": 8e9,  # counts, not billions  # Dubey et al. 2024
    "llama3-70b": 70e9,
    "llama3-405b": 405e9,
    "gpt3-175b": 175e9,  # Brown et al. 2020
    "megatron-530b": 530e9,  # Smith et al. 2022 (MT-NLG)
    "megatron-1t": 1e12,  # Narayanan et al. SC'21
    "mixtral-8x7b": 46.7e9,  # Jiang et al. 2024: 46.7B total parameters
}
"""Parameter counts of known models (billions as published)."""

TIER_NAMES = tuple(t.name for t in DGX_H100_TIERS)
DEFAULT_PFS_GBPS = next(t.aggregate_gbps for t in DGX_H100_TIERS if t.name == "pfs")
"""The file system's aggregate without a cluster (or a cluster without appliances)."""
MAX_CARDS = 10_000_000
SPLIT_MIN_RUNS = 24
"""Simulated windows (curve points × histories) a part computes at least: a window
takes 15-35 ms (1,024-16,384 cards, 7-54 days, measured here), so a part works
≥ ~0.5 s against its fixed cost of ~0.1-0.3 s (a task, a row, the histories
drawn again); the default study (18 points × 3 histories) makes two parts."""


def _fields() -> tuple[FieldSpec, ...]:
    spec = [
        FieldSpec("accelerator", "string", "Accelerator", "Catalogue slug (ignored with a "
                  "cluster: its own cards are used).", default="h100-sxm5-80gb"),
        FieldSpec("cards", "integer", "Cards", "Cards of the job (required without a "
                  "cluster; with one, at most its cards, default all).", min=1, max=MAX_CARDS),
        FieldSpec("days", "number", "Days", "Length of the window simulated.", default=30.0,
                  min=0.01, max=3650),
        FieldSpec("model", "choice", "Model", "A known model size (params_b overrides).",
                  default="llama3-70b", choices=tuple(MODELS)),
        FieldSpec("params_b", "number", "Parameters (billions)", "Model size; sets the "
                  "checkpoint size.", min=0.001, max=100_000),
        FieldSpec("tp", "integer", "Tensor parallel", "", default=8, min=1),
        FieldSpec("pp", "integer", "Pipeline parallel", "", default=1, min=1),
        FieldSpec("zero", "integer", "ZeRO stage", "≥ 1 shards the optimizer over data "
                  "parallel, 3 the weights too.", default=1, min=0, max=3),
        FieldSpec("checkpoint_interval_min", "number", "Checkpoint interval (min)", "",
                  default=30.0, min=0.01, max=7 * 24 * 60),
        FieldSpec("checkpoint_mode", "choice", "Checkpoint mode", "sync: training waits "
                  "until durable; async: only for the copy to the first tier.",
                  default="async", choices=("async", "sync")),
        FieldSpec("storage_tiers", "string", "Storage tiers", f"Comma-separated, in order, of "
                  f"{', '.join(TIER_NAMES)}.", default=",".join(TIER_NAMES)),
        FieldSpec("pfs_gbps", "number", "File system bandwidth (GB/s)", "Aggregate of the "
                  "parallel file system; empty: the cluster's appliances, else "
                  f"{DEFAULT_PFS_GBPS:g} GB/s.", min=0.1, max=1e6),
        FieldSpec("replicas", "integer", "In-memory replicas", "Copies in servers' DRAM "
                  "(Gemini); 1 = none beyond the local one.", default=1, min=1, max=8),
        FieldSpec("spares", "integer", "Spare servers", "Empty: the cluster always has a "
                  "free server.", min=0, max=1_000_000),
        FieldSpec("hot_spare", "boolean", "Hot spares", "Replacements are warm standbys "
                  "(swap) rather than cold restarts.", default=False),
        FieldSpec("elastic", "boolean", "Elastic", "With no spare left, shrink by a "
                  "data-parallel replica instead of waiting.", default=False),
        FieldSpec("restart_s", "number", "Restart (s)", "Requeue, relaunch, init.",
                  default=600.0, min=0, max=7 * 86400, advanced=True),
        FieldSpec("swap_s", "number", "Hot-spare swap (s)", "", default=120.0, min=0,
                  max=7 * 86400, advanced=True),
    ]
    spec += [FieldSpec(f"failure_{name}", "number", f"Failure rate × ({name})",
                       "Multiplier of the calibrated rate.", default=1.0, min=0, max=10_000,
                       advanced=True) for name in CLASSES]
    spec += [
        FieldSpec("seed", "integer", "Seed", "", default=0, min=0, max=2**31 - 1),
        FieldSpec("sweep_runs", "integer", "Histories per interval", "For the ETTR curve.",
                  default=3, min=1, max=20, advanced=True),
    ]
    return tuple(spec)


@register
class ResilienceKind(ScenarioKind):
    name = "resilience"
    label = "Resilience"
    description = ("Failures, checkpoints and recovery of a training job: effective training "
                   "time, lost work, optimal checkpoint interval, spares.")
    fields = _fields()
    chart = {"series": "ettr_curve", "x": "interval_min", "y": "ettr", "log_x": True,
             "x_label": "Checkpoint interval (min)", "y_label": "ETTR"}

    def prepare(self, params: Mapping[str, Any], cluster: Any | None) -> dict[str, Any]:
        rest, mine = self.split(params)
        if rest:
            key = sorted(rest)[0]
            raise ScenarioInputError.one(f"params.{key}", (
                f"unknown field for a resilience scenario (allowed: "
                f"{', '.join(sorted(self.options))})"))
        opt = {f.name: mine.get(f.name, f.default) for f in self.fields}
        for f in self.fields:
            self._check(f, opt[f.name])
        hw = self._hardware(opt, cluster)
        count = (opt["params_b"] * 1e9 if opt["params_b"] is not None
                 else MODELS[opt["model"]])
        tiers, storage = self._tiers(opt, hw, pfs_given=opt["pfs_gbps"] is not None,
                                     cluster_name=cluster.name if cluster is not None else "")
        lib = {
            "cards": hw["cards"], "days": opt["days"],
            "cards_per_server": hw["cards_per_server"],
            "hbm_stacks_per_card": hw["hbm_stacks"],
            "params": count, "tp": opt["tp"], "pp": opt["pp"], "zero": opt["zero"],
            "checkpoint": {"interval_min": opt["checkpoint_interval_min"],
                           "mode": opt["checkpoint_mode"], "tiers": tiers,
                           "replicas": opt["replicas"]},
            "recovery": {"restart_s": opt["restart_s"], "swap_s": opt["swap_s"],
                         "hot_spare": opt["hot_spare"], "elastic": opt["elastic"]},
            "spares": opt["spares"],
            "failure_mix": {n: opt[f"failure_{n}"] for n in CLASSES
                            if opt[f"failure_{n}"] != 1.0},
            "seed": opt["seed"], "sweep_runs": opt["sweep_runs"],
        }
        from simulation.resilience import resilience_from_params

        try:
            resilience_from_params(lib)
        except TopologyErrorAlias as exc:
            raise ScenarioInputError.one(f"params.{_kind_field(exc.field)}",
                                         exc.reason) from exc
        inputs: dict[str, Any] = {"resilience": lib, "accelerator": hw["accelerator"],
                                  "model": None if opt["params_b"] is not None else opt["model"],
                                  "storage": storage}
        if cluster is not None:
            inputs["cluster"] = {"id": cluster.pk, "name": cluster.name}
        return jsonable(inputs)

    @staticmethod
    def _check(f: FieldSpec, value: Any) -> None:
        where = f"params.{f.name}"
        if value is None:
            return
        if f.type == "integer" and (isinstance(value, bool) or not isinstance(value, int)):
            raise ScenarioInputError.one(where, f"an integer, got {value!r}")
        if f.type == "number" and (isinstance(value, bool)
                                   or not isinstance(value, int | float)):
            raise ScenarioInputError.one(where, f"a number, got {value!r}")
        if f.type == "boolean" and not isinstance(value, bool):
            raise ScenarioInputError.one(where, f"true or false, got {value!r}")
        if f.type in ("string", "choice") and not isinstance(value, str):
            raise ScenarioInputError.one(where, f"a string, got {value!r}")
        if f.choices is not None and value not in f.choices:
            raise ScenarioInputError.one(where, f"one of {', '.join(f.choices)}, got {value!r}")
        if f.min is not None and value < f.min:
            raise ScenarioInputError.one(where, f"at least {f.min:g}, got {value!r}")
        if f.max is not None and value > f.max:
            raise ScenarioInputError.one(where, f"at most {f.max:g}, got {value!r}")

    @staticmethod
    def _tiers(opt: Mapping[str, Any], hw: Mapping[str, Any], *, pfs_given: bool,
               cluster_name: str) -> tuple[list[Any], dict[str, str]]:
        """The tiers named in ``storage_tiers``, in order, priced on the cluster's storage
        when there is one; with where each tier's figures come from."""
        names = [n.strip() for n in str(opt["storage_tiers"]).split(",") if n.strip()]
        if not names:
            raise ScenarioInputError.one("params.storage_tiers", "name at least one tier")
        on_cluster = cluster_tiers(hw.get("server_storage"), hw.get("pfs"))
        tiers: list[Any] = []
        source: dict[str, str] = {}
        for i, name in enumerate(names):
            if name not in TIER_NAMES:
                raise ScenarioInputError.one("params.storage_tiers", (
                    f"tier {i + 1} {name!r} is unknown; known: {', '.join(TIER_NAMES)}"))
            tier = on_cluster.get(name) or next(
                t for t in DGX_H100_TIERS if t.name == name).to_dict()
            source[name] = f"cluster {cluster_name!r}" if name in on_cluster else "DGX H100 default"
            if name == "local_nvme" and tier["write_gbps"] <= 0:
                raise ScenarioInputError.one("params.storage_tiers", (
                    f"the servers of cluster {cluster_name!r} have no local NVMe; drop "
                    f"local_nvme from the tiers or give the servers drives"))
            if name == "pfs" and (pfs_given or name not in on_cluster):
                tier["aggregate_gbps"] = float(opt["pfs_gbps"] if pfs_given
                                               else DEFAULT_PFS_GBPS)
                tier["aggregate_read_gbps"] = 0.0
                source[name] = "params.pfs_gbps" if pfs_given else (
                    f"default {DEFAULT_PFS_GBPS:g} GB/s" + (
                        f" (cluster {cluster_name!r} has no file-system appliances)"
                        if cluster_name else ""))
            tiers.append(tier)
        return tiers, source

    @staticmethod
    def _hardware(opt: Mapping[str, Any], cluster: Any | None) -> dict[str, Any]:
        from twin.hardware.models import AcceleratorType

        if cluster is not None:
            try:
                hw = resilience_cluster(cluster)
            except ConversionError as exc:
                raise ScenarioInputError.one(exc.field, exc.message) from exc
            cards = opt["cards"] if opt["cards"] is not None else hw["cards"]
            if cards > hw["cards"]:
                raise ScenarioInputError.one("params.cards", (
                    f"{cards:,} cards but cluster {cluster.name!r} has {hw['cards']:,}"))
            hbm, slug, per_server = hw["hbm_gib"], hw["accelerator"], hw["cards_per_server"]
            storage = {"server_storage": hw["server_storage"], "pfs": hw["pfs"]}
        else:
            if opt["cards"] is None:
                raise ScenarioInputError.one("params.cards", "required without a cluster")
            row = AcceleratorType.objects.filter(slug=opt["accelerator"]).values(
                "slug", "hbm_gib").first()
            if row is None:
                known = ", ".join(AcceleratorType.objects.order_by("slug")
                                  .values_list("slug", flat=True)[:20])
                raise ScenarioInputError.one("params.accelerator", (
                    f"no accelerator {opt['accelerator']!r} in the catalogue (known: {known})"))
            cards, hbm, slug, per_server = opt["cards"], float(row["hbm_gib"]), row["slug"], 8
            storage = {"server_storage": None, "pfs": None}
        return {"cards": cards, "accelerator": slug, "cards_per_server": per_server,
                "hbm_stacks": hbm_stacks(hbm), **storage}

    def run(self, inputs: Mapping[str, Any], progress: Progress) -> dict[str, Any]:
        progress(0.05, "drawing failure histories")
        result = simulate_resilience(
            inputs["resilience"],
            progress=lambda share: progress(0.05 + 0.9 * share, "sweeping checkpoint intervals"),
        ).to_dict()
        return self._result(inputs, result)

    # A sweep: the ETTR-vs-interval curve, its points independent (every part draws
    # the same failure histories from the seed), dealt round-robin to the parts;
    # the merge runs the study at the requested interval with the curve handed in.
    # Worth a part from SPLIT_MIN_RUNS simulated windows (points × histories).
    def parts(self, inputs: Mapping[str, Any], most: int) -> list[dict[str, Any]]:
        points = sweep_intervals(inputs["resilience"])
        runs = points * int(inputs["resilience"].get("sweep_runs") or 3)
        count = min(most, points, runs // SPLIT_MIN_RUNS)
        if count < 2:
            return []
        return [{"points": list(range(i, points, count))} for i in range(count)]

    def run_part(self, inputs: Mapping[str, Any], part: Mapping[str, Any],
                 progress: Progress) -> dict[str, Any]:
        rows = ettr_curve(inputs["resilience"], list(part["points"]),
                          progress=lambda share: progress(share, "sweeping checkpoint "
                                                                 "intervals"))
        return {"points": list(part["points"]), "rows": rows}

    def merge(self, inputs: Mapping[str, Any],
              partials: list[dict[str, Any]]) -> dict[str, Any]:
        by_point = {i: row for p in partials for i, row in zip(p["points"], p["rows"],
                                                                 strict=True)}
        curve = [by_point[i] for i in range(len(by_point))]
        return self._result(inputs, simulate_resilience(inputs["resilience"],
                                                        curve=curve).to_dict())

    @staticmethod
    def _result(inputs: Mapping[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        result["accelerator"] = inputs.get("accelerator")
        result["model"] = inputs.get("model")
        result["storage_source"] = inputs.get("storage") or {}
        if "cluster" in inputs:
            result["cluster"] = inputs["cluster"]
        return jsonable(result)

    def rows(self, result: Mapping[str, Any]) -> list[tuple[str, str]]:
        inter = result.get("interruptions") or {}
        opt = result.get("optimal_checkpoint_interval_min") or {}
        ttr = result.get("time_to_recover_s") or {}
        avail = result.get("availability") or {}
        claim = (result.get("checkpoint") or {}).get("claim_15s") or {}
        causes = ", ".join(f"{k} {v}" for k, v in (inter.get("by_class") or {}).items())
        return [
            ("job", f"{fmt(result.get('cards'))} cards ({result.get('accelerator')}), "
                    f"{fmt(result.get('days'))} days"),
            ("interruptions", f"{fmt(inter.get('total'))} (expected "
                              f"{fmt(inter.get('expected_total'))}; one every "
                              f"{fmt(result.get('mtbi_h'))} h): {causes}"),
            ("ETTR", f"{fmt(result.get('ettr'))} at {fmt(result.get('checkpoint_interval_min'))}"
                     f" min (Daly's formula: {fmt(result.get('ettr_daly'))})"),
            ("lost work", f"{fmt(result.get('lost_hours'))} h "
                          f"({fmt(result.get('lost_card_hours'))} card-hours)"),
            ("time to recover", f"mean {fmt(result.get('mean_time_to_recover_s'))} s, p50 "
                                f"{fmt(ttr.get('p50'))} s, p99 {fmt(ttr.get('p99'))} s"),
            ("optimal interval", f"Young {fmt(opt.get('young'))} min, Daly "
                                 f"{fmt(opt.get('daly'))} min, simulated "
                                 f"{fmt(opt.get('simulated'))} min (ETTR "
                                 f"{fmt(opt.get('simulated_ettr'))})"),
            ("storage tiers", "; ".join(f"{tier}: {where}" for tier, where in
                                        (result.get("storage_source") or {}).items())),
            ("checkpoint ≤ 15 s", f"stall {'yes' if claim.get('holds_for_blocking') else 'no'}"
                                  f", durable {'yes' if claim.get('holds_for_durable') else 'no'}"
                                  f": {claim.get('why', '')}"),
            ("availability", f"service {fmt(avail.get('service'))}, full size "
                             f"{fmt(avail.get('full_size_simulated'))}; spares for 99.9 %: "
                             f"{fmt((avail.get('spares_needed') or {}).get('0.999'))}"),
        ]


GIB = 2**30 / 1e9
"""GB per GiB: host memory is sold in binary units, tiers count decimal GB."""


def cluster_tiers(server: Mapping[str, Any] | None,
                  pfs: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The storage tiers of a cluster, from its model (``resilience_cluster``).

    * ``host_dram``: the servers' memory as capacity; the copy rate out of HBM stays
      the DGX default (a PCIe bound of the cards, not a property of the DRAM).
    * ``local_nvme``: the servers' drives (capacity, sequential read and write).
    * ``pfs``: Σ of the file-system appliances as the shared aggregate (write for
      saves, read for restores) and capacity; each server's own share stays the
      default client bandwidth (its storage NICs).
    A tier the cluster does not model is absent (the caller keeps the default).
    """
    base = {t.name: t.to_dict() for t in DGX_H100_TIERS}
    tiers: dict[str, dict[str, Any]] = {}
    if server is not None:
        tiers["host_dram"] = base["host_dram"] | {
            "capacity_gb": round(server["memory_gib"] * GIB, 3),
            "source": f"the cluster's servers: {server['memory_gib']:,} GiB; copy rate: "
                      f"{base['host_dram']['source']}"}
        tiers["local_nvme"] = base["local_nvme"] | {
            "write_gbps": server["nvme_write_gb_per_s"],
            "read_gbps": server["nvme_read_gb_per_s"],
            "capacity_gb": server["nvme_tb"] * 1000.0,
            "source": f"the cluster's servers: {server['nvme_tb']:g} TB NVMe, "
                      f"{server['nvme_read_gb_per_s']:g} GB/s read, "
                      f"{server['nvme_write_gb_per_s']:g} GB/s write"}
    if pfs is not None:
        tiers["pfs"] = base["pfs"] | {
            "aggregate_gbps": pfs["write_gb_per_s"],
            "aggregate_read_gbps": pfs["read_gb_per_s"],
            "capacity_gb": pfs["capacity_tb"] * 1000.0,
            "source": f"the cluster's file system: {pfs['appliances']} appliances, "
                      f"{pfs['write_gb_per_s']:g} GB/s write, {pfs['read_gb_per_s']:g} GB/s "
                      f"read, {pfs['capacity_tb']:g} TB"}
    return tiers


def hbm_stacks(hbm_gib: float) -> int:
    """HBM stacks of a card: 16 GB stacks up to 96 GB (H100: 5), 24 GB HBM3e stacks above
    (H200 141 GB: 6, B200 180 GB: 8) — an estimate from the capacity."""
    per = 16.0 if hbm_gib <= 96 else 24.0
    return max(1, round(hbm_gib / per))


_FIELD_MAP = {"checkpoint.interval_min": "checkpoint_interval_min",
              "checkpoint.mode": "checkpoint_mode", "checkpoint.replicas": "replicas",
              "params": "params_b", "recovery.restart_s": "restart_s",
              "recovery.swap_s": "swap_s"}


def _kind_field(field: str) -> str:
    """The library names its own fields; the kind's flat field that set it."""
    if field.startswith("checkpoint.tiers"):
        return "storage_tiers"
    if field.startswith("failure_mix."):
        return "failure_" + field.split(".", 1)[1]
    return _FIELD_MAP.get(field, field)
