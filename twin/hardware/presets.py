"""Cluster presets: plain data describing a cluster, and the plan derived from it.

A preset says what one supernode is made of (cards, servers, the devices in
each server, the scale-up fabric) and how supernodes join (the switched
network of leaf/spine/core switches). ``Preset.plan()`` turns it into counts
and a rack layout with ``simulation.power`` so that **no rack exceeds its
budget**; the builder writes exactly that plan. Nothing here touches the
database, so a million-card plan can be checked in microseconds.

Figures are nameplate (maximum) draws, as rack power is planned; each has its
source in a comment. Where a figure is an estimate it says so.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from simulation.power import RackBudgetError, RackPacking, ServerDraw, pack, pack_servers
from twin.hardware.choices import CoolingChoices, DeviceKindChoices, FabricChoices
from twin.hardware.choices import LinkKindChoices as L
from twin.hardware.constants import DEFAULT_PUE, DEFAULT_RACK_BUDGET_W

__all__ = [
    "GB200_NVL72",
    "PRESETS",
    "ClusterPlan",
    "DeviceSpec",
    "FabricPlan",
    "NetworkSpec",
    "NvmeSpec",
    "PfsSpec",
    "Preset",
    "SupernodeSpec",
    "design_fabric",
    "get_preset",
]


@dataclass(frozen=True)
class DeviceSpec:
    """A network device model (NIC, PCIe switch, leaf/spine/core switch)."""

    kind: str
    model: str
    ports: int
    port_gbps: int
    power_w: int
    latency_ns: float
    source: str = ""


@dataclass(frozen=True)
class NvmeSpec:
    """A server's local data drives: ``drives`` identical drives striped (RAID 0), so
    capacity and sequential bandwidth add up (the DGX H100's data cache is such a
    RAID 0; NVIDIA DGX H100 user guide)."""

    model: str
    drives: int
    drive_tb: float
    drive_read_gb_per_s: float
    drive_write_gb_per_s: float
    source: str = ""

    @property
    def tb(self) -> float:
        return round(self.drives * self.drive_tb, 3)

    @property
    def read_gb_per_s(self) -> float:
        return round(self.drives * self.drive_read_gb_per_s, 3)

    @property
    def write_gb_per_s(self) -> float:
        return round(self.drives * self.drive_write_gb_per_s, 3)


@dataclass(frozen=True)
class PfsSpec:
    """The cluster's parallel file system: ``appliances`` identical appliances, each a
    rack-mounted device with its capacity, bandwidth and draw. Lustre-class systems
    stripe files over their appliances, so the aggregate is the sum."""

    model: str
    appliances: int
    capacity_tb: float
    read_gb_per_s: float
    write_gb_per_s: float
    power_w: int
    ports: int
    port_gbps: int
    max_per_rack: int
    """Physical slots (rack units / appliance height, room left for switches)."""
    latency_ns: float = 0.0
    source: str = ""

    @property
    def device(self) -> DeviceSpec:
        return DeviceSpec(kind=DeviceKindChoices.STORAGE, model=self.model, ports=self.ports,
                          port_gbps=self.port_gbps, power_w=self.power_w,
                          latency_ns=self.latency_ns, source=self.source)

    @property
    def aggregate(self) -> dict[str, float]:
        """Capacity (TB) and read/write bandwidth (GB/s) of the whole file system."""
        n = self.appliances
        return {"capacity_tb": round(n * self.capacity_tb, 3),
                "read_gb_per_s": round(n * self.read_gb_per_s, 3),
                "write_gb_per_s": round(n * self.write_gb_per_s, 3)}


@dataclass(frozen=True)
class SupernodeSpec:
    """One supernode: cards, servers and their wiring."""

    accelerator: str
    """Catalogue slug (``AcceleratorType.slug``)."""
    card_tdp_w: int
    """Planning TDP; the builder uses the catalogue's figure if it differs."""
    cards: int
    cards_per_server: int
    fabric: str
    dims: tuple[int, int, int]
    scale_up: str
    """``"torus"``: links to the +x/+y/+z neighbour with wrap-around;
    ``"server_mesh"``: a full mesh among the cards of each server (an 8-GPU
    NVSwitch board); ``"full_mesh"``: a full mesh among all the supernode's
    cards (an NVL72 rack, whose NVLink switch trays join its 72 GPUs), each
    the non-blocking equivalent of the switch: one link per pair of cards."""
    scale_up_gbps: float
    """Per scale-up link, per direction."""
    scale_up_latency_ns: float
    switch_latency_ns: float
    server_overhead_w: int
    """CPUs, memory, fans, drives: everything but cards and modelled devices."""
    pcie_switch: DeviceSpec | None
    pcie_switches_per_server: int
    nic: DeviceSpec
    nics_per_server: int
    pcie_gbps: float
    pcie_latency_ns: float
    max_servers_per_rack: int
    """Physical slots (rack units / server height)."""
    in_switch_reduction: bool = False
    """The scale-up switches reduce in flight (NVLink SHARP, NVSwitch gen 3+)."""
    memory_gib: int = 2048
    """Host memory per server."""
    nvme: NvmeSpec | None = None
    """Local data drives per server (None: none)."""
    whole_rack: bool = False
    """The supernode is one rack and cannot be split over several (an NVL72: its
    NVLink switch trays and cable spine join only the trays of their own rack)."""

    @property
    def servers(self) -> int:
        return self.cards // self.cards_per_server

    @property
    def devices_per_server(self) -> int:
        return self.pcie_switches_per_server + self.nics_per_server

    @property
    def device_w_per_server(self) -> int:
        switch_w = self.pcie_switch.power_w if self.pcie_switch else 0
        return self.pcie_switches_per_server * switch_w + self.nics_per_server * self.nic.power_w

    def server_draw(self, card_tdp_w: int | None = None) -> ServerDraw:
        return ServerDraw(
            cards=self.cards_per_server,
            card_w=self.card_tdp_w if card_tdp_w is None else card_tdp_w,
            overhead_w=self.server_overhead_w,
            devices_w=self.device_w_per_server,
        )

    @property
    def scale_up_links(self) -> int:
        """Scale-up links of one supernode (see ``torus_links``)."""
        if self.scale_up == "server_mesh":
            c = self.cards_per_server
            return self.servers * c * (c - 1) // 2
        if self.scale_up == "full_mesh":
            return self.cards * (self.cards - 1) // 2
        return torus_links(self.dims)

    @property
    def nvlink_domain_cards(self) -> int:
        """Cards one scale-up domain joins: a server of a ``server_mesh``, else the
        whole supernode (a torus, or an NVL72 rack's ``full_mesh``)."""
        return self.cards_per_server if self.scale_up == "server_mesh" else self.cards

    @property
    def access_links(self) -> int:
        """Card→first device PCIe links, plus PCIe switch→NIC links."""
        per_server = self.cards_per_server
        if self.pcie_switches_per_server:
            per_server += self.pcie_switches_per_server
        return self.servers * per_server


def torus_links(dims: tuple[int, int, int]) -> int:
    """Links of a torus: each card links to its + neighbour along each axis.

    An axis of size ≥ 3 contributes one link per card (a ring); an axis of
    size 2 half as many (the wrap-around neighbour is the same card, and the
    pair is wired once); an axis of size 1 none. 8×8×8 → 3 × 512 = 1,536.
    """
    cards = dims[0] * dims[1] * dims[2]
    total = 0
    for size in dims:
        if size >= 3:
            total += cards
        elif size == 2:
            total += cards // 2
    return total


@dataclass(frozen=True)
class NetworkSpec:
    """The switched (scale-out) network that joins the NICs of all supernodes."""

    link_kind: str
    link_gbps: float
    leaf: DeviceSpec
    spine: DeviceSpec
    core: DeviceSpec
    radix: int
    """Ports per switch; a power of two (the Clos wiring splits it in halves)."""
    nic_leaf_latency_ns: float
    leaf_spine_latency_ns: float
    spine_core_latency_ns: float
    max_switches_per_rack: int
    rack_budget_w: int = DEFAULT_RACK_BUDGET_W


@dataclass(frozen=True)
class FabricPlan:
    """A non-blocking folded Clos (fat tree) of radix-``k`` switches.

    Each leaf gives half its ports (``k/2``) to NICs and half to spines, so
    up-bandwidth equals down-bandwidth (no oversubscription).

    * ``tiers == 1``: one leaf holds every NIC.
    * ``tiers == 2``: ``L ≤ k`` leaves; ``S`` spines (a power of two, ≥ 2,
      ≥ L/2 so a spine's ports suffice); each leaf has ``k/2 / S`` parallel
      links to each spine.
    * ``tiers == 3``: pods of ``k/2`` leaves and ``k/2`` spines, fully
      connected inside the pod; spine ``j`` of every pod connects to the
      ``G`` cores of group ``j`` (``k/2`` groups) with ``k/2 / G`` parallel
      links each, ``G`` = the smallest power of two with ``P × k/2 / G ≤ k``.
      Up to ``k³/4`` NICs (524,288 at k = 128), the classic fat-tree bound.
    """

    endpoints: int
    radix: int
    tiers: int
    leaves: int
    spines: int
    cores: int
    pods: int
    spines_per_pod: int
    leaf_spine_parallel: int
    cores_per_group: int
    spine_core_parallel: int

    @property
    def half(self) -> int:
        return self.radix // 2

    @property
    def switches(self) -> int:
        return self.leaves + self.spines + self.cores

    @property
    def leaf_spine_links(self) -> int:
        return 0 if self.tiers < 2 else self.leaves * self.half

    @property
    def spine_core_links(self) -> int:
        return 0 if self.tiers < 3 else self.spines * self.half

    @property
    def links(self) -> int:
        """NIC–leaf + leaf–spine + spine–core links."""
        return self.endpoints + self.leaf_spine_links + self.spine_core_links


def _pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def design_fabric(endpoints: int, radix: int) -> FabricPlan:
    """Size a non-blocking fat tree for ``endpoints`` NIC ports (see FabricPlan).

    >>> f = design_fabric(262_144, 128)
    >>> (f.tiers, f.leaves, f.spines, f.cores)
    (3, 4096, 4096, 2048)
    """
    if radix < 4 or radix & (radix - 1):
        raise ValueError(f"switch radix must be a power of two ≥ 4, not {radix}")
    half = radix // 2
    leaves = max(1, -(-endpoints // half))
    if leaves == 1:
        return FabricPlan(endpoints, radix, 1, 1, 0, 0, 1, 0, 0, 0, 0)
    if leaves <= radix:
        spines = min(half, _pow2_at_least(max(2, -(-leaves * half // radix))))
        return FabricPlan(endpoints, radix, 2, leaves, spines, 0, 1, spines, half // spines, 0, 0)
    pods = -(-leaves // half)
    if pods > radix:
        raise ValueError(
            f"{endpoints:,} NIC ports exceed a 3-tier fat tree of radix {radix} "
            f"(at most {radix ** 3 // 4:,}); use switches with more ports."
        )
    group = min(half, _pow2_at_least(-(-pods * half // radix)))
    return FabricPlan(endpoints, radix, 3, leaves, pods * half, half * group, pods, half, 1,
                      group, half // group)


@dataclass(frozen=True)
class ClusterPlan:
    """Everything the builder writes, counted, with the rack packing that
    keeps every rack inside its budget."""

    preset: Preset
    supernodes: int
    card_tdp_w: int
    rack_budget_w: int
    compute: RackPacking
    """Servers of ONE supernode into racks (racks never mix supernodes)."""
    network: RackPacking
    """Leaf/spine/core switches into separate network racks."""
    fabric: FabricPlan
    storage: RackPacking | None = None
    """File-system appliances into storage racks (None: the preset has no file system)."""

    @property
    def sn(self) -> SupernodeSpec:
        return self.preset.supernode

    @property
    def cards(self) -> int:
        return self.supernodes * self.sn.cards

    @property
    def servers(self) -> int:
        return self.supernodes * self.sn.servers

    @property
    def racks_per_supernode(self) -> int:
        return self.compute.racks

    @property
    def network_racks(self) -> int:
        return self.network.racks

    @property
    def pfs_appliances(self) -> int:
        return self.storage.items if self.storage else 0

    @property
    def storage_racks(self) -> int:
        return self.storage.racks if self.storage else 0

    @property
    def racks(self) -> int:
        return self.supernodes * self.racks_per_supernode + self.network_racks + \
            self.storage_racks

    @property
    def server_devices(self) -> int:
        return self.servers * self.sn.devices_per_server

    @property
    def devices(self) -> int:
        return self.server_devices + self.fabric.switches + self.pfs_appliances

    @property
    def links(self) -> int:
        per_sn = self.sn.scale_up_links + self.sn.access_links
        return self.supernodes * per_sn + self.fabric.links

    @property
    def server_w(self) -> int:
        return self.compute.item_w

    @property
    def it_power_w(self) -> int:
        """Σ nameplate draw: every server (cards + overhead + devices), switch and
        file-system appliance."""
        storage_w = self.pfs_appliances * self.storage.item_w if self.storage else 0
        return self.servers * self.server_w + self.fabric.switches * self.network.item_w + \
            storage_w

    @property
    def facility_power_w(self) -> float:
        """IT power × PUE (compute and network racks share the preset's PUE)."""
        return self.it_power_w * self.preset.pue

    @property
    def max_rack_w(self) -> int:
        return max(self.compute.fullest_rack_w, self.network.fullest_rack_w,
                   self.storage.fullest_rack_w if self.storage else 0)

    def storage_summary(self) -> dict[str, object]:
        """The storage tiers as built: per server (host memory, NVMe) and the file system."""
        nvme = self.sn.nvme
        pfs = self.preset.pfs
        return {
            "memory_gib_per_server": self.sn.memory_gib,
            "nvme_tb_per_server": nvme.tb if nvme else 0.0,
            "nvme_read_gb_per_s_per_server": nvme.read_gb_per_s if nvme else 0.0,
            "nvme_write_gb_per_s_per_server": nvme.write_gb_per_s if nvme else 0.0,
            "pfs_appliances": self.pfs_appliances,
            "pfs_model": pfs.model if pfs else "",
            **({f"pfs_{k}": v for k, v in pfs.aggregate.items()} if pfs else {}),
        }

    @property
    def rows(self) -> int:
        """Database rows the build writes (cluster excluded)."""
        return (self.supernodes + self.racks + self.servers + self.cards + self.devices
                + self.links)

    def summary(self) -> dict[str, object]:
        return {
            "preset": self.preset.name,
            "supernodes": self.supernodes,
            "cards": self.cards,
            "servers": self.servers,
            "racks": self.racks,
            "racks_per_supernode": self.racks_per_supernode,
            "servers_per_rack": self.compute.per_rack,
            "network_racks": self.network_racks,
            "storage_racks": self.storage_racks,
            "devices": self.devices,
            "switches": self.fabric.switches,
            "links": self.links,
            "server_w": self.server_w,
            "it_power_w": self.it_power_w,
            "facility_power_w": round(self.facility_power_w),
            "max_rack_w": self.max_rack_w,
            "rack_budget_w": self.rack_budget_w,
            "cards_per_rack": self.compute.per_rack * self.sn.cards_per_server,
            "nvlink_domain_cards": self.sn.nvlink_domain_cards,
            "cooling": self.preset.cooling,
            "liquid_share": self.preset.liquid_share,
            "pue": self.preset.pue,
            "storage": self.storage_summary(),
        }


@dataclass(frozen=True)
class Preset:
    """A named cluster design: one supernode spec times ``default_supernodes``."""

    name: str
    description: str
    supernode: SupernodeSpec
    network: NetworkSpec
    default_supernodes: int = 1
    default_name: str = ""
    rack_budget_w: int = DEFAULT_RACK_BUDGET_W
    cooling: str = CoolingChoices.LIQUID
    pue: float = DEFAULT_PUE[CoolingChoices.LIQUID]
    notes: tuple[str, ...] = field(default_factory=tuple)
    pfs: PfsSpec | None = None
    """The parallel file system, in storage racks of its own."""
    liquid_share: float | None = None
    """Share of the compute racks' heat taken by liquid (cold plates), the rest by
    air; None: not stated (the seeds say "liquid cooling" without a share). The
    facility model sizes CDUs and air handling from it."""
    facility_design: str = "standard"
    """The plant the facility builder builds for it (``twin.facility.designs``:
    ``standard`` or ``efficient``, the seeds' PUE ≤ 1.05 design)."""

    def plan(self, supernodes: int | None = None, rack_budget_w: int | None = None,
             card_tdp_w: int | None = None) -> ClusterPlan:
        """Counts and rack packing; raises ``simulation.power.RackBudgetError``
        when not even one server (or switch) fits a rack of this budget."""
        n = self.default_supernodes if supernodes is None else supernodes
        if n < 1:
            raise ValueError("a cluster needs at least one supernode")
        budget = self.rack_budget_w if rack_budget_w is None else rack_budget_w
        tdp = self.supernode.card_tdp_w if card_tdp_w is None else card_tdp_w
        compute = pack_servers(self.supernode.servers, self.supernode.server_draw(tdp), budget,
                               max_per_rack=self.supernode.max_servers_per_rack)
        if self.supernode.whole_rack and compute.racks > 1:
            need = self.supernode.servers * compute.item_w
            raise RackBudgetError(
                f"a {self.name} supernode is one rack of {self.supernode.servers} servers "
                f"({self.supernode.cards} cards in one NVLink domain) drawing {need:,} W; "
                f"a {budget:,} W budget holds {compute.per_rack} of them and the rack cannot "
                f"be split: give a budget of at least {need:,} W",
                item_w=compute.item_w, available_w=budget, min_budget_w=need)
        fabric = design_fabric(n * self.supernode.servers * self.supernode.nics_per_server,
                               self.network.radix)
        switch_w = max(self.network.leaf.power_w, self.network.spine.power_w,
                       self.network.core.power_w)
        network = pack(fabric.switches, switch_w, budget,
                       max_per_rack=self.network.max_switches_per_rack, what="switch")
        storage = pack(self.pfs.appliances, self.pfs.power_w, budget,
                       max_per_rack=self.pfs.max_per_rack,
                       what="file-system appliance") if self.pfs else None
        return ClusterPlan(self, n, tdp, budget, compute, network, fabric, storage)


# --------------------------------------------------------------------------
# Device figures (nameplate, W). Sources:
# * BlueField-3 400G DPU (B3140H class), the seeds' "smart NIC": NVIDIA
#   BlueField-3 DPU product brief: up to 150 W with the PCIe auxiliary power
#   connector; we plan for that maximum.
# * ConnectX-7 400G single-port OSFP adapter (one per GPU in DGX H100):
#   NVIDIA ConnectX-7 product brief, ~25 W typical; 25 W used.
# * PCIe Gen5 switch: the seeds name "PCIe Gen5 48-port switches" (Broadcom
#   PEX89000 / Microchip Switchtec PFX Gen5 class, 144-lane parts); such chips
#   are specified in the tens of watts, we plan 50 W (estimate).
# * 51.2 Tb/s Ethernet switch (NVIDIA Spectrum-4 SN5600 / Broadcom Tomahawk 5
#   class, 2U): 64 × 800G = radix 128 at 400G (SN5600 hardware user manual,
#   "up to 128 ports of 400GbE" via breakout). ~2.2 kW with 800G optics fitted
#   (switch ~1 kW plus 64 OSFP optics at ~17 W): an estimate for planning.
# * 400G NDR InfiniBand switch (NVIDIA Quantum-2 QM9700, 1U): 64 ports of
#   NDR 400 Gb/s (32 OSFP cages), the DGX SuperPOD leaf/spine; ~1.7 kW with
#   optics (estimate; NVIDIA lists ~747 W typical without optics).
# * DGX H100: 10.2 kW maximum system power (NVIDIA DGX H100 datasheet).
# * Server overhead of an 8×H100 HGX server besides GPUs and modelled NICs:
#   2 CPUs (~350 W each), 2 TB DDR5, fans/pumps, NVMe: ~1.8 kW.
# * PCIe Gen5 x16: 32 GT/s × 16 lanes × 128/130 ≈ 504 Gb/s per direction.
#
# Storage (docs/simulation.md, "Storage tiers of the presets", has the table):
# * DGX H100: 2 TB DDR5 system memory; 8 × 3.84 TB U.2 NVMe data drives
#   ("storage/cache"), 30.72 TB (NVIDIA DGX BasePOD reference architecture,
#   core components; DGX H100 user guide). The drives are Samsung PM1733-class
#   PCIe Gen4 U.2: 6.4 GB/s sequential read, 3.8 GB/s write each (Samsung's
#   PM1733 figures, as reported at its launch).
# * The seeds' server: "NVMe arrays of 15.36 TB drives", 32 TB near compute:
#   2 × 15.36 TB PCIe Gen5 drives (Samsung PM1743: 13 GB/s read, 6.6 GB/s
#   write each), and the DGX H100's 2 TB of host memory.
# * Parallel file system: DDN AI400X2 appliances (2U all-NVMe EXAScaler/Lustre,
#   the DGX SuperPOD's reference storage): ~90 GB/s read, ~65 GB/s write,
#   ~2.4 kW and 8 × 200 Gb/s ports each (DDN's published appliance figures,
#   not found in our search corpus, so to be checked against DDN's datasheet);
#   ~500 TB usable each (an estimate: 24 × 30.72 TB drives less RAID and
#   spares). Two make 180 GB/s read / 130 GB/s write: the seeds' 100–200 GB/s.
# --------------------------------------------------------------------------

PCIE5_X16_GBPS = 504.0

SMART_NIC_400G = DeviceSpec(
    kind=DeviceKindChoices.SMART_NIC, model="BlueField-3 400G DPU", ports=1, port_gbps=400,
    power_w=150, latency_ns=300.0,
    source="https://www.nvidia.com/en-us/networking/products/data-processing-unit/",
)
CX7_NIC_400G = DeviceSpec(
    kind=DeviceKindChoices.SMART_NIC, model="ConnectX-7 400G OSFP", ports=1, port_gbps=400,
    power_w=25, latency_ns=300.0,
    source="https://www.nvidia.com/en-us/networking/ethernet/connectx-7/",
)
SEED_NVME = NvmeSpec(
    model="Samsung PM1743 15.36 TB (PCIe Gen5 U.2)", drives=2, drive_tb=15.36,
    drive_read_gb_per_s=13.0, drive_write_gb_per_s=6.6,
    source="https://semiconductor.samsung.com/ssd/datacenter-ssd/pm1743/",
)
DGX_H100_NVME = NvmeSpec(
    model="3.84 TB U.2 NVMe (Samsung PM1733 class, PCIe Gen4)", drives=8, drive_tb=3.84,
    drive_read_gb_per_s=6.4, drive_write_gb_per_s=3.8,
    source="https://docs.nvidia.com/dgx-basepod/reference-architecture-infrastructure-"
           "foundation-enterprise-ai/latest/core-components.html",
)
AI400X2_PFS = PfsSpec(
    model="DDN AI400X2 (EXAScaler/Lustre)", appliances=2, capacity_tb=500.0,
    read_gb_per_s=90.0, write_gb_per_s=65.0, power_w=2_400, ports=8, port_gbps=200,
    # 2U each; 16 per 42U rack leaves room for the storage leaf switches.
    max_per_rack=16,
    source="https://www.ddn.com/resources/reference-architectures/nvidia-dgx-pod-h100",
)

CX7_NIC_400G_GB200 = replace(
    CX7_NIC_400G, source="https://docs.nvidia.com/dgx-superpod/reference-architecture-scalable-"
                         "infrastructure-gb200/latest/network-fabrics.html")
"""The GB200 compute tray's four ConnectX-7 400G NDR adapters, one per GPU (the DGX
GB200 SuperPOD's compute fabric; a GB300 tray carries ConnectX-8 800G instead)."""

PCIE_GEN5_SWITCH_48P = DeviceSpec(
    kind=DeviceKindChoices.PCIE_SWITCH, model="PCIe Gen5 48-port switch", ports=48,
    port_gbps=int(PCIE5_X16_GBPS), power_w=50, latency_ns=105.0,
    source="https://www.broadcom.com/products/pcie-switches-retimers/pcie-switches",
)


def _eth_51t(kind: str) -> DeviceSpec:
    return DeviceSpec(kind=kind, model="51.2T Ethernet switch (Spectrum-4 SN5600 class)",
                      ports=128, port_gbps=400, power_w=2_200, latency_ns=600.0,
                      source="https://www.nvidia.com/en-us/networking/ethernet-switching/")


def _ib_ndr(kind: str) -> DeviceSpec:
    return DeviceSpec(kind=kind, model="Quantum-2 QM9700 NDR", ports=64, port_gbps=400,
                      power_w=1_700, latency_ns=130.0,
                      source="https://www.nvidia.com/en-us/networking/infiniband/qm9700/")


ROCE_400G = NetworkSpec(
    link_kind=L.ROCE, link_gbps=400.0,
    leaf=_eth_51t(DeviceKindChoices.LEAF), spine=_eth_51t(DeviceKindChoices.SPINE),
    core=_eth_51t(DeviceKindChoices.CORE), radix=128,
    # Fibre at ~5 ns/m: ~10 m to a network rack, ~20 m and ~30 m further up.
    nic_leaf_latency_ns=50.0, leaf_spine_latency_ns=100.0, spine_core_latency_ns=150.0,
    # 2U switches in a 42U rack with patch panels and cable management.
    max_switches_per_rack=16,
)

NDR_400G = NetworkSpec(
    link_kind=L.INFINIBAND, link_gbps=400.0,
    leaf=_ib_ndr(DeviceKindChoices.LEAF), spine=_ib_ndr(DeviceKindChoices.SPINE),
    core=_ib_ndr(DeviceKindChoices.CORE), radix=64,
    nic_leaf_latency_ns=50.0, leaf_spine_latency_ns=100.0, spine_core_latency_ns=150.0,
    max_switches_per_rack=16,
)

SEED_SUPERNODE = SupernodeSpec(
    accelerator="h100-sxm5-80gb", card_tdp_w=700,
    cards=512, cards_per_server=8, fabric=FabricChoices.TORUS_3D, dims=(8, 8, 8),
    scale_up="torus",
    # The H100's 450 GB/s per direction (NVLink 4) spread over the 6 torus
    # neighbours: 3,600 Gb/s / 6 = 600 Gb/s per link and direction.
    scale_up_gbps=600.0,
    # The seeds: card-to-card latency inside a supernode < 200 ns per hop.
    scale_up_latency_ns=150.0, switch_latency_ns=105.0,
    server_overhead_w=1_800,
    pcie_switch=PCIE_GEN5_SWITCH_48P, pcie_switches_per_server=2,
    nic=SMART_NIC_400G, nics_per_server=2,
    pcie_gbps=PCIE5_X16_GBPS, pcie_latency_ns=20.0,
    # A liquid-cooled 8-GPU server is 4–6U: 8 fit a 48U rack physically;
    # power (5 per 40 kW) is the binding limit.
    max_servers_per_rack=8,
    memory_gib=2048, nvme=SEED_NVME,
)

DGX_H100_SU = SupernodeSpec(
    accelerator="h100-sxm5-80gb", card_tdp_w=700,
    cards=256, cards_per_server=8, fabric=FabricChoices.FAT_TREE, dims=(1, 1, 1),
    # NVLink inside a DGX H100 runs through 4 NVSwitch chips: any GPU reaches
    # any other at its full 450 GB/s per direction. We model that non-blocking
    # switch as its equivalent full mesh, 28 card–card links per server, each
    # at the per-GPU 3,600 Gb/s; the scenario converter holds each card to its
    # accelerator's 450 GB/s per direction in total (FabricSpec.card_gbps).
    scale_up="server_mesh", scale_up_gbps=3_600.0,
    scale_up_latency_ns=250.0, switch_latency_ns=130.0,
    # 10.2 kW max per DGX H100 = 8 × 700 W GPUs + 8 × 25 W ConnectX-7 +
    # 4,400 W for CPUs, NVSwitches, memory, storage, fans and the rest.
    server_overhead_w=4_400,
    pcie_switch=None, pcie_switches_per_server=0,
    nic=CX7_NIC_400G, nics_per_server=8,
    pcie_gbps=PCIE5_X16_GBPS, pcie_latency_ns=20.0,
    # An 8U DGX H100: 4 per 42U rack physically (NVIDIA's 4/rack at ~41 kW);
    # a 40 kW budget holds only 3.
    max_servers_per_rack=4,
    # Third-generation NVSwitch reduces in flight (NVLink SHARP): NCCL's NVLS.
    in_switch_reduction=True,
    memory_gib=2048, nvme=DGX_H100_NVME,
)

# --------------------------------------------------------------------------
# GB200 NVL72 (one rack = one 72-GPU NVLink domain = one supernode). Sources:
# * NVIDIA GB200 NVL72 product page and the DGX GB200 user guide: 36 GB200
#   superchips (72 Blackwell GPUs, 36 Grace CPUs) in 18 1U compute trays of
#   2 superchips = 4 GPUs each, and 9 NVLink switch trays of 2 NVLink switch
#   chips; 1.8 TB/s NVLink per GPU; liquid cooled.
# * Rack power: ~120 kW (NVIDIA's figure for the NVL72), up to ~132 kW
#   nameplate (SemiAnalysis, "GB200 hardware architecture", 2024): the preset
#   declares a 132 kW rack budget. About 85 % of the heat leaves in liquid
#   (cold plates on GPUs, CPUs and NVLink switches), the rest in air (fans for
#   NICs, drives, power shelves): the preset's ``liquid_share``.
# * Per compute tray (nameplate, W): 4 × 1,200 GPUs (catalogue TDP) + 4 ×
#   25 ConnectX-7 + overhead 1,750 = 2 Grace CPUs with LPDDR5X at 300 each (a
#   superchip is rated 2,700 W = 2 × 1,200 + 300) + a BlueField-3 DPU 150 +
#   E1.S drives, BMC and fans ~250 (estimate) + half an NVLink switch tray,
#   ~750 (estimate: 9 switch trays of ~1.5 kW shared by 18 compute trays).
#   18 × 6,650 W = 119.7 kW: NVIDIA's ~120 kW.
# * Host memory: 17 TB LPDDR5X per rack (NVL72 page) / 18 trays ≈ 960 GB.
# * Cooling: GPUs, CPUs, NICs and NVLink switches on cold plates, the rest by air
#   (MLCommons inference v6.1, Crusoe's GB200 NVL72 system description).
# * Scale-out: one 400G NDR port per GPU on a rail-optimised Quantum-2 fat tree
#   (DGX GB200 SuperPOD reference architecture, compute fabric); the switches
#   reduce in flight (SHARPv3), which the simulation's NVLS AllReduce uses
#   across racks.
# --------------------------------------------------------------------------

GB200_TRAY_NVME = NvmeSpec(
    model="3.84 TB E1.S NVMe (PCIe Gen4 class)", drives=4, drive_tb=3.84,
    drive_read_gb_per_s=6.4, drive_write_gb_per_s=3.8,
    source="https://raw.githubusercontent.com/mlcommons/inference_results_v6.1/main/closed/"
           "Crusoe/systems/GB200-NVL72_GB200-186GB_aarch64x16_Dynamo.json",
)
"""A compute tray's local NVMe: 4 drives in RAID 0 (MLCommons inference v6.1, Crusoe's
GB200 NVL72 system description: "local NVMe RAID0, 4x drives"); the drive size and
speeds are taken as the DGX H100's U.2 drives' (an estimate)."""

GB200_NVL72_RACK = SupernodeSpec(
    accelerator="gb200-186gb", card_tdp_w=1_200,
    cards=72, cards_per_server=4, fabric=FabricChoices.FULL_MESH, dims=(72, 1, 1),
    # The NVLink switch trays give every GPU its full 900 GB/s per direction to any
    # other: modelled as the switch's non-blocking equivalent, one link per pair of
    # GPUs at the per-GPU 7,200 Gb/s, each GPU held to its catalogue total
    # (FabricSpec.card_gbps), as the DGX preset models its NVSwitch board.
    scale_up="full_mesh", scale_up_gbps=7_200.0,
    # one NVLink switch hop plus cable cartridge: taken as the DGX H100's 250 ns
    # (estimate); the link figure covers the switch.
    scale_up_latency_ns=250.0, switch_latency_ns=0.0,
    server_overhead_w=1_750,
    pcie_switch=None, pcie_switches_per_server=0,
    nic=CX7_NIC_400G_GB200, nics_per_server=4,
    pcie_gbps=PCIE5_X16_GBPS, pcie_latency_ns=20.0,
    # 18 compute trays in the NVL72 rack (the 9 switch trays sit between them)
    max_servers_per_rack=18,
    in_switch_reduction=True,
    memory_gib=894, nvme=GB200_TRAY_NVME, whole_rack=True,
)

GB200_NVL72_BUDGET_W = 132_000
"""The NVL72 rack's budget: NVIDIA's ~120 kW with the ~132 kW nameplate headroom."""

SEED_512 = Preset(
    name="seed-512",
    description="The seeds' supernode: 512 H100 SXM5 in an 8×8×8 3D torus, 8 per server, "
                "2 PCIe Gen5 switches and 2 × 400G smart NICs per server, 400G RoCE "
                "leaf/spine, 40 kW liquid-cooled racks at PUE 1.05.",
    supernode=SEED_SUPERNODE, network=ROCE_400G, default_supernodes=1, default_name="seed-512",
    notes=("512 × 700 W ≈ 358 kW of cards alone: a supernode spans several 40 kW racks.",
           "Storage: 2 TB host memory and 2 × 15.36 TB NVMe per server; a parallel file "
           "system of 2 DDN AI400X2 (180 GB/s read, 130 GB/s write), the seeds' 100–200 GB/s.",),
    pfs=AI400X2_PFS,
    # the seeds' "liquid cooling, PUE ≤ 1.05" built as such (docs/facility.md)
    facility_design="efficient",
)

DGX_H100_SUPERPOD = Preset(
    name="dgx-h100-superpod",
    description="NVIDIA DGX SuperPOD scalable units: 32 DGX H100 (256 GPUs) per SU, NVLink "
                "inside each DGX, one 400G NDR NIC per GPU on rail-optimised leaves, "
                "leaf–spine InfiniBand.",
    supernode=DGX_H100_SU, network=NDR_400G, default_supernodes=1,
    default_name="dgx-h100-superpod",
    cooling=CoolingChoices.AIR, pue=DEFAULT_PUE[CoolingChoices.AIR],
    notes=("NVIDIA racks 4 DGX H100 (40.8 kW max); a 40 kW budget holds 3, so an SU needs "
           "11 racks, not 8.",
           "Storage: 2 TB DDR5 and 8 × 3.84 TB U.2 NVMe per DGX; 2 DDN AI400X2 appliances "
           "for the SU's file system.",),
    pfs=AI400X2_PFS,
)

# The demo and the million-card preset keep the standard plant the twin's benchmarks and
# live figures were measured on (``manage.py build_facility <cluster> --design efficient``
# rebuilds either with the seed's).
MILLION = replace(
    SEED_512, name="million", default_supernodes=2_048, default_name="million",
    facility_design="standard",
    description="2,048 × seed-512 = 1,048,576 H100 cards with the seeds' three-tier network: "
                "access PCIe switches, aggregation smart NICs, core 400G RoCE (a non-blocking "
                "3-tier fat tree of radix-128 switches: 4,096 leaves, 4,096 spines, 2,048 "
                "cores for 262,144 NIC ports).",
)

DEMO = replace(
    SEED_512, name="demo", default_supernodes=8, default_name="demo",
    facility_design="standard",
    description="The demo: 8 × seed-512 = 4,096 cards, loads in seconds.",
)

GB200_NVL72 = Preset(
    name="gb200-nvl72",
    description="NVIDIA GB200 NVL72 racks: 72 Blackwell GPUs per rack in one NVLink domain "
                "(18 compute trays of 2 GB200 superchips = 4 GPUs, 9 NVLink switch trays), "
                "liquid cooled at ~120 kW (132 kW budget), one 400G NDR NIC per GPU on a "
                "rail-optimised InfiniBand fat tree with SHARP.",
    supernode=GB200_NVL72_RACK, network=NDR_400G, default_supernodes=8,
    default_name="gb200-nvl72", rack_budget_w=GB200_NVL72_BUDGET_W,
    cooling=CoolingChoices.LIQUID, pue=DEFAULT_PUE[CoolingChoices.LIQUID], liquid_share=0.85,
    notes=("One rack is one supernode and one NVLink domain: 72 GPUs, 119.7 kW nameplate "
           "against a 132 kW budget — a seed 40 kW rack holds 5 HGX servers (40 GPUs).",
           "The NVLink switch trays are not separate rows: their draw is shared out over the "
           "compute trays (half a switch tray each) and the builder writes the switch as its "
           "non-blocking equivalent, a link between every two GPUs of the rack.",
           "Storage: 894 GiB of LPDDR5X and 4 E1.S NVMe drives per compute tray; 2 DDN "
           "AI400X2 appliances for the file system."),
    pfs=AI400X2_PFS,
)

PRESETS: dict[str, Preset] = {
    p.name: p for p in (SEED_512, DGX_H100_SUPERPOD, MILLION, DEMO, GB200_NVL72)
}


def get_preset(name: str) -> Preset:
    """The preset called ``name``; ``KeyError`` listing the known ones otherwise."""
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}") from None
