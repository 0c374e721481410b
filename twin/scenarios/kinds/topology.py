"""The topology kind: hops, latency, bisection and latency specs of a topology."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simulation.topology import analyze
from simulation.topology.metrics import DEFAULT_SAMPLES
from twin.scenarios.kinds.base import (
    FieldSpec,
    Progress,
    ScenarioKind,
    fmt,
    int_option,
    jsonable,
    register,
)
from twin.scenarios.kinds.limits import MAX_SAMPLES

__all__ = ["TopologyKind"]


@register
class TopologyKind(ScenarioKind):
    name = "topology"
    label = "Topology metrics"
    description = "Hop histogram, average and diameter, latency, bisection, latency specs."
    fields = (
        FieldSpec("samples", "integer", "Samples", "Source cards sampled when a metric "
                  "cannot be computed exactly.", default=DEFAULT_SAMPLES, min=2,
                  max=MAX_SAMPLES),
        FieldSpec("seed", "integer", "Seed", "Random seed of the sampling.", default=0, min=0),
    )

    def prepare(self, params: Mapping[str, Any], cluster: Any | None) -> dict[str, Any]:
        inputs, _, _ = self.topology(params, cluster)
        _, mine = self.split(params)
        inputs["options"] = {f.name: int_option(mine, f) for f in self.fields}
        return inputs

    def run(self, inputs: Mapping[str, Any], progress: Progress) -> dict[str, Any]:
        progress(0.05, "building the topology")
        spec, topo = self.build(inputs)
        progress(0.3, f"hops, latency and bisection of {topo.n_endpoints:,} cards")
        options = inputs.get("options", {})
        result = analyze(topo, spec=spec, samples=options.get("samples", DEFAULT_SAMPLES),
                         seed=options.get("seed", 0))
        if "cluster" in inputs:
            result["cluster"] = inputs["cluster"]
        return jsonable(result)

    def rows(self, result: Mapping[str, Any]) -> list[tuple[str, str]]:
        lat = result.get("latency_ns") or {}
        out = [
            ("topology", f"{result.get('name')} ({result.get('family')})"),
            ("cards / nodes / links", f"{fmt(result.get('cards'))} / "
                                      f"{fmt(result.get('nodes'))} / {fmt(result.get('links'))}"),
            ("avg_hops", f"{fmt(result.get('avg_hops'), 8)}"
                         + (f" (= {result['avg_hops_exact']})" if result.get("avg_hops_exact")
                            else "")),
            ("diameter_hops", fmt(result.get("diameter_hops"))),
            ("latency_ns avg / p99 / max", f"{fmt(lat.get('average'))} / {fmt(lat.get('p99'))}"
                                           f" / {fmt(lat.get('max'))}"),
            ("bisection_links", fmt(result.get("bisection_links"))),
            ("bisection_gbps", fmt(result.get("bisection_gbps"))),
            ("method", f"{result.get('method')} (exact: {result.get('exact')})"),
        ]
        fabric = result.get("fabric")
        if fabric:
            out.append(("one supernode fabric: avg / diameter",
                        f"{fabric.get('avg_hops_exact')} / {fabric.get('diameter_hops')}"))
        for req in result.get("requirements") or []:
            if not req.get("applicable", True):
                continue
            verdict = "pass" if req.get("passed") else "FAIL"
            out.append((f"requirement {req.get('name', '')}", f"{verdict} "
                        f"(worst {fmt(req.get('worst_ns'))} ns)"))
        return out
