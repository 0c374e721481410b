"""Django admin for editing the hardware model.

One module per domain, like ``models/``: ``clusters`` (catalogue, clusters,
supernodes, builds), ``racks`` (racks, servers, the power budget), ``cards``,
``network`` (devices, links), ``grants`` (who sees which cluster), ``tokens`` (named
API tokens). The machinery
every app's admin shares is in ``twin.core.admin`` (the ``TwinModelAdmin`` base
class that applies the API's filtersets, badges, a paginator that stays cheap at
a million rows); hardware's own: ``power`` (the rack budget rule across inline
formsets, and the "Allow over budget" checkbox) and ``actions`` (bulk status and
budget).
"""
from twin.hardware.admin.cards import CardAdmin
from twin.hardware.admin.clusters import (
    AcceleratorTypeAdmin,
    ClusterAdmin,
    ClusterBuildAdmin,
    SuperNodeAdmin,
)
from twin.hardware.admin.grants import ClusterGrantAdmin
from twin.hardware.admin.network import LinkAdmin, NetworkDeviceAdmin
from twin.hardware.admin.racks import RackAdmin, ServerAdmin
from twin.hardware.admin.tokens import ApiTokenAdmin

__all__ = [
    "AcceleratorTypeAdmin",
    "ApiTokenAdmin",
    "CardAdmin",
    "ClusterAdmin",
    "ClusterBuildAdmin",
    "ClusterGrantAdmin",
    "LinkAdmin",
    "NetworkDeviceAdmin",
    "RackAdmin",
    "ServerAdmin",
    "SuperNodeAdmin",
]
