"""What the 3D dashboard draws: the floor of a cluster, one supernode, one rack.

Why columnar: a million-card cluster has ~26,000 racks and 2,048 supernodes.
One JSON object per rack would repeat every key 26,000 times; parallel arrays
(``racks.id[i]``, ``racks.row[i]`` …) are a third of the bytes and are what
the browser turns into typed arrays for its instanced meshes anyway.

Why aggregates: nothing here runs a query per rack, server or card. The floor
is six queries whatever the size: the cluster, its racks, its supernodes, the
racks' draw and card counts (``Rack.objects.draw_by_rack()``, the one definition
of a rack's draw, one grouped pass over cards, servers and devices), cards by
supernode, and network devices by kind and rack (``tests/api/test_geometry.py``
checks the draw equals ``Rack.objects.with_power()``). On PostgreSQL at 262,144
cards in 6,816 racks the floor takes 0.24–0.32 s (the draw pass ~0.14 s, cards by
supernode ~0.04 s), the same as when it priced the TDP from its own card
aggregate; at 1,048,576 cards that was ~1.7 s.
A supernode is three queries (itself, its cards in index order, the links
between two of its cards), a rack four; both ~20 ms on PostgreSQL at 1,048,576 cards.
"""
from __future__ import annotations

from typing import Any

from django.db.models import Count
from rest_framework import serializers

from twin.hardware.choices import DeviceKindChoices, FabricChoices
from twin.hardware.models import (
    Card,
    Cluster,
    Link,
    NetworkDevice,
    Rack,
    Server,
    SuperNode,
)

__all__ = [
    "FloorSerializer",
    "RackGeometrySerializer",
    "SupernodeGeometrySerializer",
    "fabric_name",
    "floor",
    "rack_geometry",
    "supernode_geometry",
    "SWITCH_MARKER_KINDS",
    "SwitchesSerializer",
    "switches",
]

#: Fabrics whose cards sit on a grid (``dims`` given, wrap-around links possible).
GRID_FABRICS = (FabricChoices.TORUS_3D, FabricChoices.TORUS_2D, FabricChoices.RING)


def fabric_name(fabric: str) -> str:
    """The contract's fabric name: ``torus`` for a 2D or 3D torus (``dims`` tells
    which), the model's value otherwise; ``fabric_kind`` carries the exact value."""
    return "torus" if fabric in (FabricChoices.TORUS_3D, FabricChoices.TORUS_2D) else fabric


def _dims(fabric: str, dx: int, dy: int, dz: int) -> list[int] | None:
    return [dx, dy, dz] if fabric in GRID_FABRICS else None


# ------------------------------------------------------------------ floor
def floor(cluster: Cluster) -> dict[str, Any]:
    """The whole floor of ``cluster``, columnar (see the module docstring)."""
    cid = cluster.pk
    racks = list(Rack.objects.filter(cluster_id=cid).order_by("row", "slot", "id").values_list(
        "id", "name", "row", "slot", "supernode_id", "power_budget_w"))
    sns = list(SuperNode.objects.filter(cluster_id=cid).order_by("index").values_list(
        "id", "name", "index", "fabric", "dim_x", "dim_y", "dim_z", "card_count"))
    draws = {row.rack_id: row for row in Rack.objects.filter(cluster_id=cid).draw_by_rack().rows()}
    per_sn = dict(Card.objects.filter(supernode__cluster_id=cid).order_by()
                  .values_list("supernode_id").annotate(n=Count("id")))
    tiers: dict[str, dict[str, Any]] = {}
    for kind, rack_id, n in (NetworkDevice.objects.filter(cluster_id=cid).order_by()
                             .values_list("kind", "rack_id").annotate(n=Count("id"))):
        tier = tiers.setdefault(kind, {"kind": kind, "label": DeviceKindChoices.label(kind),
                                       "count": 0, "racks": []})
        tier["count"] += n
        if rack_id is not None:
            tier["racks"].append(rack_id)
    order = {kind: i for i, kind in enumerate(DeviceKindChoices.values())}
    return {
        "cluster": cid, "name": cluster.name, "preset": cluster.preset,
        "counts": {"supernodes": len(sns), "racks": len(racks),
                   "cards": sum(row.cards for row in draws.values())},
        "racks": {
            "id": [r[0] for r in racks], "name": [r[1] for r in racks],
            "row": [r[2] for r in racks], "slot": [r[3] for r in racks],
            "supernode": [r[4] for r in racks], "budget_w": [r[5] for r in racks],
            "cards": [draws[r[0]].cards if r[0] in draws else 0 for r in racks],
            "power_w": [draws[r[0]].w if r[0] in draws else 0 for r in racks],
        },
        "supernodes": {
            "id": [s[0] for s in sns], "name": [s[1] for s in sns],
            "index": [s[2] for s in sns], "fabric": [fabric_name(s[3]) for s in sns],
            "fabric_kind": [s[3] for s in sns],
            "dims": [_dims(s[3], s[4], s[5], s[6]) for s in sns],
            "cards": [per_sn.get(s[0], 0) for s in sns],
            "card_count": [s[7] for s in sns],
        },
        "tiers": [{**t, "racks": sorted(t["racks"])}
                  for t in sorted(tiers.values(), key=lambda t: (order.get(t["kind"], 99),
                                                                 t["kind"]))],
    }


#: Switches the floor draws as markers: the fabric's tiers. PCIe switches sit inside
#: servers (one or more per server, ~10⁵ at a million cards): the rack stands for them.
SWITCH_MARKER_KINDS = (DeviceKindChoices.LEAF, DeviceKindChoices.SPINE, DeviceKindChoices.CORE)


def switches(cluster: Cluster) -> dict[str, Any]:
    """The fabric switches of ``cluster`` (leaf, spine, core), columnar, tier order then
    id: what the floor draws as markers, each a target of the what-if's ``fail_switch``
    (its id). One query; ``rack`` is null for a switch not placed in a rack."""
    order = {kind: i for i, kind in enumerate(SWITCH_MARKER_KINDS)}
    rows = sorted(NetworkDevice.objects.filter(cluster_id=cluster.pk,
                                               kind__in=SWITCH_MARKER_KINDS)
                  .values_list("id", "name", "kind", "rack_id"),
                  key=lambda r: (order[r[2]], r[0]))
    return {"cluster": cluster.pk, "id": [r[0] for r in rows], "name": [r[1] for r in rows],
            "kind": [r[2] for r in rows], "rack": [r[3] for r in rows]}


# -------------------------------------------------------------- supernode
def _wraps(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """A link between two grid cards jumps more than one step in some dimension."""
    return any(p is not None and q is not None and abs(p - q) > 1 for p, q in zip(a, b,
                                                                                 strict=True))


def supernode_geometry(sn: SuperNode) -> dict[str, Any]:
    """One supernode's cards (by index) and the links between two of its cards."""
    cards = list(Card.objects.filter(supernode_id=sn.pk).order_by("index").values_list(
        "id", "serial", "index", "x", "y", "z", "server__rack_id", "server_id", "slot",
        "status"))
    position = {c[0]: i for i, c in enumerate(cards)}
    xyz = [(c[3], c[4], c[5]) for c in cards]
    grid = sn.fabric in GRID_FABRICS
    links = list(Link.objects.filter(a_card__supernode_id=sn.pk, b_card__supernode_id=sn.pk)
                 .order_by("id").values_list("id", "a_card_id", "b_card_id", "kind", "status"))
    a = [position[link[1]] for link in links]
    b = [position[link[2]] for link in links]
    return {
        "supernode": sn.pk, "name": sn.name, "index": sn.index, "cluster": sn.cluster_id,
        "fabric": fabric_name(sn.fabric), "fabric_kind": sn.fabric,
        "dims": _dims(sn.fabric, sn.dim_x, sn.dim_y, sn.dim_z),
        "cards": {
            "id": [c[0] for c in cards], "serial": [c[1] for c in cards],
            "index": [c[2] for c in cards], "x": [c[3] for c in cards],
            "y": [c[4] for c in cards], "z": [c[5] for c in cards],
            "rack": [c[6] for c in cards], "server": [c[7] for c in cards],
            "slot": [c[8] for c in cards], "status": [c[9] for c in cards],
        },
        "links": {
            "id": [link[0] for link in links], "a": a, "b": b,
            "kind": [link[3] for link in links], "status": [link[4] for link in links],
            "wrap": [grid and _wraps(xyz[i], xyz[j]) for i, j in zip(a, b, strict=True)],
        },
    }


# ------------------------------------------------------------------- rack
def rack_geometry(rack: Rack) -> dict[str, Any]:
    """One rack: servers by position with their cards, devices, and its SQL draw.

    ``rack`` must come from ``Rack.objects.with_power()`` (the viewset's queryset).
    """
    servers = {pk: {"id": pk, "name": name, "position": pos, "cards": []}
               for pk, name, pos in Server.objects.filter(rack_id=rack.pk)
               .order_by("position", "id").values_list("id", "name", "position")}
    cards_tdp = 0
    for pk, serial, slot, status, server_id, index, tdp in (
            Card.objects.filter(server__rack_id=rack.pk).order_by("slot", "id")
            .values_list("id", "serial", "slot", "status", "server_id", "index",
                         "accelerator__tdp_w")):
        servers[server_id]["cards"].append({"id": pk, "serial": serial, "slot": slot,
                                            "status": status, "index": index, "tdp_w": tdp})
        cards_tdp += tdp or 0
    devices = [{"id": pk, "name": name, "kind": kind, "server": server_id}
               for pk, name, kind, server_id in NetworkDevice.objects.filter(rack_id=rack.pk)
               .order_by("kind", "name").values_list("id", "name", "kind", "server_id")]
    return {
        "rack": rack.pk, "name": rack.name, "cluster": rack.cluster_id,
        "supernode": rack.supernode_id, "row": rack.row, "slot": rack.slot,
        "budget_w": rack.power_budget_w, "power_w": int(rack.power_w),
        # What the rack draws whatever its cards do (servers' overhead + devices):
        # the dashboard adds the cards' live readings to it for the live power bar.
        "static_w": int(rack.power_w) - cards_tdp,
        "utilization": rack.utilization, "headroom_w": rack.headroom_w,
        "servers": list(servers.values()),
        "devices": devices,
    }


# ------------------------------------------------------------- serializers
# For the OpenAPI schema only: the views return the dicts above unchanged.
def _ints(*, nullable: bool = False, **kwargs: Any) -> serializers.ListField:
    """A column of integers; ``nullable`` when an entry may be null (the generated
    TypeScript types of the dashboard read ``(number | null)[]`` only there)."""
    return serializers.ListField(child=serializers.IntegerField(allow_null=nullable), **kwargs)


def _strs(**kwargs: Any) -> serializers.ListField:
    return serializers.ListField(child=serializers.CharField(), **kwargs)


class FloorCountsSerializer(serializers.Serializer):
    supernodes = serializers.IntegerField()
    racks = serializers.IntegerField()
    cards = serializers.IntegerField()


class FloorRacksSerializer(serializers.Serializer):
    id = _ints()
    name = _strs()
    row = _ints()
    slot = _ints()
    supernode = _ints(nullable=True, help_text="Supernode id; null for a network rack.")
    budget_w = _ints()
    cards = _ints(help_text="Cards installed in the rack.")
    power_w = _ints(help_text="Nameplate draw (cards' TDP + servers + devices), W.")


class FloorSupernodesSerializer(serializers.Serializer):
    id = _ints()
    name = _strs()
    index = _ints()
    fabric = _strs(help_text="torus (2D or 3D), ring, pcie_star, full_mesh, fat_tree.")
    fabric_kind = _strs(help_text="The model's fabric value (torus3d, torus2d, …).")
    dims = serializers.ListField(child=_ints(allow_null=True),
                                 help_text="[x, y, z] for grid fabrics, else null.")
    cards = _ints(help_text="Cards installed.")
    card_count = _ints(help_text="Cards the fabric is designed for.")


class FloorTierSerializer(serializers.Serializer):
    kind = serializers.CharField()
    label = serializers.CharField()
    count = serializers.IntegerField()
    racks = _ints(help_text="Racks holding devices of this kind.")


class FloorSerializer(serializers.Serializer):
    """``GET /api/clusters/<id>/floor/``: racks and supernodes as parallel arrays."""

    cluster = serializers.IntegerField()
    name = serializers.CharField()
    preset = serializers.CharField()
    counts = FloorCountsSerializer()
    racks = FloorRacksSerializer()
    supernodes = FloorSupernodesSerializer()
    tiers = FloorTierSerializer(many=True, help_text="Network devices by kind, cards upward.")


class SwitchesSerializer(serializers.Serializer):
    """``GET /api/clusters/<id>/switches/``: the fabric switches as parallel arrays."""

    cluster = serializers.IntegerField()
    id = _ints()
    name = _strs()
    kind = _strs(help_text="leaf, spine or core.")
    rack = _ints(nullable=True, help_text="The rack holding it (null: none).")


class GeometryCardsSerializer(serializers.Serializer):
    id = _ints()
    serial = _strs()
    index = _ints()
    x = _ints(nullable=True)
    y = _ints(nullable=True)
    z = _ints(nullable=True)
    rack = _ints()
    server = _ints()
    slot = _ints()
    status = _strs()


class GeometryLinksSerializer(serializers.Serializer):
    id = _ints()
    a = _ints(help_text="Position of one end in the cards arrays.")
    b = _ints(help_text="Position of the other end in the cards arrays.")
    kind = _strs()
    status = _strs()
    wrap = serializers.ListField(child=serializers.BooleanField(),
                                 help_text="A torus wrap-around link.")


class SupernodeGeometrySerializer(serializers.Serializer):
    """``GET /api/supernodes/<id>/geometry/``: cards by index and card–card links."""

    supernode = serializers.IntegerField()
    name = serializers.CharField()
    index = serializers.IntegerField()
    cluster = serializers.IntegerField()
    fabric = serializers.CharField()
    fabric_kind = serializers.CharField()
    dims = _ints(allow_null=True)
    cards = GeometryCardsSerializer()
    links = GeometryLinksSerializer()


class RackCardSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    serial = serializers.CharField()
    slot = serializers.IntegerField()
    status = serializers.CharField()
    index = serializers.IntegerField()
    tdp_w = serializers.IntegerField(help_text="The card type's TDP, W.")


class RackServerSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    position = serializers.IntegerField()
    cards = RackCardSerializer(many=True)


class RackDeviceSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    kind = serializers.CharField()
    server = serializers.IntegerField(allow_null=True)


class RackGeometrySerializer(serializers.Serializer):
    """``GET /api/racks/<id>/geometry/``: servers by position with their cards."""

    rack = serializers.IntegerField()
    name = serializers.CharField()
    cluster = serializers.IntegerField()
    supernode = serializers.IntegerField(allow_null=True)
    row = serializers.IntegerField()
    slot = serializers.IntegerField()
    budget_w = serializers.IntegerField()
    power_w = serializers.IntegerField(help_text="Nameplate draw, as the rack list gives it.")
    static_w = serializers.IntegerField(
        help_text="The part of power_w that is not the cards' TDP: servers' overhead and "
                  "network devices.")
    utilization = serializers.FloatField()
    headroom_w = serializers.IntegerField()
    servers = RackServerSerializer(many=True)
    devices = RackDeviceSerializer(many=True)
