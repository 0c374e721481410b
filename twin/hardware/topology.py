"""The Django cluster model → the simulation's plain dataclasses (``ClusterSpec``).

It lives in the hardware app because two layers above use it: the scenario kinds
(``twin.scenarios.inputs`` re-exports it) and the jobs app, which prices a job's
placement on the same simulated fabric (``twin.jobs.quality``).

The simulation library never sees a model instance: :func:`cluster_input`
reads one cluster with a handful of aggregate queries — never a loop over
cards, servers or links — and returns a
:class:`simulation.topology.ClusterSpec` (supernode groups with their fabric,
the access / aggregation / core tiers of the cluster network) plus what is
needed to map a card row to its node in the simulated topology. A
million-card cluster converts in a fraction of a second (five queries, 190 ms on
PostgreSQL, ``benchmarks/scenario_inputs.py``; the largest is one ``GROUP BY
kind`` over its network devices).

How the model maps onto the spec
    * **Supernodes**, in ``index`` order; consecutive supernodes with the same
      fabric, dimensions and link figures form one group. Fabrics:
      ``torus3d`` → ``torus`` with dims ``(z, y, x)``, ``torus2d`` → ``torus``
      ``(y, x)`` (the simulation numbers a grid row-major, last dimension
      fastest, so card ``x + X·(y + Y·z)`` — the builder's card index — is
      node ``x + X·(y + Y·z)`` of its supernode), ``ring`` → ``ring``,
      ``full_mesh`` → ``full_mesh``, ``pcie_star`` → ``switch``, ``fat_tree``
      (NVLink-switched servers, the ``dgx-h100-superpod`` preset) →
      ``server_mesh`` with dims ``(servers, cards per server)``: a full mesh
      among the cards of each server and nothing between servers — exactly
      the builder's 28 scale-up links per 8-GPU server (its stand-in for the
      NVSwitch chips); servers are counted per supernode (one more ``GROUP
      BY``, only when a ``fat_tree`` supernode exists, in place of the
      server count), and a supernode of
      one server becomes a plain ``full_mesh``. Link Gb/s and ns come from
      the supernode; its ``switch_latency_ns`` is charged only where a fabric
      has a switch (``pcie_star``): the model's direct fabrics (the NVLink
      mesh included, whose 250 ns link already covers the NVSwitch) have no
      per-hop router cost beyond the link latency.
    * **What a card brings to the fabric**, from its accelerator type (one
      ``GROUP BY`` over the cards, which also counts them): its total
      scale-up bandwidth per direction (``FabricSpec.card_gbps`` = the
      catalogue's bidirectional ``scaleup_gbps`` GB/s × 8 / 2: 3,600 Gb/s for
      an H100, whatever the number of NVSwitch ports or torus links it
      reaches) and the links' technology (``nvlink`` for NVIDIA, ``hccs`` for
      Huawei; ``nvlink5`` for NVIDIA cards of 1.8 TB/s, Blackwell's NVLink 5
      with its own measured efficiencies) for their protocol efficiency; the supernode's
      ``in_switch_reduction`` (NVLink SHARP) enables NVLS. The network's
      technology is the NIC → leaf link's kind (``infiniband``, ``roce``).
    * **Access tier = a server**: ``cards_per_switch`` = cards per server,
      ``nics_per_switch`` = smart NICs per server (the simulation's access
      switch is a server's PCIe switch complex with its NIC rails, as the
      seeds describe a node). Link figures are those of a card → PCIe switch
      link and a PCIe switch → NIC link; latency the PCIe switches' own.
    * **No PCIe switches, one smart NIC per card** (DGX H100: a ConnectX-7
      per GPU on its own PCIe link): the access tier becomes
      ``nic_per_card`` — card *i* links straight to NIC *i* (slot *r* of a
      server = rail *r*, as the builder wires card slot *r* to NIC *r*), the
      link figures are those of a card → NIC link, there is no switch
      latency. A cluster without PCIe switches whose NICs are not one per
      card is refused (the NIC could not be reached by the other cards).
    * **Core tiers**: the leaf, spine and core kinds present, in that order, as
      a fat tree of the leaf switches' radix; an InfiniBand network reduces in
      flight (``in_network_reduction``: SHARP, which every Quantum-2 /
      Quantum-X800 switch of the presets does), a RoCE one does not; each tier's link figures are
      those of a link from the tier below (NIC → leaf, leaf → spine, …) and
      its ``switch_ns`` the switches' latency.
    * **Figures per tier** are read from one representative device of each
      kind and its links (the spec holds one figure per tier; per-link
      variations are not represented); differing device latencies inside a
      kind are reported in ``notes`` and the largest is used.

Known differences from the database (reported, not hidden)
    The builder gives each server two PCIe switches of four cards, each with
    one NIC, not linked to each other; the simulation's access switch joins
    all eight cards and both NICs. Paths that leave a supernode are the same
    (card → PCIe → NIC → leaf … in both), and NIC rails land on the same
    leaves (rail *r* of every server of a supernode on one leaf), so
    cross-supernode hops and latency are identical; only a few paths inside a
    server (card → PCIe → card across the two halves) are shorter in the
    simulation. Parallel leaf–spine links are one link per spine there
    (same bandwidth). Failed cards and down links are not part of the spec;
    a failure scenario names them.

    The DGX preset has no such difference inside a unit: its NVLink meshes,
    card → NIC links and NIC → rail-leaf links are the simulation's one for
    one, so every card-to-card hop count and latency is the database
    graph's (tested from every card). Its leaves have 8 parallel links to
    each of 4 spines in the database and one link to each of 32 (k/2)
    spines in the simulation: the same uplink Gb/s per leaf, the same paths.
"""
from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from django.db.models import Count, Max, Min, Q

from simulation.topology import (
    AccessSpec,
    ClusterSpec,
    FabricSpec,
    NetworkSpec,
    NicSpec,
    SupernodeSpec,
    TierSpec,
    TopologyError,
)
from twin.hardware.choices import DeviceKindChoices as D
from twin.hardware.choices import FabricChoices as F
from twin.hardware.choices import LinkKindChoices as L

__all__ = [
    "CORE_KINDS",
    "SCALE_UP_TECHNOLOGY",
    "ClusterInput",
    "ScaleUp",
    "ConversionError",
    "card_node",
    "cluster_input",
    "fabric_spec",
]

CORE_KINDS = (D.LEAF, D.SPINE, D.CORE)
SCALE_UP_TECHNOLOGY = {"NVIDIA": "nvlink", "Huawei": "hccs"}
"""Scale-up link technology by accelerator vendor (protocol efficiency of the fabric)."""
NVLINK5_CARD_GBPS = 1_800 * 8 / 2
"""Per-card scale-up Gb/s per direction from which an NVIDIA card is on NVLink 5
(1.8 TB/s bidirectional per GPU; NVLink 4 is 900 GB/s): technology ``nvlink5``."""
NETWORK_TECHNOLOGY = {L.INFINIBAND: "infiniband", L.ROCE: "roce", L.PCIE: "pcie"}


class ConversionError(Exception):
    """A cluster the simulation cannot represent; ``field`` is the input to blame."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class ClusterInput:
    """A cluster as the simulation sees it.

    ``supernode_indices[p]`` is the model ``index`` of the supernode at
    position ``p`` of the spec (its cards are nodes ``offsets[p] …
    offsets[p] + sizes[p] − 1``).
    """

    cluster_id: int
    cluster_name: str
    spec: ClusterSpec
    supernode_indices: tuple[int, ...]
    offsets: tuple[int, ...]
    sizes: tuple[int, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    seconds: float = 0.0

    @property
    def n_cards(self) -> int:
        return self.spec.n_cards

    def position(self, supernode_index: int) -> int | None:
        """Spec position of the supernode with model ``index`` (None: no such)."""
        try:
            return self.supernode_indices.index(supernode_index)
        except ValueError:
            return None


@dataclass(frozen=True)
class ScaleUp:
    """What the cards of a supernode bring to its fabric: each card's total
    scale-up bandwidth per direction (None: unknown, no limit), the links'
    technology, and whether the switches reduce in flight."""

    card_gbps: float | None = None
    technology: str = "generic"
    in_switch_reduction: bool = False


def fabric_spec(fabric: str, card_count: int, dims: tuple[int, int, int], link_gbps: float,
                link_ns: float, switch_ns: float, *, where: str = "cluster",
                name: str = "", servers: int = 0, scale_up: ScaleUp | None = None) -> FabricSpec:
    """The simulation fabric of one supernode row (see the module docstring).

    ``servers`` (the supernode's server count) is needed for ``fat_tree``
    supernodes only: their fabric is one NVLink full mesh per server.
    """
    extra = scale_up or ScaleUp()
    spec = _fabric_shape(fabric, card_count, dims, link_gbps, link_ns, switch_ns, where=where,
                         name=name, servers=servers)
    return replace(spec, card_gbps=extra.card_gbps, technology=extra.technology,
                   in_switch_reduction=extra.in_switch_reduction
                   and spec.kind in ("server_mesh", "full_mesh", "switch"))


def _fabric_shape(fabric: str, card_count: int, dims: tuple[int, int, int], link_gbps: float,
                  link_ns: float, switch_ns: float, *, where: str, name: str,
                  servers: int) -> FabricSpec:
    dx, dy, dz = dims
    if fabric == F.FAT_TREE:
        if servers < 1 or card_count % servers:
            raise ConversionError(where, (
                f"supernode {name or '?'}: {card_count} cards do not spread evenly over its "
                f"{servers} servers; an NVLink-switched supernode needs equal servers"))
        if servers == 1:
            return FabricSpec("full_mesh", (card_count,), link_gbps, link_ns, 0.0)
        return FabricSpec("server_mesh", (servers, card_count // servers), link_gbps, link_ns,
                          0.0)
    if fabric == F.TORUS_3D:
        return FabricSpec("torus", (dz, dy, dx), link_gbps, link_ns, 0.0)
    if fabric == F.TORUS_2D:
        return FabricSpec("torus", (dy, dx), link_gbps, link_ns, 0.0)
    if fabric == F.RING:
        return FabricSpec("ring", (card_count,), link_gbps, link_ns, 0.0)
    if fabric == F.FULL_MESH:
        return FabricSpec("full_mesh", (card_count,), link_gbps, link_ns, 0.0)
    if fabric == F.PCIE_STAR:
        return FabricSpec("switch", (card_count,), link_gbps, link_ns, switch_ns)
    raise ConversionError(where, (
        f"supernode {name or '?'}: {F.label(fabric)} supernodes have no simulation fabric "
        f"yet (supported: 3D/2D torus, ring, full mesh, PCIe-switch star, NVLink-switched "
        f"servers); give a topology family in params instead of a cluster"))


def _groups(rows: list[tuple[Any, ...]], where: str, servers: dict[int, int],
            cards: ScaleUp) -> tuple[list[SupernodeSpec], list[int]]:
    groups: list[SupernodeSpec] = []
    sizes: list[int] = []
    run_first = 0
    for pos, (index, name, fabric, count, dx, dy, dz, gbps, lns, sns, isr) in enumerate(rows):
        spec = fabric_spec(fabric, count, (dx, dy, dz), gbps, lns, sns, where=where, name=name,
                           servers=servers.get(index, 0),
                           scale_up=replace(cards, in_switch_reduction=bool(isr)))
        if spec.n_cards != count:
            raise ConversionError(where, f"supernode {name}: dimensions {dx}×{dy}×{dz} do not "
                                         f"hold its {count} cards; fix the supernode")
        sizes.append(count)
        if groups and groups[-1].fabric == spec:
            last = groups[-1]
            groups[-1] = SupernodeSpec(last.count + 1, spec, f"supernodes {run_first}–{pos}")
        else:
            run_first = pos
            groups.append(SupernodeSpec(1, spec, f"supernodes {pos}–{pos}"))
    return groups, sizes


def _other_end(link: dict[str, Any], device_id: int) -> tuple[str, int | None]:
    """(kind, id) of the end of ``link`` that is not device ``device_id``."""
    if link["a_device_id"] == device_id and link["b_device_id"] != device_id:
        side = "b"
    else:
        side = "a"
    if link[f"{side}_card_id"]:
        return "card", link[f"{side}_card_id"]
    return link[f"{side}_device__kind"], link[f"{side}_device_id"]


def _figure(links: Iterable[dict[str, Any]], device_id: int | None,
            other: str) -> tuple[float, float, str] | None:
    """(Gb/s, ns, link kind) of a link between ``device_id`` and an end of kind ``other``."""
    if device_id is None:
        return None
    for link in links:
        if device_id in (link["a_device_id"], link["b_device_id"]):
            kind, _ = _other_end(link, device_id)
            if kind == other:
                return float(link["bandwidth_gbps"]), float(link["latency_ns"]), link["kind"]
    return None


def _network_technology(links: list[dict[str, Any]], nic: dict[str, Any],
                        tiers: list[dict[str, Any]]) -> str:
    """The NIC → first-tier links' technology (InfiniBand, RoCE)."""
    figure = _figure(links, nic["first"], tiers[0]["kind"])
    return NETWORK_TECHNOLOGY.get(figure[2], "generic") if figure else "generic"


def _network(cluster_id: int, cards: int, servers: int, where: str,
             notes: list[str]) -> NetworkSpec | None:
    from twin.hardware.models import Link, NetworkDevice

    kinds = {
        row["kind"]: row
        for row in NetworkDevice.objects.filter(cluster_id=cluster_id).order_by()
        .values("kind").annotate(n=Count("id"), first=Min("id"), max_ports=Max("ports"),
                                 min_ports=Min("ports"), max_ns=Max("latency_ns"),
                                 min_ns=Min("latency_ns"))
    }
    if not kinds:
        return None
    for kind, row in kinds.items():
        if row["max_ns"] != row["min_ns"]:
            notes.append(f"{D.label(kind)} latencies range {row['min_ns']:g}–{row['max_ns']:g} ns; "
                         f"the simulation uses {row['max_ns']:g} ns for all of them")
    pcie, nic = kinds.get(D.PCIE_SWITCH), kinds.get(D.SMART_NIC)
    tiers = [kinds[k] | {"kind": k} for k in CORE_KINDS if k in kinds]
    if pcie is None and nic is not None and tiers:
        return _direct_network(cluster_id, cards, servers, where, notes, nic, tiers)
    if pcie is None or nic is None or not tiers:
        missing = [label for label, row in (("PCIe switches", pcie), ("smart NICs", nic),
                                            ("leaf/spine/core switches", tiers or None))
                   if row is None]
        raise ConversionError(where, (
            f"the cluster network lacks {', '.join(missing)}: the simulation needs the seeds' "
            f"three tiers (PCIe switch → smart NIC → switches), or no network devices at all"))
    if not servers or cards % servers:
        raise ConversionError(where, f"{cards} cards do not spread evenly over {servers} "
                                     f"servers; every server must hold the same number")
    if nic["n"] % servers:
        raise ConversionError(where, f"{nic['n']} smart NICs do not spread evenly over "
                                     f"{servers} servers")
    reps = [pcie["first"], nic["first"], *(t["first"] for t in tiers)]
    links = list(
        Link.objects.filter(Q(a_device_id__in=reps) | Q(b_device_id__in=reps)).order_by()
        .values("a_card_id", "a_device_id", "b_card_id", "b_device_id", "a_device__kind",
                "b_device__kind", "bandwidth_gbps", "latency_ns", "kind")
    )
    card_link = _figure(links, pcie["first"], "card")
    pcie_nic = _figure(links, pcie["first"], D.SMART_NIC)
    if card_link is None or pcie_nic is None:
        raise ConversionError(where, "a PCIe switch without a link to a card or to a smart NIC: "
                                     "the simulation cannot price the access tier")
    return NetworkSpec(
        access=AccessSpec(cards_per_switch=cards // servers, link_gbps=card_link[0],
                          link_ns=card_link[1], switch_ns=float(pcie["max_ns"])),
        aggregation=NicSpec(nics_per_switch=nic["n"] // servers, link_gbps=pcie_nic[0],
                            link_ns=pcie_nic[1], nic_ns=float(nic["max_ns"])),
        core=_core(links, nic, tiers, where, notes),
        technology=(tech := _network_technology(links, nic, tiers)),
        in_network_reduction=tech == "infiniband",
    )


def _direct_network(cluster_id: int, cards: int, servers: int, where: str, notes: list[str],
                    nic: dict[str, Any], tiers: list[dict[str, Any]]) -> NetworkSpec:
    """The network of a cluster without PCIe switches: one smart NIC per card.

    The DGX H100 layout: each GPU has its own 400G NIC on its own PCIe link
    (card → smart NIC), rail *r* = the card in slot *r* of every server. The
    spec's access tier is then that card → NIC link (``nic_per_card``).
    """
    from twin.hardware.models import Link

    if not servers or cards % servers:
        raise ConversionError(where, f"{cards} cards do not spread evenly over {servers} "
                                     f"servers; every server must hold the same number")
    if nic["n"] != cards:
        raise ConversionError(where, (
            f"no PCIe switches and {nic['n']} smart NICs for {cards} cards: without PCIe "
            f"switches the simulation needs one NIC per card (or add the PCIe switches)"))
    reps = [nic["first"], *(t["first"] for t in tiers)]
    links = list(
        Link.objects.filter(Q(a_device_id__in=reps) | Q(b_device_id__in=reps)).order_by()
        .values("a_card_id", "a_device_id", "b_card_id", "b_device_id", "a_device__kind",
                "b_device__kind", "bandwidth_gbps", "latency_ns", "kind")
    )
    card_link = _figure(links, nic["first"], "card")
    if card_link is None:
        raise ConversionError(where, "a smart NIC without a link to a card (and no PCIe "
                                     "switches): the simulation cannot price the access tier")
    cps = cards // servers
    return NetworkSpec(
        access=AccessSpec(cards_per_switch=cps, link_gbps=card_link[0], link_ns=card_link[1],
                          switch_ns=0.0, nic_per_card=True),
        aggregation=NicSpec(nics_per_switch=cps, link_gbps=card_link[0], link_ns=card_link[1],
                            nic_ns=float(nic["max_ns"])),
        core=_core(links, nic, tiers, where, notes),
        technology=(tech := _network_technology(links, nic, tiers)),
        in_network_reduction=tech == "infiniband",
    )


def _core(links: list[dict[str, Any]], nic: dict[str, Any], tiers: list[dict[str, Any]],
          where: str, notes: list[str]) -> tuple[TierSpec, ...]:
    """The leaf/spine/core tiers as a fat tree of the leaves' radix."""
    below = nic
    core: list[TierSpec] = []
    radix = int(tiers[0]["max_ports"])
    if radix % 2:
        radix -= 1
        notes.append(f"leaf switches have an odd port count; the fat tree uses radix {radix}")
    for tier in tiers:
        figure = _figure(links, below["first"], tier["kind"])
        if figure is None:
            raise ConversionError(where, (
                f"no link from a {D.label(below.get('kind', D.SMART_NIC))} to a "
                f"{D.label(tier['kind'])}: the simulation needs each tier linked to the next"))
        if tier["max_ports"] != radix or tier["min_ports"] != tier["max_ports"]:
            notes.append(f"{D.label(tier['kind'])} switches have {tier['min_ports']}–"
                         f"{tier['max_ports']} ports; the fat tree uses the leaves' radix {radix}")
        core.append(TierSpec(name=str(tier["kind"]), radix=radix, link_gbps=figure[0],
                             link_ns=figure[1], switch_ns=float(tier["max_ns"])))
        below = tier
    return tuple(core)


def cluster_input(cluster: Any, *, where: str = "cluster") -> ClusterInput:
    """Convert one cluster (a model instance or its id) to a :class:`ClusterInput`.

    Raises :class:`ConversionError` naming ``where`` when the cluster cannot be
    simulated (no supernodes, missing cards, an unsupported fabric, a partial
    network); the message says what to fix.
    """
    from twin.hardware.models import Card, Cluster, Server, SuperNode

    started = time.perf_counter()
    if not isinstance(cluster, Cluster):
        found = Cluster.objects.filter(pk=cluster).first()
        if found is None:
            raise ConversionError(where, f"cluster {cluster!r} does not exist")
        cluster = found
    rows = list(
        SuperNode.objects.filter(cluster_id=cluster.pk).order_by("index").values_list(
            "index", "name", "fabric", "card_count", "dim_x", "dim_y", "dim_z", "link_gbps",
            "link_latency_ns", "switch_latency_ns", "in_switch_reduction")
    )
    if not rows:
        raise ConversionError(where, f"cluster {cluster.name!r} has no supernodes to simulate")
    per_sn: dict[int, int] = {}
    if any(r[2] == F.FAT_TREE for r in rows):  # NVLink servers: the fabric needs their size
        per_sn = dict(Server.objects.filter(supernode__cluster_id=cluster.pk).order_by()
                      .values_list("supernode__index").annotate(n=Count("id")))
    # one pass over the cards counts them per accelerator type (the count was needed anyway)
    by_type = list(Card.objects.filter(supernode__cluster_id=cluster.pk).order_by()
                   .values("accelerator__scaleup_gbps", "accelerator__vendor")
                   .annotate(n=Count("id")))
    notes: list[str] = []
    groups, sizes = _groups(rows, where, per_sn, _scale_up(by_type, notes))
    designed = sum(sizes)
    cards = sum(row["n"] for row in by_type)
    if cards != designed:
        raise ConversionError(where, (
            f"cluster {cluster.name!r} has {cards:,} cards but its supernodes are designed for "
            f"{designed:,}; the simulation needs every supernode fully populated"))
    servers = (sum(per_sn.values()) if per_sn
               else Server.objects.filter(supernode__cluster_id=cluster.pk).count())
    network = _network(cluster.pk, cards, servers, where, notes)
    spec = ClusterSpec(name=cluster.name, supernodes=tuple(groups), network=network)
    try:
        spec.validate()
    except TopologyError as exc:
        raise ConversionError(where, f"{exc.field}: {exc.message}") from exc
    offsets = [0]
    for size in sizes[:-1]:
        offsets.append(offsets[-1] + size)
    return ClusterInput(
        cluster_id=cluster.pk,
        cluster_name=cluster.name,
        spec=spec,
        supernode_indices=tuple(int(r[0]) for r in rows),
        offsets=tuple(offsets),
        sizes=tuple(sizes),
        notes=tuple(notes),
        seconds=time.perf_counter() - started,
    )


def _scale_up(by_type: list[dict[str, Any]], notes: list[str]) -> ScaleUp:
    """Each card's scale-up limit and link technology, from its accelerator type.

    The catalogue's ``scaleup_gbps`` is the datasheet's aggregate
    bidirectional GB/s (H100: 900): per direction in Gb/s that is ×8/2
    (3,600). Mixed types: the slowest card's figure, and a note.
    """
    known = [r for r in by_type if r["accelerator__scaleup_gbps"]]
    if not known:
        return ScaleUp()
    gbps = min(float(r["accelerator__scaleup_gbps"]) for r in known) * 8 / 2
    vendors = {r["accelerator__vendor"] for r in known}
    if len(known) > 1:
        notes.append(f"cards of {len(known)} accelerator types: every card is limited to the "
                     f"slowest's {gbps:,.0f} Gb/s of scale-up bandwidth per direction")
    tech = SCALE_UP_TECHNOLOGY.get(vendors.pop(), "generic") if len(vendors) == 1 else "generic"
    if tech == "nvlink" and gbps >= NVLINK5_CARD_GBPS:
        tech = "nvlink5"  # Blackwell's NVLink 5 and its switch: its own efficiencies
    return ScaleUp(card_gbps=gbps, technology=tech)


def card_node(info: ClusterInput, supernode_index: int, fabric: str, index: int,
              dims: tuple[int, int, int], xyz: tuple[int | None, int | None, int | None]) -> int:
    """The simulation node of one card (by its supernode and its coordinates or index)."""
    pos = info.position(supernode_index)
    if pos is None:
        raise ConversionError("cluster", f"supernode {supernode_index} is not in the cluster")
    x, y, z = xyz
    dx, dy, _ = dims
    if fabric == F.TORUS_3D and None not in (x, y, z):
        local = int(x) + dx * (int(y) + dy * int(z))  # type: ignore[arg-type]
    elif fabric == F.TORUS_2D and None not in (x, y):
        local = int(x) + dx * int(y)  # type: ignore[arg-type]
    else:
        local = int(index)
    return info.offsets[pos] + local
