"""Plain-dataclass descriptions of a topology: what the REST API and the model export.

Two kinds of input, both JSON-round-trippable (``to_dict`` / ``from_dict``):

* :class:`FamilySpec` — one standalone family, e.g.
  ``{"family": "torus", "dims": [8, 8, 8]}`` or ``{"family": "ring", "nodes": 512}``;
* :class:`ClusterSpec` — a whole cluster: groups of identical supernodes, each
  with its fabric (torus, ring, mesh, full mesh, a PCIe switch, or a full
  mesh per server — the NVLink domains of a DGX-style scalable unit), and the
  seeds' three-tier hybrid cluster network (access: PCIe switches per server,
  or one NIC per card with no switch; aggregation: smart NICs; core: 400G
  RoCE or InfiniBand leaf/spine/core tiers).

``from_dict`` validates everything up front and raises
:class:`~simulation.topology.graph.TopologyError` with the dotted path of the
offending field (``"supernodes[0].fabric.dims"``), so the API can answer 400
with per-field errors before anything is queued.

Default numbers (link speeds, latencies) are stated assumptions, not facts
from the seeds, except where marked: the seeds give 512-card 3D-torus
supernodes, 400 Gb/s links, two 400G RoCE smart NICs per server, PCIe Gen5
switches, < 200 ns (or < 500 ns) inside a supernode and < 2 µs RDMA across.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from math import prod
from typing import Any

from .graph import TopologyError

__all__ = [
    "AccessSpec",
    "ClusterSpec",
    "DEFAULT_LINK_GBPS",
    "DEFAULT_LINK_NS",
    "DEFAULT_SWITCH_NS",
    "FABRIC_KINDS",
    "FAMILIES",
    "TECHNOLOGIES",
    "FabricSpec",
    "FamilySpec",
    "NetworkSpec",
    "NicSpec",
    "SupernodeSpec",
    "TierSpec",
    "demo_cluster_spec",
    "million_cluster_spec",
]

DEFAULT_LINK_GBPS = 400.0
"""Per-direction link bandwidth (the seeds' 400 Gb/s channels)."""
DEFAULT_LINK_NS = 5.0
"""Assumption: about 1 m of copper or fibre (≈ 5 ns/m)."""
DEFAULT_SWITCH_NS = 10.0
"""Assumption: per-hop forwarding of an on-package router in a direct network."""

FAMILIES = ("ring", "torus", "mesh", "full_mesh", "star", "fat_tree")
TECHNOLOGIES = ("generic", "nvlink", "nvlink5", "hccs", "pcie", "infiniband", "roce")
"""Link technologies a fabric or network may declare; each has a default
protocol efficiency (:mod:`simulation.collectives.efficiency`). ``generic``:
an ideal link (efficiency 1, the closed forms hold exactly). ``nvlink`` is
NVLink 4 (Hopper, 900 GB/s per GPU), ``nvlink5`` NVLink 5 with its NVLink
switch (Blackwell: HGX B200, GB200/GB300 NVL72, 1.8 TB/s per GPU)."""
FABRIC_KINDS = ("torus", "ring", "mesh", "full_mesh", "switch", "server_mesh")

#: Size guards: beyond these a standalone family is almost certainly a typo
#: (and a full mesh of 10⁵ nodes is 5·10⁹ links).
MAX_NODES = 1 << 24
MAX_FULL_MESH = 4096


def _int(data: Mapping[str, Any], key: str, path: str, *, minimum: int, default: Any = ...) -> int:
    value = data.get(key, default)
    if value is ...:
        raise TopologyError(f"{path}{key}", "this field is required")
    if isinstance(value, bool) or not isinstance(value, int):
        raise TopologyError(f"{path}{key}", f"must be an integer, got {value!r}")
    if value < minimum:
        raise TopologyError(f"{path}{key}", f"must be ≥ {minimum}, got {value}")
    return value


def _float(
    data: Mapping[str, Any], key: str, path: str, default: float, *, positive: bool = False
) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TopologyError(f"{path}{key}", f"must be a number, got {value!r}")
    value = float(value)
    if value != value or value in (float("inf"), float("-inf")):
        raise TopologyError(f"{path}{key}", "must be finite")
    if positive and value <= 0:
        raise TopologyError(f"{path}{key}", f"must be > 0, got {value}")
    if not positive and value < 0:
        raise TopologyError(f"{path}{key}", f"must be ≥ 0, got {value}")
    return value


def _card_gbps(data: Mapping[str, Any], path: str) -> float | None:
    """Optional per-card injection limit (Gb/s per direction); None: none."""
    if data.get("card_gbps") is None:
        return None
    return _float(data, "card_gbps", path, 0.0, positive=True)


def _technology(data: Mapping[str, Any], path: str) -> str:
    value = data.get("technology", "generic")
    if value not in TECHNOLOGIES:
        raise TopologyError(
            f"{path}technology",
            f"unknown technology {value!r} (choose from {', '.join(TECHNOLOGIES)})",
        )
    return str(value)


def _dims(data: Mapping[str, Any], key: str, path: str) -> tuple[int, ...]:
    value = data.get(key)
    if value is None:
        raise TopologyError(f"{path}{key}", "this field is required")
    if not isinstance(value, list | tuple) or not value:
        raise TopologyError(f"{path}{key}", "must be a non-empty list of integers")
    out = []
    for i, k in enumerate(value):
        if isinstance(k, bool) or not isinstance(k, int):
            raise TopologyError(f"{path}{key}[{i}]", f"must be an integer, got {k!r}")
        if k <= 1:
            raise TopologyError(f"{path}{key}[{i}]", f"every dimension must be ≥ 2, got {k}")
        out.append(k)
    if prod(out) > MAX_NODES:
        raise TopologyError(f"{path}{key}", f"at most {MAX_NODES} nodes, got {prod(out)}")
    return tuple(out)


def _unknown(data: Mapping[str, Any], allowed: Sequence[str], path: str) -> None:
    for key in data:
        if key not in allowed:
            raise TopologyError(f"{path}{key}", f"unknown field (allowed: {', '.join(allowed)})")


def _mapping(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TopologyError(path or "params", f"must be an object, got {type(value).__name__}")
    return value


# --------------------------------------------------------------------- family
@dataclass(frozen=True)
class FamilySpec:
    """One standalone topology family.

    * ``ring``: ``nodes`` cards in a cycle;
    * ``torus``: k-ary n-cube with any ``dims`` (each ≥ 2; a 2 is one link);
    * ``mesh``: the same grid without wrap-around links;
    * ``full_mesh``: ``nodes`` cards, a direct link between every two;
    * ``star``: ``nodes`` cards on one PCIe switch;
    * ``fat_tree``: k-ary fat tree with ``tiers`` = 2 (leaf/spine, k²/2
      hosts) or 3 (k pods, k³/4 hosts), ``k`` even.

    ``switch_ns`` is the forwarding latency of every node a path passes
    through: the card's router in direct networks (ring, torus, mesh, full
    mesh), the switch in a star or fat tree.

    ``card_gbps`` caps what one card sends (and receives) per direction over
    all its links together — its ports, e.g. 3,600 for an H100's 450 GB/s of
    NVLink; None: only the links limit it.
    """

    family: str
    nodes: int | None = None
    dims: tuple[int, ...] | None = None
    k: int | None = None
    tiers: int | None = None
    link_gbps: float = DEFAULT_LINK_GBPS
    link_ns: float = DEFAULT_LINK_NS
    switch_ns: float = DEFAULT_SWITCH_NS
    card_gbps: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict, without the fields this family does not use."""
        out = {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}
        return {k: v for k, v in out.items() if v is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str = "") -> FamilySpec:
        """Validate and build; errors name the field (``family``, ``dims[1]``…)."""
        data = _mapping(data, path)
        family = data.get("family")
        if family not in FAMILIES:
            raise TopologyError(
                f"{path}family", f"unknown family {family!r} (choose from {', '.join(FAMILIES)})"
            )
        gbps = _float(data, "link_gbps", path, DEFAULT_LINK_GBPS, positive=True)
        lns = _float(data, "link_ns", path, DEFAULT_LINK_NS)
        sns = _float(data, "switch_ns", path, DEFAULT_SWITCH_NS)
        cap = _card_gbps(data, path)
        base = ["family", "link_gbps", "link_ns", "switch_ns", "card_gbps"]
        if family in ("ring", "full_mesh", "star"):
            _unknown(data, [*base, "nodes"], path)
            nodes = _int(data, "nodes", path, minimum=2)
            limit = MAX_FULL_MESH if family == "full_mesh" else MAX_NODES
            if nodes > limit:
                raise TopologyError(f"{path}nodes", f"at most {limit} for a {family}, got {nodes}")
            return cls(
                family, nodes=nodes, link_gbps=gbps, link_ns=lns, switch_ns=sns, card_gbps=cap
            )
        if family in ("torus", "mesh"):
            _unknown(data, [*base, "dims"], path)
            dims = _dims(data, "dims", path)
            return cls(family, dims=dims, link_gbps=gbps, link_ns=lns, switch_ns=sns, card_gbps=cap)
        _unknown(data, [*base, "k", "tiers"], path)
        k = _int(data, "k", path, minimum=2)
        if k % 2:
            raise TopologyError(f"{path}k", f"a k-ary fat tree needs an even k, got {k}")
        tiers = _int(data, "tiers", path, minimum=2, default=3)
        if tiers > 3:
            raise TopologyError(f"{path}tiers", f"2 or 3 tiers, got {tiers}")
        hosts = k**tiers // (2 if tiers == 2 else 4)
        if hosts > MAX_NODES:
            raise TopologyError(f"{path}k", f"{hosts} hosts is more than {MAX_NODES}")
        return cls(
            family, k=k, tiers=tiers, link_gbps=gbps, link_ns=lns, switch_ns=sns, card_gbps=cap
        )

    @property
    def n_cards(self) -> int:
        """Endpoints this family builds."""
        if self.family in ("torus", "mesh"):
            return prod(self.dims or ())
        if self.family == "fat_tree":
            k, t = self.k or 0, self.tiers or 3
            return int(k**t) // (2 if t == 2 else 4)
        return self.nodes or 0


# -------------------------------------------------------------------- cluster
@dataclass(frozen=True)
class FabricSpec:
    """The fabric inside one supernode (the seeds': 8×8×8 torus, 512 cards).

    ``kind`` and ``dims``: ``torus``/``mesh`` take the grid (row-major, last
    dimension fastest); ``ring``, ``full_mesh`` and ``switch`` take
    ``[cards]``; ``server_mesh`` takes ``[servers, cards_per_server]``: a
    direct full mesh among the cards of each server (consecutive card ids)
    and no link between servers — NVIDIA DGX H100's NVLink domain, whose four
    NVSwitch chips give every GPU its full NVLink bandwidth to any other
    (NVIDIA DGX H100 user guide / H100 Tensor Core GPU architecture white
    paper, 2022), modelled as its non-blocking equivalent: one link per pair,
    with ``card_gbps`` holding each GPU to its own 450 GB/s (3,600 Gb/s) per
    direction in total.

    ``card_gbps``: what one card sends (and receives) per direction over all
    its scale-up links together (None: only the links limit it).
    ``technology``: the links' kind, for the protocol efficiency a
    collective reaches on them (:data:`TECHNOLOGIES`).
    ``in_switch_reduction``: the fabric's switches reduce data in flight
    (NVLink SHARP on third-generation NVSwitch): enables the ``nvls``
    collective algorithm inside a switch domain (a server of a
    ``server_mesh``, or a ``switch``/``full_mesh`` supernode).
    """

    kind: str = "torus"
    dims: tuple[int, ...] = (8, 8, 8)
    link_gbps: float = DEFAULT_LINK_GBPS
    link_ns: float = DEFAULT_LINK_NS
    switch_ns: float = DEFAULT_SWITCH_NS
    card_gbps: float | None = None
    technology: str = "generic"
    in_switch_reduction: bool = False

    @property
    def n_cards(self) -> int:
        """Cards in one supernode (``dims`` holds ``[n]`` for non-grid kinds)."""
        return prod(self.dims)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str) -> FabricSpec:
        """Validate one fabric."""
        data = _mapping(data, path)
        _unknown(
            data,
            ["kind", "dims", "link_gbps", "link_ns", "switch_ns", "card_gbps", "technology",
             "in_switch_reduction"],
            path,
        )
        kind = data.get("kind", "torus")
        if kind not in FABRIC_KINDS:
            raise TopologyError(
                f"{path}kind", f"unknown fabric {kind!r} (choose from {', '.join(FABRIC_KINDS)})"
            )
        if kind == "torus" and "dims" not in data:
            dims: tuple[int, ...] = (8, 8, 8)  # the seeds' supernode
        else:
            dims = _dims(data, "dims", path)
        if kind in ("ring", "full_mesh", "switch") and len(dims) != 1:
            raise TopologyError(f"{path}dims", f"a {kind} fabric takes one number: [cards]")
        if kind == "full_mesh" and dims[0] > MAX_FULL_MESH:
            raise TopologyError(f"{path}dims", f"at most {MAX_FULL_MESH} cards in a full mesh")
        if kind == "server_mesh":
            if len(dims) != 2:
                raise TopologyError(
                    f"{path}dims", "a server_mesh fabric takes two numbers: [servers, cards]"
                )
            if dims[1] > MAX_FULL_MESH:
                raise TopologyError(
                    f"{path}dims[1]", f"at most {MAX_FULL_MESH} cards in one server's mesh"
                )
        isr = data.get("in_switch_reduction", False)
        if not isinstance(isr, bool):
            raise TopologyError(f"{path}in_switch_reduction", f"true or false, got {isr!r}")
        if isr and kind not in ("server_mesh", "full_mesh", "switch"):
            raise TopologyError(
                f"{path}in_switch_reduction",
                f"only a switched fabric (server_mesh, full_mesh, switch) reduces in the "
                f"switch, not a {kind}",
            )
        return cls(
            kind=kind,
            dims=dims,
            link_gbps=_float(data, "link_gbps", path, DEFAULT_LINK_GBPS, positive=True),
            link_ns=_float(data, "link_ns", path, DEFAULT_LINK_NS),
            switch_ns=_float(data, "switch_ns", path, DEFAULT_SWITCH_NS),
            card_gbps=_card_gbps(data, path),
            technology=_technology(data, path),
            in_switch_reduction=isr,
        )


@dataclass(frozen=True)
class SupernodeSpec:
    """``count`` identical supernodes sharing one fabric description."""

    count: int = 1
    fabric: FabricSpec = field(default_factory=FabricSpec)
    name: str = "supernode"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str) -> SupernodeSpec:
        """Validate one supernode group."""
        data = _mapping(data, path)
        _unknown(data, ["count", "fabric", "name"], path)
        name = data.get("name", "supernode")
        if not isinstance(name, str):
            raise TopologyError(f"{path}name", "must be a string")
        return cls(
            count=_int(data, "count", path, minimum=1, default=1),
            fabric=FabricSpec.from_dict(data.get("fabric", {}), f"{path}fabric."),
            name=name,
        )


@dataclass(frozen=True)
class AccessSpec:
    """Access tier: a PCIe switch per server, ``cards_per_switch`` cards on it.

    Defaults: 8 cards (the seeds' 8–16 H100 per node), PCIe Gen5 ×16 links
    (32 GT/s × 16 lanes ≈ 512 Gb/s per direction before encoding), and an
    assumed 100 ns switch latency.

    ``nic_per_card``: no PCIe switch at all — every card has its own NIC on
    its own PCIe link (DGX H100: one ConnectX-7 per GPU, NVIDIA DGX H100
    user guide; NVIDIA DGX SuperPOD reference architecture). Then
    ``cards_per_switch`` counts the cards of a server, ``link_*`` is the
    card → NIC link, ``switch_ns`` is unused, and the aggregation tier must
    have one NIC per card (its ``link_*`` is unused too).
    """

    cards_per_switch: int = 8
    link_gbps: float = 512.0
    link_ns: float = 5.0
    switch_ns: float = 100.0
    nic_per_card: bool = False

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str) -> AccessSpec:
        """Validate the access tier."""
        data = _mapping(data, path)
        _unknown(
            data, ["cards_per_switch", "link_gbps", "link_ns", "switch_ns", "nic_per_card"], path
        )
        direct = data.get("nic_per_card", False)
        if not isinstance(direct, bool):
            raise TopologyError(f"{path}nic_per_card", f"must be true or false, got {direct!r}")
        return cls(
            cards_per_switch=_int(data, "cards_per_switch", path, minimum=1, default=8),
            link_gbps=_float(data, "link_gbps", path, 512.0, positive=True),
            link_ns=_float(data, "link_ns", path, 5.0),
            switch_ns=_float(data, "switch_ns", path, 100.0),
            nic_per_card=direct,
        )


@dataclass(frozen=True)
class NicSpec:
    """Aggregation tier: ``nics_per_switch`` smart NICs on each PCIe switch.

    The seeds: two 400G RoCE smart NICs per node. ``link_*`` is the PCIe
    link from the access switch to the NIC; ``nic_ns`` the NIC's own
    latency (assumed 250 ns); the NIC's network port is the leaf tier's link.
    """

    nics_per_switch: int = 2
    link_gbps: float = 512.0
    link_ns: float = 5.0
    nic_ns: float = 250.0

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str) -> NicSpec:
        """Validate the NIC tier."""
        data = _mapping(data, path)
        _unknown(data, ["nics_per_switch", "link_gbps", "link_ns", "nic_ns"], path)
        return cls(
            nics_per_switch=_int(data, "nics_per_switch", path, minimum=1, default=2),
            link_gbps=_float(data, "link_gbps", path, 512.0, positive=True),
            link_ns=_float(data, "link_ns", path, 5.0),
            nic_ns=_float(data, "nic_ns", path, 250.0),
        )


@dataclass(frozen=True)
class TierSpec:
    """One switch tier of the core RoCE network (leaf, spine, core).

    ``link_*`` describes the links from this tier *down* (leaf: NIC–leaf;
    spine: leaf–spine; core: spine–core). Every tier shares one ``radix``:
    the network is a k-ary fat tree (Al-Fares et al. 2008) pruned to the
    pods and edge switches the cluster needs.
    """

    name: str = "leaf"
    radix: int = 128
    link_gbps: float = 400.0
    link_ns: float = 25.0
    switch_ns: float = 300.0

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str) -> TierSpec:
        """Validate one tier."""
        data = _mapping(data, path)
        _unknown(data, ["name", "radix", "link_gbps", "link_ns", "switch_ns"], path)
        name = data.get("name", "tier")
        if not isinstance(name, str):
            raise TopologyError(f"{path}name", "must be a string")
        radix = _int(data, "radix", path, minimum=2, default=128)
        if radix % 2:
            raise TopologyError(f"{path}radix", f"must be even (half down, half up), got {radix}")
        return cls(
            name=name,
            radix=radix,
            link_gbps=_float(data, "link_gbps", path, 400.0, positive=True),
            link_ns=_float(data, "link_ns", path, 25.0),
            switch_ns=_float(data, "switch_ns", path, 300.0),
        )


def _default_core() -> tuple[TierSpec, ...]:
    return (TierSpec("leaf"), TierSpec("spine"), TierSpec("core"))


@dataclass(frozen=True)
class NetworkSpec:
    """The seeds' three-tier hybrid cluster network.

    ``technology`` (``roce``, ``infiniband``…; :data:`TECHNOLOGIES`) sets the
    protocol efficiency collectives reach across it. Each card may inject at
    most its NICs' port speed into it: its own NIC's with ``nic_per_card``,
    otherwise its server's NICs together.

    ``in_network_reduction``: the switches reduce in flight (InfiniBand
    SHARP on Quantum-2 / Quantum-X800): across NVLS domains the ``nvls``
    AllReduce then sends each card's slice up the aggregation tree once
    instead of through a tree of NICs (:func:`~simulation.collectives.costs.
    nvls_across_allreduce`).
    """

    access: AccessSpec = field(default_factory=AccessSpec)
    aggregation: NicSpec = field(default_factory=NicSpec)
    core: tuple[TierSpec, ...] = field(default_factory=_default_core)
    technology: str = "generic"
    in_network_reduction: bool = False

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str) -> NetworkSpec:
        """Validate the network; the core tiers must share one radix."""
        data = _mapping(data, path)
        _unknown(
            data, ["access", "aggregation", "core", "technology", "in_network_reduction"], path
        )
        inr = data.get("in_network_reduction", False)
        if not isinstance(inr, bool):
            raise TopologyError(f"{path}in_network_reduction", f"true or false, got {inr!r}")
        core_raw = data.get("core")
        if core_raw is None:
            core = _default_core()
        else:
            if not isinstance(core_raw, list | tuple) or not 1 <= len(core_raw) <= 3:
                raise TopologyError(f"{path}core", "a list of 1 to 3 tiers (leaf, spine, core)")
            core = tuple(TierSpec.from_dict(t, f"{path}core[{i}].") for i, t in enumerate(core_raw))
            radices = {t.radix for t in core}
            if len(radices) > 1:
                raise TopologyError(
                    f"{path}core", f"all tiers must share one radix (k-ary fat tree), got {radices}"
                )
        return cls(
            access=AccessSpec.from_dict(data.get("access", {}), f"{path}access."),
            aggregation=NicSpec.from_dict(data.get("aggregation", {}), f"{path}aggregation."),
            core=core,
            technology=_technology(data, path),
            in_network_reduction=inr,
        )

    def capacity(self) -> int:
        """How many NIC ports the core tiers can attach (k, k²/2 or k³/4)."""
        k, t = self.core[0].radix, len(self.core)
        return k if t == 1 else (k * k // 2 if t == 2 else k**3 // 4)


@dataclass(frozen=True)
class ClusterSpec:
    """A cluster: supernode groups plus the cluster network (None: no network)."""

    name: str = "cluster"
    supernodes: tuple[SupernodeSpec, ...] = field(default_factory=lambda: (SupernodeSpec(),))
    network: NetworkSpec | None = field(default_factory=NetworkSpec)

    @property
    def n_supernodes(self) -> int:
        """Supernodes over all groups."""
        return sum(s.count for s in self.supernodes)

    @property
    def n_cards(self) -> int:
        """Cards over all supernodes."""
        return sum(s.count * s.fabric.n_cards for s in self.supernodes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (tuples become lists)."""

        def clean(value: Any) -> Any:
            if isinstance(value, dict):
                return {k: clean(v) for k, v in value.items()}
            if isinstance(value, list | tuple):
                return [clean(v) for v in value]
            return value

        out: dict[str, Any] = clean(asdict(self))
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str = "") -> ClusterSpec:
        """Validate a whole cluster description (see the module docstring)."""
        data = _mapping(data, path)
        _unknown(data, ["name", "supernodes", "network"], path)
        name = data.get("name", "cluster")
        if not isinstance(name, str):
            raise TopologyError(f"{path}name", "must be a string")
        raw = data.get("supernodes")
        if not isinstance(raw, list | tuple) or not raw:
            raise TopologyError(f"{path}supernodes", "a non-empty list of supernode groups")
        groups = tuple(
            SupernodeSpec.from_dict(g, f"{path}supernodes[{i}].") for i, g in enumerate(raw)
        )
        net_raw = data.get("network", {})
        network = None if net_raw is None else NetworkSpec.from_dict(net_raw, f"{path}network.")
        spec = cls(name=name, supernodes=groups, network=network)
        spec.validate(path)
        return spec

    def validate(self, path: str = "") -> None:
        """Cross-field checks: servers tile supernodes; the core has room.

        With a network, a ``server_mesh`` fabric's server is the access
        tier's (``dims[1] == cards_per_switch``), and ``nic_per_card`` access
        has exactly one NIC per card.
        """
        if self.n_cards > MAX_NODES:
            raise TopologyError(f"{path}supernodes", f"at most {MAX_NODES} cards")
        if self.network is None:
            return
        cps = self.network.access.cards_per_switch
        if self.network.access.nic_per_card and self.network.aggregation.nics_per_switch != cps:
            raise TopologyError(
                f"{path}network.aggregation.nics_per_switch",
                f"with nic_per_card every card has its own NIC: {cps} per server, got "
                f"{self.network.aggregation.nics_per_switch}",
            )
        for i, group in enumerate(self.supernodes):
            if group.fabric.kind == "server_mesh" and group.fabric.dims[1] != cps:
                raise TopologyError(
                    f"{path}supernodes[{i}].fabric.dims[1]",
                    f"a server_mesh server of {group.fabric.dims[1]} cards must match the "
                    f"network's {cps} cards per server",
                )
            if group.fabric.n_cards % cps:
                raise TopologyError(
                    f"{path}network.access.cards_per_switch",
                    f"{cps} cards per PCIe switch does not divide the "
                    f"{group.fabric.n_cards} cards of supernodes[{i}]",
                )
        nics = (self.n_cards // cps) * self.network.aggregation.nics_per_switch
        if nics > self.network.capacity():
            k, t = self.network.core[0].radix, len(self.network.core)
            raise TopologyError(
                f"{path}network.core",
                f"{nics} NICs need more ports than a {t}-tier fat tree of radix {k} has "
                f"({self.network.capacity()}); raise the radix or add a tier",
            )


def million_cluster_spec() -> ClusterSpec:
    """The seeds' full scale: 2,048 supernodes × 8×8×8 torus = 1,048,576 cards.

    131,072 servers of 8 cards, 262,144 smart NICs, and a 3-tier radix-128
    400G RoCE fat tree (4,096 leaf, 4,096 spine, 4,096 core switches) that
    exactly fills its 262,144 ports.
    """
    return ClusterSpec(
        name="million",
        supernodes=(SupernodeSpec(count=2048, fabric=FabricSpec("torus", (8, 8, 8))),),
        network=NetworkSpec(),
    )


def demo_cluster_spec() -> ClusterSpec:
    """The default demo: 8 supernodes × 512 cards (4,096 cards)."""
    return ClusterSpec(
        name="demo",
        supernodes=(SupernodeSpec(count=8, fabric=FabricSpec("torus", (8, 8, 8))),),
        network=NetworkSpec(),
    )
