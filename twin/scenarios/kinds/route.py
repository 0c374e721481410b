"""The route kind: the fewest-hop or lowest-latency path between two cards."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simulation.topology import route
from twin.scenarios.kinds.base import (
    FieldSpec,
    Progress,
    ScenarioInputError,
    ScenarioKind,
    fmt,
    jsonable,
    register,
)
from twin.scenarios.kinds.cards import card_lookup

__all__ = ["ROUTE_BY", "RouteKind"]

ROUTE_BY = ("hops", "latency")
"""What a route may minimise (the simulation's ``route(by=…)``)."""


@register
class RouteKind(ScenarioKind):
    name = "route"
    label = "Route between two cards"
    description = "Fewest-hop or lowest-latency path with its hops, latency and bottleneck."
    fields = (
        FieldSpec("src", "card", "From", "Card id or serial (a card number without a "
                  "cluster).", required=True),
        FieldSpec("dst", "card", "To", "Card id or serial (a card number without a "
                  "cluster).", required=True),
        FieldSpec("by", "choice", "Minimise", "Fewest hops or lowest latency.",
                  default=ROUTE_BY[0], choices=ROUTE_BY),
    )

    def prepare(self, params: Mapping[str, Any], cluster: Any | None) -> dict[str, Any]:
        inputs, spec, info = self.topology(params, cluster)
        _, mine = self.split(params)
        by = mine.get("by", self.field("by").default)
        if by not in ROUTE_BY:
            raise ScenarioInputError.one("params.by", f"'hops' or 'latency', got {by!r}")
        ends: dict[str, Any] = {}
        for key in ("src", "dst"):
            field = f"params.{key}"
            if key not in mine:
                raise ScenarioInputError.one(field, "this field is required")
            value = mine[key]
            if info is not None:
                card = card_lookup(info, value, field)
                ends[key] = card["node"]
                inputs.setdefault("cards", {})[key] = card
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise ScenarioInputError.one(field, f"a card number (integer), got {value!r}")
            if not 0 <= value < spec.n_cards:
                raise ScenarioInputError.one(
                    field, f"card {value} does not exist (valid: 0…{spec.n_cards - 1})")
            ends[key] = value
        inputs.update(src=ends["src"], dst=ends["dst"], by=by)
        return inputs

    def run(self, inputs: Mapping[str, Any], progress: Progress) -> dict[str, Any]:
        progress(0.1, "building the topology")
        _, topo = self.build(inputs)
        progress(0.5, f"searching a path by {inputs['by']}")
        result = route(topo, int(inputs["src"]), int(inputs["dst"]), by=inputs["by"]).to_dict()
        if "cards" in inputs:
            result["cards"] = inputs["cards"]
        if "cluster" in inputs:
            result["cluster"] = inputs["cluster"]
        return jsonable(result)

    def rows(self, result: Mapping[str, Any]) -> list[tuple[str, str]]:
        cards = result.get("cards") or {}
        ends = {k: cards[k]["serial"] if k in cards else result.get(k) for k in ("src", "dst")}
        out = [
            ("from → to", f"{ends['src']} → {ends['dst']}"),
            ("by", str(result.get("by"))),
            ("reachable", str(result.get("reachable"))),
            ("hops", fmt(result.get("hops"))),
            ("latency_ns", fmt(result.get("latency_ns"))),
            ("bottleneck_gbps", fmt(result.get("bottleneck_gbps"))),
        ]
        labels = result.get("labels") or []
        if labels:
            shown = labels if len(labels) <= 16 else [*labels[:8], "…", *labels[-7:]]
            out.append(("path", " → ".join(shown)))
        return out
