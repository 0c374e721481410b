"""The facility's models, one module per domain: ``sites`` (a site per cluster),
``chain`` (what power and cooling elements share: site, key, parent, units,
redundancy, the rating rule on write), ``power``, ``cooling``, ``racks`` (each
hardware rack's place in both chains and its class), ``capping`` (live capping's
policy and audit), ``history`` (the plant's minute rows), ``redfish`` (where the poller
reads measured readings)."""
from twin.facility.models.capping import CapEvent, CappingPolicy
from twin.facility.models.chain import RatedWrite
from twin.facility.models.cooling import CoolingElement
from twin.facility.models.history import PlantMinute
from twin.facility.models.power import PowerElement
from twin.facility.models.racks import RackFacility
from twin.facility.models.redfish import RedfishBinding, RedfishSource
from twin.facility.models.sites import Site

__all__ = [
    "CapEvent",
    "CappingPolicy",
    "CoolingElement",
    "PlantMinute",
    "PowerElement",
    "RackFacility",
    "RatedWrite",
    "RedfishBinding",
    "RedfishSource",
    "Site",
]
