"""Facts about hardware written once: which link ends may connect, and how.

``COMPATIBLE_ENDPOINTS`` is the one compatibility map (after NetBox's
``COMPATIBLE_TERMINATION_TYPES``): model validation, the API and the builder
all read it, so a new device kind is added here and nowhere else.
"""
from __future__ import annotations

from twin.hardware.choices import DeviceKindChoices as D
from twin.hardware.choices import LinkKindChoices as L

__all__ = [
    "CARD_ENDPOINT",
    "COMPATIBLE_ENDPOINTS",
    "DEFAULT_PUE",
    "DEFAULT_RACK_BUDGET_W",
    "DEFAULT_VFS_PER_SERVER",
    "DEVICE_TIER",
    "MAX_CARDS_PER_SERVER",
    "MAX_CARD_TDP_W",
    "MAX_DEVICE_LATENCY_NS",
    "MAX_DEVICE_PORTS",
    "MAX_DEVICE_POWER_W",
    "MAX_HBM_GIB",
    "MAX_HBM_TBPS",
    "MAX_LINK_GBPS",
    "MAX_LINK_LATENCY_NS",
    "MAX_NVME_GB_PER_S",
    "MAX_NVME_TB",
    "MAX_NICS_PER_SERVER",
    "MAX_PUE",
    "MAX_RACK_BUDGET_W",
    "MAX_SCALEUP_GBYTES",
    "MAX_SCALEUP_LINKS",
    "MAX_SERVER_MEMORY_GIB",
    "MAX_SERVER_OVERHEAD_W",
    "MAX_STORAGE_GB_PER_S",
    "MAX_STORAGE_TB",
    "MAX_SUPERNODE_CARDS",
    "MAX_TFLOPS",
    "MAX_VFS_PER_SERVER",
    "allowed_link_kinds",
]

CARD_ENDPOINT = "card"
DEFAULT_RACK_BUDGET_W = 40_000
DEFAULT_PUE = {"liquid": 1.05, "air": 1.4}

# --- sane bounds of physical figures --------------------------------------------------
# Wide enough for anything built or announced (wafer-scale parts included), tight
# enough that a typo is refused instead of flowing into every power figure and
# simulation: a rack budget of 10^15 W was accepted (issue 11). Enforced by the
# models' validators (admin and API, ``twin.core.bounds``) and by CheckConstraints.
MAX_RACK_BUDGET_W = 1_000_000
"""1 MW: the densest racks announced draw about 600 kW (NVIDIA Kyber, Rubin Ultra)."""
MAX_PUE = 3.0
"""Facility over IT power; surveys put the worst operating sites near 2.5 (Uptime
Institute), the average near 1.6."""
MAX_SERVER_OVERHEAD_W = 50_000
"""A server's draw besides its cards (a DGX H100: 4.4 kW)."""
MAX_CARDS_PER_SERVER = 64
MAX_VFS_PER_SERVER = 256
"""SR-IOV virtual functions a server hands to tenants' containers: PCIe SR-IOV NICs
expose up to a few hundred per port (ConnectX-7: 127 per physical function, 2 PFs)."""
DEFAULT_VFS_PER_SERVER = 32
"""The articles' figure: lightweight containers with SR-IOV run up to 32 tasks per machine."""
MAX_NICS_PER_SERVER = 64
MAX_LINK_GBPS = 100_000
"""Per link, port or NIC and direction: 60× a 1.6 Tb/s port."""
MAX_LINK_LATENCY_NS = 10_000_000
"""10 ms, the latency of 2,000 km of fibre: no link inside a cluster comes close."""
MAX_DEVICE_LATENCY_NS = 1_000_000
"""1 ms of forwarding or switching (switches take 0.1–1 µs)."""
MAX_DEVICE_PORTS = 4_096
MAX_DEVICE_POWER_W = 100_000
"""A modular chassis switch draws up to about 30 kW."""
MAX_SUPERNODE_CARDS = 65_536
"""One scale-up domain (an NVL576 is 576; a TPU v5p pod 8,960)."""
MAX_CARD_TDP_W = 50_000
"""A wafer-scale engine's system draws about 23 kW; a GPU 1–2 kW."""
MAX_TFLOPS = 1_000_000
"""Dense TFLOP/s of one part, any precision (a B200: 4,500 FP8; a WSE-3: 125,000)."""
MAX_HBM_GIB = 100_000
MAX_HBM_TBPS = 100_000
"""Memory bandwidth (a B200: 8 TB/s; a WSE-3's on-chip SRAM: 21,000 TB/s)."""
MAX_SCALEUP_LINKS = 1_024
MAX_SCALEUP_GBYTES = 1_000_000
"""Aggregate scale-up bandwidth in GB/s (NVLink 5: 1,800)."""
MAX_SERVER_MEMORY_GIB = 65_536
"""Host memory of one server: 64 TiB (the largest shipping 8-socket servers hold 32 TB;
a DGX H100 has 2 TB)."""
MAX_NVME_TB = 10_000
"""Local NVMe of one server, TB: 10 PB (24 × 122.88 TB drives is about 3 PB)."""
MAX_NVME_GB_PER_S = 1_000
"""Local NVMe bandwidth of one server, GB/s (32 PCIe Gen6 drives at 28 GB/s: ~900)."""
MAX_STORAGE_TB = 1_000_000
"""Capacity of one file-system appliance, TB: 1 EB (a 2U all-flash box holds ~1 PB)."""
MAX_STORAGE_GB_PER_S = 10_000
"""Bandwidth of one file-system appliance, GB/s (an AI400X2: ~90)."""

_NETWORK = frozenset({L.INFINIBAND, L.ROCE})

COMPATIBLE_ENDPOINTS: dict[frozenset[str], frozenset[str]] = {
    frozenset({CARD_ENDPOINT}): frozenset({L.SCALE_UP}),
    frozenset({CARD_ENDPOINT, D.PCIE_SWITCH}): frozenset({L.PCIE, L.SCALE_UP}),
    frozenset({CARD_ENDPOINT, D.SMART_NIC}): frozenset({L.PCIE}),
    frozenset({D.PCIE_SWITCH}): frozenset({L.PCIE}),
    frozenset({D.PCIE_SWITCH, D.SMART_NIC}): frozenset({L.PCIE}),
    frozenset({D.SMART_NIC, D.LEAF}): _NETWORK,
    frozenset({D.SMART_NIC, D.CORE}): _NETWORK,
    frozenset({D.LEAF, D.SPINE}): _NETWORK,
    frozenset({D.SPINE, D.CORE}): _NETWORK,
    frozenset({D.LEAF, D.CORE}): _NETWORK,
    # A parallel file system's appliances sit on the (storage) switches.
    frozenset({D.STORAGE, D.LEAF}): _NETWORK,
    frozenset({D.STORAGE, D.SPINE}): _NETWORK,
    frozenset({D.STORAGE, D.CORE}): _NETWORK,
}

# The seeds' three-tier hybrid network: access = PCIe switches, aggregation =
# smart NICs, core = 400G RoCE switches (leaf/spine/core of the switched fabric).
DEVICE_TIER = {
    D.PCIE_SWITCH: "access",
    D.SMART_NIC: "aggregation",
    D.LEAF: "core",
    D.SPINE: "core",
    D.CORE: "core",
    D.STORAGE: "storage",
}


def allowed_link_kinds(end_a: str, end_b: str) -> frozenset[str]:
    """Link kinds that may join an ``end_a`` to an ``end_b`` (empty: none may)."""
    return COMPATIBLE_ENDPOINTS.get(frozenset({end_a, end_b}), frozenset())
