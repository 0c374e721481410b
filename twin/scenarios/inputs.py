"""The cluster model → the simulation's ``ClusterSpec``: moved to
:mod:`twin.hardware.topology` so the jobs app (a layer below the scenarios) prices
placements with the same conversion; re-exported here for the scenario kinds."""
from twin.hardware.topology import (
    CORE_KINDS,
    SCALE_UP_TECHNOLOGY,
    ClusterInput,
    ConversionError,
    ScaleUp,
    card_node,
    cluster_input,
    fabric_spec,
)

__all__ = [
    "CORE_KINDS",
    "SCALE_UP_TECHNOLOGY",
    "ClusterInput",
    "ConversionError",
    "ScaleUp",
    "card_node",
    "cluster_input",
    "fabric_spec",
]
