"""A cluster's own hardware as the training model sees it: one accelerator, its servers, fabrics.

The ``training`` and ``training_search`` kinds price a step on the cards the
twin actually holds. :func:`cluster_hardware` reads the figures the training
library's ``SystemSpec`` needs from one cluster with a handful of aggregate
queries (never a loop over cards) and reuses :func:`twin.scenarios.inputs.cluster_input`
for the fabrics, so the scale-up domain and the network are the ones every
other kind simulates:

* **Accelerator**: the catalogue row of the cluster's cards (one ``GROUP BY``
  over the cards, which also counts them). A cluster of several accelerator
  types is refused on ``cluster``: a data-parallel step is paced by its
  slowest card, which the model does not represent — give ``accelerator``.
* **Scale-up domain** (the cards a tensor-parallel group may span on the fast
  fabric): a whole torus / ring / full-mesh / PCIe-star supernode (512 cards
  in the seeds' 8×8×8 torus), or one server of an NVLink-switched supernode
  (``server_mesh``, 8 in a DGX H100). Its per-card bandwidth per direction is
  the fabric's ``card_gbps`` (the accelerator's NVLink / HCCS total, see
  ``inputs.py``) or, when the catalogue has none, the link Gb/s times the links
  a card has (2 per torus dimension, 2 on a ring, n−1 in a full mesh, 1 to a
  switch); the technology (``nvlink``, ``hccs``) is the fabric's.
* **Scale-out per card**: the smart NICs' Gb/s to the first switch tier
  (``NetworkSpec``: NIC → leaf link × NICs per server ÷ cards per server: 400
  Gb/s per GPU on a DGX, 2 × 400 / 8 = 100 on the seeds' servers) and the
  network's technology (``infiniband``, ``roce``). A cluster without network
  devices uses its servers' ``nic_count`` × ``nic_gbps``.
* **Static power**: servers' ``overhead_w`` (CPUs, memory, fans; averaged),
  network devices' ``power_w`` per card (NICs, PCIe and leaf/spine switches),
  and the PUE of the racks holding the supernodes (averaged).

Several supernode groups of different fabrics: the smallest scale-up domain
and the slowest figures are used, with a note.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Avg, Count, F, Sum

from simulation.topology import FabricSpec
from twin.hardware.catalogue import ACCELERATOR_FIELDS, accelerator_figures
from twin.scenarios.inputs import ConversionError, cluster_input

__all__ = ["ACCELERATOR_FIELDS", "ClusterHardware", "accelerator_figures", "cluster_hardware"]


@dataclass(frozen=True)
class ClusterHardware:
    """What the training model needs of one cluster (plain JSON via ``to_dict``)."""

    cluster_id: int
    cluster_name: str
    accelerator: dict[str, Any]
    cards: int
    cards_per_server: int
    scale_up_kind: str
    scale_up_domain: int
    scale_up_dims: tuple[int, ...]
    scale_up_gbps: float
    scale_up_technology: str
    scale_out_gbps: float
    scale_out_technology: str
    server_static_w: float
    network_w_per_card: float
    pue: float
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster_id": self.cluster_id, "cluster_name": self.cluster_name,
            "accelerator": dict(self.accelerator), "cards": self.cards,
            "cards_per_server": self.cards_per_server, "scale_up_kind": self.scale_up_kind,
            "scale_up_domain": self.scale_up_domain,
            "scale_up_dims": list(self.scale_up_dims), "scale_up_gbps": self.scale_up_gbps,
            "scale_up_technology": self.scale_up_technology,
            "scale_out_gbps": self.scale_out_gbps,
            "scale_out_technology": self.scale_out_technology,
            "server_static_w": self.server_static_w,
            "network_w_per_card": self.network_w_per_card, "pue": self.pue,
            "notes": list(self.notes),
        }


def _links_per_card(fabric: FabricSpec) -> int:
    """Scale-up links one card has in ``fabric`` (see the module docstring)."""
    if fabric.kind == "torus":
        return 2 * len(fabric.dims)
    if fabric.kind == "ring":
        return 2
    if fabric.kind == "full_mesh":
        return max(fabric.n_cards - 1, 1)
    if fabric.kind == "server_mesh":
        return max(fabric.dims[1] - 1, 1)
    return 1


def _scale_up(fabric: FabricSpec) -> tuple[int, float]:
    """(cards in one scale-up domain, per-card Gb/s per direction) of ``fabric``."""
    domain = fabric.dims[1] if fabric.kind == "server_mesh" else fabric.n_cards
    gbps = fabric.card_gbps or fabric.link_gbps * _links_per_card(fabric)
    if fabric.card_gbps and fabric.kind in ("torus", "ring"):
        gbps = min(fabric.card_gbps, fabric.link_gbps * _links_per_card(fabric))
    return domain, float(gbps)


def cluster_hardware(cluster: Any, *, where: str = "cluster") -> ClusterHardware:
    """The training figures of ``cluster`` (a model instance or its id).

    Raises :class:`ConversionError` on ``where`` when the cluster cannot be
    simulated (``cluster_input``'s reasons) or holds several accelerator types.
    """
    from twin.hardware.models import Card, NetworkDevice, Rack, Server

    info = cluster_input(cluster, where=where)
    notes = list(info.notes)
    types = list(Card.objects.filter(supernode__cluster_id=info.cluster_id).order_by()
                 .values(*(f"accelerator__{name}" for name in ACCELERATOR_FIELDS))
                 .annotate(n=Count("id")))
    if len(types) != 1:
        slugs = ", ".join(sorted(str(t["accelerator__slug"]) for t in types))
        raise ConversionError(where, (
            f"cluster {info.cluster_name!r} holds {len(types)} accelerator types ({slugs}); "
            f"the training model needs one: give 'accelerator' for a hypothetical system"))
    row = types[0]
    accelerator = {name: row[f"accelerator__{name}"] for name in ACCELERATOR_FIELDS}
    fabrics = [group.fabric for group in info.spec.supernodes]
    domains = [_scale_up(f) for f in fabrics]
    domain = min(d for d, _ in domains)
    smallest = fabrics[[d for d, _ in domains].index(domain)]
    up_gbps = min(g for _, g in domains)
    if len({f.kind for f in fabrics}) > 1:
        notes.append(f"supernodes of {len(fabrics)} fabrics: the smallest scale-up domain "
                     f"({domain} cards) and the slowest figures are used")
    servers = (Server.objects.filter(supernode__cluster_id=info.cluster_id).order_by()
               .aggregate(n=Count("id"), overhead=Avg("overhead_w"),
                          nic=Sum(F("nic_count") * F("nic_gbps")),
                          cards=Sum("cards_per_server")))
    cards_per_server = (round(servers["cards"] / servers["n"]) if servers["n"]
                        else domain)
    network = info.spec.network
    if network is not None:
        per_server = network.aggregation.nics_per_switch * network.core[0].link_gbps
        out_gbps = per_server / network.access.cards_per_switch
        out_tech = network.technology
    else:
        out_gbps = (servers["nic"] or 0) / info.n_cards
        out_tech = "generic"
        notes.append("no network devices: the scale-out Gb/s per card is the servers' NICs")
    net_w = (NetworkDevice.objects.filter(cluster_id=info.cluster_id).order_by()
             .aggregate(w=Sum("power_w"))["w"] or 0)
    pue = (Rack.objects.filter(cluster_id=info.cluster_id, supernode__isnull=False).order_by()
           .aggregate(pue=Avg("pue"))["pue"])
    return ClusterHardware(
        cluster_id=info.cluster_id, cluster_name=info.cluster_name, accelerator=accelerator,
        cards=info.n_cards, cards_per_server=int(cards_per_server),
        scale_up_kind=smallest.kind, scale_up_domain=int(domain),
        scale_up_dims=tuple(int(d) for d in smallest.dims), scale_up_gbps=up_gbps,
        scale_up_technology=smallest.technology, scale_out_gbps=float(out_gbps),
        scale_out_technology=out_tech, server_static_w=float(servers["overhead"] or 0.0),
        network_w_per_card=float(net_w) / info.n_cards, pue=float(pue or 1.0),
        notes=tuple(notes),
    )
