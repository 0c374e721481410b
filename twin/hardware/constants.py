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
    "DEVICE_TIER",
    "allowed_link_kinds",
]

CARD_ENDPOINT = "card"
DEFAULT_RACK_BUDGET_W = 40_000
DEFAULT_PUE = {"liquid": 1.05, "air": 1.4}

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
}

# The seeds' three-tier hybrid network: access = PCIe switches, aggregation =
# smart NICs, core = 400G RoCE switches (leaf/spine/core of the switched fabric).
DEVICE_TIER = {
    D.PCIE_SWITCH: "access",
    D.SMART_NIC: "aggregation",
    D.LEAF: "core",
    D.SPINE: "core",
    D.CORE: "core",
}


def allowed_link_kinds(end_a: str, end_b: str) -> frozenset[str]:
    """Link kinds that may join an ``end_a`` to an ``end_b`` (empty: none may)."""
    return COMPATIBLE_ENDPOINTS.get(frozenset({end_a, end_b}), frozenset())
