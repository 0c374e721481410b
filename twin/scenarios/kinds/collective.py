"""The collective kind: time, algbw and busbw per message size, per algorithm."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, replace
from typing import Any

from simulation.collectives import (
    ALGORITHMS,
    OPS,
    CollectiveSpec,
    collective_curve,
    fabric_from_topology,
)
from simulation.collectives.models import MAX_SIZE, CollectivePoint
from simulation.topology import ClusterSpec, FamilySpec, TopologyError
from twin.scenarios.kinds.base import (
    FieldSpec,
    Progress,
    ScenarioInputError,
    ScenarioKind,
    field_default,
    field_required,
    fmt,
    jsonable,
    param_error,
    register,
)
from twin.scenarios.kinds.limits import MAX_SIZES, check_items

__all__ = ["CollectiveKind", "size_rows"]


@register
class CollectiveKind(ScenarioKind):
    name = "collective"
    label = "Collective cost"
    description = "Time, algbw and busbw per message size; the best algorithm per size."
    fields = tuple(
        FieldSpec(name, kind, label, text, required=field_required(CollectiveSpec, name),
                  default=jsonable(field_default(CollectiveSpec, name)), choices=choices,
                  min=low, max=high)
        for name, (kind, label, text, choices, low, high) in {
            "op": ("choice", "Operation", "The collective to price.", OPS, None, None),
            "algorithm": ("choice", "Algorithm", "auto: the best supported one per size.",
                          ("auto", *ALGORITHMS), None, None),
            "ranks": ("integer", "Ranks", "Cards taking part (empty: every card; more than "
                      "one supernode: whole supernodes).", None, 2, None),
            "sizes": ("integer_list", "Message sizes (bytes)", f"One point per size (at most "
                      f"{MAX_SIZES}).", None, 1, MAX_SIZE),
            "compression": ("number", "Compression ratio", "Bytes on the wire divided by "
                            "this (4 = 4:1).", None, 1, None),
            "overhead_ns": ("number", "Overhead per message (ns)", "Software cost added to "
                            "every step.", None, 0, None),
            "reduce_gbps": ("number", "Reduction throughput (Gb/s)", "Must be > 0; empty: "
                            "reductions are free.", None, 0, None),
            "scale_up_efficiency": ("number", "Scale-up efficiency", "Fraction of line rate "
                                    "collectives reach on the scale-up fabric (empty: the "
                                    "default of its technology, e.g. NVLink 0.84).", None, 0, 1),
            "scale_out_efficiency": ("number", "Scale-out efficiency", "The same across the "
                                     "network (empty: e.g. InfiniBand 0.98, RoCE 0.97).", None,
                                     0, 1),
        }.items())
    chart = {"series": "sizes", "x": "size_bytes", "y": "busbw_gbps", "log_x": True,
             "x_label": "Message size (bytes)", "y_label": "Bus bandwidth (Gb/s)"}

    def prepare(self, params: Mapping[str, Any], cluster: Any | None) -> dict[str, Any]:
        _, mine = self.split(params)
        check_items(mine.get("sizes"), "params.sizes", MAX_SIZES, "message sizes")
        try:
            coll = CollectiveSpec.from_dict(mine, "params.")
        except TopologyError as exc:
            raise param_error(exc) from exc
        inputs, spec, _ = self.topology(params, cluster)
        n = spec.n_cards
        ranks = coll.ranks if coll.ranks is not None else n
        if ranks > n:
            raise ScenarioInputError.one("params.ranks", (
                f"{ranks:,} ranks but the topology has only {n:,} cards"))
        _check_algorithm(coll, spec, ranks)
        inputs["collective"] = coll.to_dict()
        return inputs

    def run(self, inputs: Mapping[str, Any], progress: Progress) -> dict[str, Any]:
        progress(0.05, "building the topology")
        _, topo = self.build(inputs)
        coll = CollectiveSpec.from_dict(inputs["collective"])
        progress(0.2, "routing the communication patterns")
        fabric = fabric_from_topology(topo, coll.ranks, overhead_ns=coll.overhead_ns,
                                      scale_up_efficiency=coll.scale_up_efficiency,
                                      scale_out_efficiency=coll.scale_out_efficiency)
        points: list[CollectivePoint] = []
        best: list[CollectivePoint] = []
        last = None
        for i, size in enumerate(coll.sizes):
            part = collective_curve(fabric, replace(coll, sizes=(size,)))
            points += part.points
            best += part.best
            last = part
            progress(0.25 + 0.75 * (i + 1) / len(coll.sizes), f"{size:,} bytes")
        assert last is not None
        per_size = size_rows(points, best)
        result: dict[str, Any] = {
            "op": coll.op, "algorithm": coll.algorithm, "ranks": last.ranks,
            "compression": coll.compression, "levels": last.levels, "sizes": per_size,
            "points": [asdict(p) for p in points], "best": [asdict(p) for p in best],
            "unsupported": last.unsupported, "notes": last.notes,
            "efficiency": last.efficiency,
        }
        if "cluster" in inputs:
            result["cluster"] = inputs["cluster"]
        return jsonable(result)

    def rows(self, result: Mapping[str, Any]) -> list[tuple[str, str]]:
        out = [("operation", f"{result.get('op')} over {fmt(result.get('ranks'))} ranks, "
                             f"algorithm {result.get('algorithm')}")]
        eff = result.get("efficiency") or {}
        if eff:
            out.append(("efficiency", f"scale-up {eff.get('scale_up'):g} "
                                      f"({eff.get('scale_up_from')}), scale-out "
                                      f"{eff.get('scale_out'):g} ({eff.get('scale_out_from')}) "
                                      f"of line rate"))
        for row in result.get("sizes") or []:
            # nccl-tests prints GB/s (bytes); link speeds here are Gb/s (bits): both
            busbw_GBps = row.get("busbw_GBps", row["busbw_gbps"] / 8)
            algbw_GBps = row.get("algbw_GBps", row["algbw_gbps"] / 8)
            out.append((f"{fmt(row['size_bytes'])} B",
                        f"{row['algorithm']:<12} {fmt(row['time_s'] * 1e6)} µs  "
                        f"algbw {fmt(algbw_GBps)} GB/s ({fmt(row['algbw_gbps'])} Gb/s)  "
                        f"busbw {fmt(busbw_GBps)} GB/s ({fmt(row['busbw_gbps'])} Gb/s)"))
        return out


def size_rows(points: list[CollectivePoint],
              best: list[CollectivePoint]) -> list[dict[str, Any]]:
    """The result's ``sizes``: per size its best algorithm's figures and every
    algorithm's, in the order of ``best``.

    Linear in the number of points: they are grouped by size in one pass (a
    scan of every point per size was quadratic — 40,000 sizes held a worker
    for minutes).
    """
    by_size: dict[int, dict[str, dict[str, float]]] = {}
    for p in points:
        by_size.setdefault(p.size_bytes, {})[p.algorithm] = {
            "time_s": p.time_s, "algbw_gbps": p.algbw_gbps, "busbw_gbps": p.busbw_gbps,
            "busbw_GBps": p.busbw_GBps}
    return [{
        "size_bytes": point.size_bytes, "algorithm": point.algorithm,
        "time_s": point.time_s, "algbw_gbps": point.algbw_gbps,
        "busbw_gbps": point.busbw_gbps, "algbw_GBps": point.algbw_GBps,
        "busbw_GBps": point.busbw_GBps,
        "algorithms": dict(by_size.get(point.size_bytes, {})),
    } for point in best]


def _check_nvls(coll: CollectiveSpec, spec: FamilySpec | ClusterSpec, ranks: int) -> None:
    """NVLS needs AllReduce inside one switch domain that reduces in flight."""
    field = "params.algorithm"
    if coll.op != "allreduce":
        raise ScenarioInputError.one(field, "in-switch reduction (NVLS) is modelled for "
                                            "AllReduce only")
    fabric = spec.supernodes[0].fabric if isinstance(spec, ClusterSpec) else None
    if fabric is None or not fabric.in_switch_reduction:
        raise ScenarioInputError.one(field, "nvls needs a scale-up fabric whose switches reduce "
                                            "in flight (a supernode with in_switch_reduction)")
    domain = fabric.dims[1] if fabric.kind == "server_mesh" else fabric.n_cards
    if ranks > domain:
        raise ScenarioInputError.one(field, f"nvls needs every rank in one switch domain of "
                                            f"{domain} cards; got {ranks:,} ranks")


def _check_algorithm(coll: CollectiveSpec, spec: FamilySpec | ClusterSpec, ranks: int) -> None:
    """Refuse up front what the cost models would refuse after building everything."""
    field = "params.algorithm"
    if coll.algorithm == "tree" and coll.op != "allreduce":
        raise ScenarioInputError.one(field, "the double binary tree only does AllReduce (as in "
                                            "NCCL)")
    if coll.algorithm == "nvls":
        _check_nvls(coll, spec, ranks)
    if isinstance(spec, ClusterSpec):
        first = spec.supernodes[0].fabric.n_cards
        if ranks > first and ranks % first:
            raise ScenarioInputError.one("params.ranks", (
                f"{ranks:,} ranks must fill whole supernodes of {first:,} cards (or fit in one)"))
        if coll.algorithm == "hierarchical" and ranks <= first:
            raise ScenarioInputError.one(field, "hierarchical needs ranks in more than one "
                                                "supernode")
        if coll.algorithm == "torus" and spec.supernodes[0].fabric.kind not in ("torus", "ring"):
            raise ScenarioInputError.one(field, "the supernode fabric is not a torus")
        return
    if coll.algorithm == "hierarchical":
        raise ScenarioInputError.one(field, "hierarchical needs a cluster (supernodes)")
    if coll.algorithm == "torus":
        if spec.family not in ("torus", "ring"):
            raise ScenarioInputError.one(field, f"a {spec.family} is not a torus")
        if ranks != spec.n_cards:
            raise ScenarioInputError.one(field, f"ranks ({ranks:,}) do not fill the torus")
