"""The failure kind: remove links, cards or switches and measure what got worse.

``live``: also remove what the live twin has down — the failed cards and the down
scale-up links of the run's snapshot (``twin.scenarios.snapshot.live_state``:
the one the run forked, or frozen at submit and stored with the run).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, replace
from typing import Any

from simulation.snapshot import LiveSnapshot
from simulation.topology import FailureSpec, Topology, TopologyError, from_spec
from twin.hardware.choices import CardStatusChoices, LinkKindChoices, LinkStatusChoices
from twin.scenarios.inputs import ClusterInput, card_node
from twin.scenarios.kinds.base import (
    FieldSpec,
    Progress,
    ScenarioInputError,
    ScenarioKind,
    field_default,
    fmt,
    jsonable,
    param_error,
    register,
    split_params,
)
from twin.scenarios.kinds.cards import card_lookup
from twin.scenarios.kinds.limits import MAX_LIST_ITEMS, MAX_SAMPLES, check_items
from twin.scenarios.snapshot import live_state

__all__ = ["FailureKind"]


@register
class FailureKind(ScenarioKind):
    name = "failure"
    label = "Failure impact"
    description = "Remove links, cards or switches; connectivity and what got worse."
    fields = (
        *(FieldSpec(name, kind, label, text, default=jsonable(field_default(FailureSpec, name)),
                    min=low, max=MAX_SAMPLES if name == "samples" else None, advanced=advanced)
          for name, (kind, label, text, low, advanced) in {
              "links": ("integer_list", "Links", f"Simulation link numbers to remove (at most "
                        f"{MAX_LIST_ITEMS:,}).", 0, True),
              "link_pairs": ("integer_pairs", "Link pairs", "Links to remove, each as the "
                             f"[a, b] simulation node numbers of its ends (at most "
                             f"{MAX_LIST_ITEMS:,}).", 0, True),
              "nodes": ("integer_list", "Nodes", "Simulation node numbers (cards first) to "
                        f"remove (at most {MAX_LIST_ITEMS:,}).", 0, True),
              "random_links": ("integer", "Random links", "How many more links to remove "
                               "at random.", 0, False),
              "random_cards": ("integer", "Random cards", "How many more cards to remove at "
                               "random.", 0, False),
              "random_switches": ("integer", "Random switches", "How many more switches "
                                  "(PCIe, NIC, leaf, spine, core) to remove at random.", 0,
                                  False),
              "seed": ("integer", "Seed", "Random seed of the picks and the sampling.", 0,
                       False),
              "samples": ("integer", "Samples", "Source cards sampled when a metric cannot "
                          "be computed exactly.", 2, False),
          }.items()),
        FieldSpec("cards", "card_list", "Cards", f"Cards to fail, by id or serial (at most "
                  f"{MAX_LIST_ITEMS:,}).", default=[], needs_cluster=True),
        FieldSpec("live", "boolean", "Live failures", "Also fail the cards whose status is "
                  "failed and the scale-up links that are down.", default=False,
                  needs_cluster=True),
    )

    def split(self, params: Mapping[str, Any]) -> tuple[dict, dict]:
        """``nodes`` is the node list to remove when it is a list, and a ring's
        (full mesh's, star's) size when it is a number."""
        rest, mine = split_params(params, self.options)
        if "nodes" in mine and not isinstance(mine["nodes"], list | tuple):
            rest["nodes"] = mine.pop("nodes")
        return rest, mine

    def prepare(self, params: Mapping[str, Any], cluster: Any | None) -> dict[str, Any]:
        inputs, spec, info = self.topology(params, cluster)
        _, mine = self.split(params)
        for key, what in (("links", "links"), ("link_pairs", "link pairs"), ("nodes", "nodes"),
                          ("cards", "cards")):
            check_items(mine.get(key), f"params.{key}", MAX_LIST_ITEMS, what)
        cards = mine.pop("cards", None)
        live = mine.pop("live", False)
        try:
            failure = FailureSpec.from_dict(dict(mine), "params.")
        except TopologyError as exc:
            raise param_error(exc) from exc
        if failure.samples > MAX_SAMPLES:
            raise ScenarioInputError.one("params.samples", f"at most {MAX_SAMPLES:,}, got "
                                                           f"{failure.samples:,}")
        named: list[dict[str, Any]] = []
        if cards is not None or live:
            if info is None:
                key = "cards" if cards is not None else "live"
                raise ScenarioInputError.one(f"params.{key}", "needs a cluster (give "
                                                              "\"cluster\": <id>)")
            if not isinstance(live, bool):
                raise ScenarioInputError.one("params.live", f"true or false, got {live!r}")
            if cards is not None and not isinstance(cards, list):
                raise ScenarioInputError.one("params.cards", "a list of card ids or serials")
            named = [card_lookup(info, c, f"params.cards[{i}]")
                     for i, c in enumerate(cards or [])]
        extra_nodes = [c["node"] for c in named]
        extra_pairs: list[tuple[int, int]] = []
        if live and info is not None:
            live_nodes, extra_pairs = _live_failures(info, live_state(cluster))
            extra_nodes += live_nodes
        failure = replace(failure, nodes=tuple(failure.nodes) + tuple(extra_nodes),
                          link_pairs=tuple(failure.link_pairs) + tuple(extra_pairs))
        _check_failure(from_spec(spec), failure)
        inputs["failure"] = jsonable(asdict(failure))
        if named:
            inputs["cards"] = named
        if live:
            inputs["live"] = {"cards": len(extra_nodes) - len(named),
                              "links": len(extra_pairs)}
        return inputs

    def run(self, inputs: Mapping[str, Any], progress: Progress) -> dict[str, Any]:
        progress(0.05, "building the topology")
        _, topo = self.build(inputs)
        raw = inputs["failure"]
        failure = FailureSpec(
            links=tuple(raw["links"]), link_pairs=tuple(tuple(p) for p in raw["link_pairs"]),
            nodes=tuple(raw["nodes"]), random_links=raw["random_links"],
            random_cards=raw["random_cards"], random_switches=raw["random_switches"],
            seed=raw["seed"], samples=raw["samples"])
        progress(0.2, "removing and re-measuring")
        result = failure.run(topo).to_dict()
        for key in ("cards", "live", "cluster"):
            if key in inputs:
                result[key] = inputs[key]
        return jsonable(result)

    def rows(self, result: Mapping[str, Any]) -> list[tuple[str, str]]:
        removed = result.get("removed_nodes") or {}
        return [
            ("removed links", fmt(result.get("removed_links"))),
            ("removed nodes", ", ".join(f"{v} {k}" for k, v in removed.items()) or "—"),
            ("surviving cards", fmt(result.get("surviving_endpoints"))),
            ("connected", str(result.get("connected"))),
            ("partitions (largest)", f"{fmt(result.get('partitions'))} "
                                     f"({fmt(result.get('largest_partition'))})"),
            ("pairs disconnected", fmt(result.get("pairs_disconnected"))),
            ("avg hops before → after", f"{fmt(result.get('average_before'), 6)} → "
                                        f"{fmt(result.get('average_after'), 6)}"),
            ("diameter before → after", f"{fmt(result.get('diameter_before'))} → "
                                        f"{fmt(result.get('diameter_after'))}"),
            ("pairs with a longer path", fmt(result.get("pairs_longer"))),
            ("cards that lost bandwidth", fmt(result.get("endpoints_degraded"))),
            ("method", f"{result.get('method')} (exact: {result.get('exact')})"),
        ]


def _live_failures(info: ClusterInput,
                   snapshot: LiveSnapshot) -> tuple[list[int], list[tuple[int, int]]]:
    """Nodes of the snapshot's failed cards and node pairs of its down scale-up links
    (the live state as forked; two queries map their ids onto the topology)."""
    from twin.hardware.models import Card, Link

    fields = ("index", "x", "y", "z", "supernode__index", "supernode__fabric",
              "supernode__dim_x", "supernode__dim_y", "supernode__dim_z")

    def node(row: Mapping[str, Any], prefix: str = "") -> int:
        g = {k: row[prefix + k] for k in fields}
        return card_node(info, g["supernode__index"], g["supernode__fabric"], g["index"],
                         (g["supernode__dim_x"], g["supernode__dim_y"], g["supernode__dim_z"]),
                         (g["x"], g["y"], g["z"]))

    failed = Card.objects.filter(supernode__cluster_id=info.cluster_id,
                                 pk__in=sorted(snapshot.cards_down.get(
                                     CardStatusChoices.FAILED, ()))).values(*fields)
    nodes = [node(row) for row in failed.order_by("id")]
    down = Link.objects.filter(cluster_id=info.cluster_id,
                               pk__in=sorted(snapshot.links_down.get(LinkStatusChoices.DOWN, ())),
                               kind=LinkKindChoices.SCALE_UP, a_card__isnull=False,
                               b_card__isnull=False).values(
        *(f"a_card__{f}" for f in fields), *(f"b_card__{f}" for f in fields))
    pairs = [(node(row, "a_card__"), node(row, "b_card__")) for row in down]
    return nodes, pairs


def _check_failure(topo: Topology, failure: FailureSpec) -> None:
    """The simulation's range checks, done before anything is queued."""
    for i, link in enumerate(failure.links):
        if not 0 <= link < topo.n_links:
            raise ScenarioInputError.one(f"params.links[{i}]", (
                f"link {link} does not exist (valid: 0…{topo.n_links - 1})"))
    chosen_links = set(failure.links)
    for i, (a, b) in enumerate(failure.link_pairs):
        field = f"params.link_pairs[{i}]"
        try:
            topo.check_node(a, field)
            topo.check_node(b, field)
        except TopologyError as exc:
            raise param_error(exc) from exc
        lid = topo.link_between(a, b)
        if lid < 0:
            raise ScenarioInputError.one(field, f"there is no link between {a} and {b}")
        chosen_links.add(lid)
    for i, node in enumerate(failure.nodes):
        if not 0 <= node < topo.n_nodes:
            raise ScenarioInputError.one(f"params.nodes[{i}]", (
                f"node {node} does not exist (valid: 0…{topo.n_nodes - 1})"))
    nodes = set(failure.nodes)
    chosen_cards = sum(1 for n in nodes if n < topo.n_endpoints)
    pools = (
        ("random_links", failure.random_links, topo.n_links - len(chosen_links), "links"),
        ("random_cards", failure.random_cards, topo.n_endpoints - chosen_cards, "cards"),
        ("random_switches", failure.random_switches,
         topo.n_nodes - topo.n_endpoints - (len(nodes) - chosen_cards), "switches"),
    )
    for key, wanted, available, what in pools:
        if wanted > available:
            raise ScenarioInputError.one(f"params.{key}", (
                f"cannot remove {wanted:,} {what}: only {available:,} exist"
                + (" besides the ones chosen" if available < _total(topo, what) else "")))


def _total(topo: Topology, what: str) -> int:
    return {"links": topo.n_links, "cards": topo.n_endpoints,
            "switches": topo.n_nodes - topo.n_endpoints}[what]
