"""``GET /api/clusters/<id>/route/``: the route between two cards, answered now.

The scenario kind ``route`` computes the same thing in a worker; the
dashboard wants it while the user waits, so this runs it in the request on the
same conversion (``twin.scenarios.inputs.cluster_input``), the same card
lookup (``twin.scenarios.kinds.card_lookup``) and the same search
(``simulation.topology.route``), and maps the path back onto the model: card
nodes become card ids, card–card hops the ids of their ``Link`` rows.

Topology cache
    Building the simulated topology is the slow part (~1 s and ~260 MB at a
    million cards), so each process keeps the last ``CACHE_SIZE`` topologies,
    keyed by (cluster id, SHA-256 of the converted ``ClusterSpec``). The
    converter runs on every request (its five aggregate queries: milliseconds
    on the demo cluster, ~190 ms at a million cards), so the key changes
    exactly when what the simulation sees changes: supernodes added or
    removed, a fabric, its dimensions or link figures, the card or server
    count, the network devices' kinds, ports or latencies, or the figures of
    the links the converter reads. What the simulation does not model does
    not invalidate it, and does not need to: card and link *status* (a route
    here ignores failures — run a ``failure`` scenario for that), names, and
    per-link figures other than the representative ones. Card coordinates and
    ``Link`` ids are read per request, so they are never stale.
"""
from __future__ import annotations

import bisect
import hashlib
import json
import threading
from collections import OrderedDict
from functools import reduce
from operator import or_
from typing import Any

from django.db.models import Q
from rest_framework import serializers

from simulation.topology import NodeKind, Topology, from_spec, route
from twin.hardware.choices import FabricChoices as F
from twin.hardware.choices import LinkKindChoices
from twin.hardware.models import Card, Cluster, Link, SuperNode
from twin.scenarios.inputs import ClusterInput, ConversionError, card_node, cluster_input
from twin.scenarios.kinds import ROUTE_BY, ScenarioInputError, card_lookup

__all__ = ["CACHE_SIZE", "RouteSerializer", "cached_topology", "cluster_route", "clear_cache"]

CACHE_SIZE = 2
_cache: OrderedDict[tuple[int, str], Topology] = OrderedDict()
_lock = threading.Lock()


def clear_cache() -> None:
    with _lock:
        _cache.clear()


def cached_topology(info: ClusterInput) -> Topology:
    """The simulated topology of ``info``, built once per process per spec (LRU)."""
    digest = hashlib.sha256(json.dumps(info.spec.to_dict(), sort_keys=True).encode()).hexdigest()
    key = (info.cluster_id, digest)
    with _lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    topo = from_spec(info.spec)  # outside the lock: other clusters need not wait
    with _lock:
        _cache[key] = topo
        _cache.move_to_end(key)
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return topo


def _end(info: ClusterInput, raw: str | None, field: str) -> dict[str, Any]:
    """A card by id (digits) or serial; a serial made of digits is tried second."""
    if raw is None or raw.strip() == "":
        raise ScenarioInputError.one(field, "this field is required: a card id or serial")
    raw = raw.strip()
    if raw.isdecimal():  # what int() reads ("²" is a digit, not a decimal)
        try:
            return card_lookup(info, int(raw), field)
        except ScenarioInputError:
            if not Card.objects.filter(supernode__cluster_id=info.cluster_id,
                                       serial=raw).exists():
                raise
    return card_lookup(info, raw, field)


def _grid_q(fabric: str, dims: tuple[int, int, int], local: int) -> Q:
    """Cards that can be node ``local`` of their supernode (inverse of ``card_node``)."""
    dx, dy, _ = dims
    if fabric == F.TORUS_3D:
        x, y, z = local % dx, (local // dx) % dy, local // (dx * dy)
        partial = Q(x=None) | Q(y=None) | Q(z=None)
        return Q(x=x, y=y, z=z) | (Q(index=local) & partial)
    if fabric == F.TORUS_2D:
        return Q(x=local % dx, y=local // dx) | (Q(index=local) & (Q(x=None) | Q(y=None)))
    return Q(index=local)


def _path_cards(info: ClusterInput, nodes: list[int]) -> dict[int, tuple[int, str, int]]:
    """Card node → (card id, serial, supernode id) for the card nodes of a path (2 queries)."""
    where: dict[int, tuple[int, int]] = {}  # node → (supernode index, local node)
    for node in nodes:
        if node < info.n_cards:
            pos = bisect.bisect_right(info.offsets, node) - 1
            where[node] = (info.supernode_indices[pos], node - info.offsets[pos])
    if not where:
        return {}
    sns = {row[0]: row for row in SuperNode.objects.filter(
        cluster_id=info.cluster_id, index__in={s for s, _ in where.values()})
        .values_list("index", "id", "fabric", "dim_x", "dim_y", "dim_z")}
    wanted = reduce(or_, (Q(supernode_id=sns[s][1]) & _grid_q(sns[s][2], sns[s][3:], local)
                          for s, local in where.values()))
    found: dict[int, tuple[int, str, int]] = {}
    for pk, serial, index, x, y, z, sn_index in Card.objects.filter(wanted).values_list(
            "id", "serial", "index", "x", "y", "z", "supernode__index"):
        _, sn_id, fabric, *dims = sns[sn_index]
        node = card_node(info, sn_index, fabric, index, (dims[0], dims[1], dims[2]), (x, y, z))
        if node in where:
            found[node] = (pk, serial, sn_id)
    return found


def _link_ids(cluster_id: int, pairs: list[tuple[int, int]]) -> dict[frozenset[int], int]:
    """Card pair → id of a ``Link`` row joining them (scale-up first, then lowest id)."""
    if not pairs:
        return {}
    wanted = reduce(or_, (Q(a_card_id=a, b_card_id=b) | Q(a_card_id=b, b_card_id=a)
                          for a, b in pairs))
    best: dict[frozenset[int], tuple[bool, int]] = {}
    for pk, a, b, kind in Link.objects.filter(wanted, cluster_id=cluster_id).values_list(
            "id", "a_card_id", "b_card_id", "kind"):
        key, rank = frozenset((a, b)), (kind != LinkKindChoices.SCALE_UP, pk)
        best[key] = min(best.get(key, rank), rank)
    return {key: pk for key, (_, pk) in best.items()}


def cluster_route(cluster: Cluster, src: str | None, dst: str | None,
                  by: str | None) -> dict[str, Any]:
    """The route between two cards of ``cluster`` (raises ScenarioInputError per field)."""
    by = by or ROUTE_BY[0]
    errors: dict[str, list[str]] = {}
    if by not in ROUTE_BY:
        errors["by"] = [f"'hops' or 'latency', got {by!r}"]
    try:
        info = cluster_input(cluster)
    except ConversionError as exc:
        raise ScenarioInputError.one("cluster", exc.message) from exc
    ends: dict[str, dict[str, Any]] = {}
    missing: set[str] = set()
    for key, raw in (("src", src), ("dst", dst)):
        try:
            ends[key] = _end(info, raw, key)
        except ScenarioInputError as exc:
            errors.update(exc.errors)
            missing |= exc.missing
    if errors:
        raise ScenarioInputError(errors, frozenset(missing))
    topo = cached_topology(info)
    found = route(topo, ends["src"]["node"], ends["dst"]["node"], by=by)
    cards = _path_cards(info, found.nodes)
    path: list[dict[str, Any]] = []
    for node, label in zip(found.nodes, found.labels, strict=True):
        card = cards.get(node)
        path.append({"node": node, "kind": NodeKind(int(topo.node_kind[node])).name.lower(),
                     "card": card[0] if card else None,
                     "supernode": card[2] if card else None,
                     "label": card[1] if card else label})
    hops = list(zip(path, path[1:], strict=False))
    pairs = [(a["card"], b["card"]) for a, b in hops if a["card"] and b["card"]]
    links = _link_ids(cluster.pk, pairs)
    return {
        "cluster": cluster.pk,
        "src": {"id": ends["src"]["id"], "serial": ends["src"]["serial"]},
        "dst": {"id": ends["dst"]["id"], "serial": ends["dst"]["serial"]},
        "by": by, "reachable": found.reachable, "hops": found.hops,
        "latency_ns": found.latency_ns, "bottleneck_gbps": found.bottleneck_gbps,
        "path": path,
        "cards": [p["card"] for p in path if p["card"] is not None],
        "links": [links.get(frozenset((a["card"], b["card"])))
                  if a["card"] and b["card"] else None for a, b in hops],
        "notes": list(info.notes),
    }


# ------------------------------------------------------------- serializers
class RouteEndSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    serial = serializers.CharField()


class RouteNodeSerializer(serializers.Serializer):
    node = serializers.IntegerField(help_text="Node number in the simulated topology.")
    kind = serializers.CharField(help_text="card, pcie_switch, nic, leaf, spine, core, switch.")
    card = serializers.IntegerField(allow_null=True)
    supernode = serializers.IntegerField(allow_null=True)
    label = serializers.CharField(help_text="The card's serial, else the simulation's label.")


class RouteSerializer(serializers.Serializer):
    """``GET /api/clusters/<id>/route/``: the path, its hops, latency and bottleneck."""

    cluster = serializers.IntegerField()
    src = RouteEndSerializer()
    dst = RouteEndSerializer()
    by = serializers.CharField()
    reachable = serializers.BooleanField()
    hops = serializers.IntegerField()
    latency_ns = serializers.FloatField(allow_null=True)
    bottleneck_gbps = serializers.FloatField(allow_null=True)
    path = RouteNodeSerializer(many=True)
    cards = serializers.ListField(child=serializers.IntegerField())
    links = serializers.ListField(child=serializers.IntegerField(allow_null=True),
                                  help_text="Link row id per hop; null where no card–card "
                                            "row exists (card–switch hops).")
    notes = serializers.ListField(child=serializers.CharField())
