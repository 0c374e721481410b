"""The live cluster as the scheduler sees it: one node per server, what is taken.

:func:`live_capacity` reads a cluster with a few aggregate queries — servers, the
accelerator per server (one ``GROUP BY``), the unavailable cards and the empty
slots (rare rows), the allocations of its running jobs — never a loop over
cards, and returns the node records ``simulation.scheduling.Nodes.from_records``
takes (node *i* = the *i*-th server, GPU *g* = the card in slot *g*; a slot
without a card, a failed card or one in maintenance is a ``failed_gpus`` entry)
plus the running jobs' placements in the library's ``(node, card, milli)`` form
and the virtual functions in use per server.

The same records feed the ``scheduling`` scenario kind's ``from_live`` option, so
a simulation starts from exactly what the live placement sees.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count

from twin.jobs.choices import JobStateChoices
from twin.jobs.constants import UNAVAILABLE_CARD_STATES

__all__ = ["LiveCapacity", "live_capacity"]


@dataclass
class LiveCapacity:
    """What :func:`live_capacity` read (see the module doc)."""

    cluster_id: int
    records: list[dict[str, Any]]
    server_ids: list[int]
    #: running job id → [(node, slot, milli), …]
    allocations: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)
    #: server id → {job id: vf index}
    vfs: dict[int, dict[int, int]] = field(default_factory=dict)
    #: per node: its supernode's ``index`` in the cluster (-1: none)
    supernode_index: list[int] = field(default_factory=list)

    @property
    def node_of_server(self) -> dict[int, int]:
        return {server: i for i, server in enumerate(self.server_ids)}

    def used_milli(self) -> dict[tuple[int, int], int]:
        used: dict[tuple[int, int], int] = defaultdict(int)
        for pieces in self.allocations.values():
            for node, slot, milli in pieces:
                used[node, slot] += milli
        return used

    def free_vf(self, server_id: int, job_id: int | None = None) -> int | None:
        """The VF ``job_id`` uses on the server, or the lowest one free (None: all taken)."""
        taken = self.vfs.get(server_id, {})
        if job_id is not None and job_id in taken:
            return taken[job_id]
        node = self.node_of_server[server_id]
        limit = int(self.records[node]["vf_limit"])
        used = set(taken.values())
        return next((i for i in range(limit) if i not in used), None)


def live_capacity(cluster_id: int) -> LiveCapacity:
    """Read the cluster's servers, unavailable cards and running allocations."""
    from twin.hardware.models import Card, Server
    from twin.jobs.models import Allocation

    servers = list(Server.objects.filter(rack__cluster_id=cluster_id)
                   .order_by("supernode__index", "id")
                   .values_list("id", "name", "rack_id", "supernode_id", "supernode__index",
                                "vf_limit", "cards_per_server"))
    node_of = {row[0]: i for i, row in enumerate(servers)}
    cards = Card.objects.filter(server__rack__cluster_id=cluster_id).order_by()
    model: dict[int, tuple[int, str]] = {}
    count: dict[int, int] = defaultdict(int)
    for server_id, slug, n in (cards.values_list("server_id", "accelerator__slug")
                               .annotate(n=Count("id"))):
        count[server_id] += n
        if server_id not in model or n > model[server_id][0]:
            model[server_id] = (n, slug)
    failed: dict[int, set[int]] = defaultdict(set)
    for server_id, slot in cards.filter(status__in=UNAVAILABLE_CARD_STATES).values_list(
            "server_id", "slot"):
        failed[server_id].add(slot)
    partial = [sid for sid, _, _, _, _, _, cps in servers if count.get(sid, 0) < cps]
    if partial:
        present: dict[int, set[int]] = defaultdict(set)
        for server_id, slot in cards.filter(server_id__in=partial).values_list("server_id",
                                                                               "slot"):
            present[server_id].add(slot)
        for sid in partial:
            cps = servers[node_of[sid]][6]
            failed[sid] |= set(range(cps)) - present[sid]
    records = [{
        "name": name, "gpus": int(cps), "gpu_model": model.get(sid, (0, ""))[1],
        "server": int(sid), "rack": int(rack or 0), "supernode": int(sn or 0),
        "vf_limit": int(vf), "failed_gpus": sorted(s for s in failed.get(sid, ()) if s < cps),
    } for sid, name, rack, sn, _, vf, cps in servers]
    live = LiveCapacity(cluster_id, records, [row[0] for row in servers],
                        supernode_index=[-1 if row[4] is None else int(row[4])
                                         for row in servers])
    rows = (Allocation.objects.filter(job__cluster_id=cluster_id,
                                      job__state=JobStateChoices.RUNNING)
            .order_by("job_id", "card_id")
            .values_list("job_id", "card__server_id", "card__slot", "share_milli", "vf_index"))
    for job_id, server_id, slot, milli, vf in rows:
        node = node_of.get(server_id)
        if node is None:
            continue
        live.allocations.setdefault(job_id, []).append((node, int(slot), int(milli)))
        live.vfs.setdefault(server_id, {})[job_id] = int(vf)
    return live
