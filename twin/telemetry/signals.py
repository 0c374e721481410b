"""Hardware changes reach the live state: layouts are rebuilt, deleted clusters forgotten.

A cluster's telemetry agents and scrape targets count as inside it for the
deletion rule (``twin.core.deletion``): deleting a cluster that has them needs
the same explicit cascade as one with cards.

Any save or delete of a card, server, rack or network device bumps the
cluster's layout generation (``state.touch_layout``), now and again on commit
(so a process that read the old rows mid-transaction rebuilds). Bulk writes
(the builder's ``bulk_create``, raw deletes) send no signals; a new cluster
gets a new id anyway, and ``state.layout`` also re-probes the card count (in the
background, one process at a time: every 30 s, every 8 minutes at a million cards,
``layouts.probe_interval``). Deleting a cluster drops all its live state.
Self-healing's decisions close their alert and reach the Channels group
(``remediations``).
"""
from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from twin.core.deletion import register_contents
from twin.hardware.models import Card, Cluster, NetworkDevice, Rack, Server, SuperNode
from twin.jobs.healing import on_decided
from twin.telemetry.models import ScrapeTarget, TelemetryAgent
from twin.telemetry.remediations import on_remediation

__all__: list[str] = []

on_decided(on_remediation)
register_contents(Cluster, "telemetry_agents",
                  lambda cluster: TelemetryAgent.objects.filter(cluster=cluster))
register_contents(Cluster, "scrape_targets",
                  lambda cluster: ScrapeTarget.objects.filter(cluster=cluster))


def _touch(cluster_id: int | None) -> None:
    if not cluster_id:
        return
    from twin.telemetry import state

    try:
        state.touch_layout(cluster_id)
        transaction.on_commit(lambda: state.touch_layout(cluster_id))
    except Exception:  # noqa: BLE001 - inventory edits must work with Redis down
        import logging

        logging.getLogger(__name__).warning("could not mark the layout of cluster %s stale",
                                            cluster_id, exc_info=True)


def _cluster_of(instance: Any) -> int | None:
    if isinstance(instance, (Rack, NetworkDevice)):
        return instance.cluster_id
    if isinstance(instance, Server):
        return Rack.objects.filter(pk=instance.rack_id).values_list("cluster_id",
                                                                    flat=True).first()
    if isinstance(instance, Card):
        return SuperNode.objects.filter(pk=instance.supernode_id).values_list(
            "cluster_id", flat=True).first()
    return None


@receiver(post_save, sender=Card)
@receiver(post_save, sender=Server)
@receiver(post_save, sender=Rack)
@receiver(post_save, sender=NetworkDevice)
@receiver(post_delete, sender=Card)
@receiver(post_delete, sender=Server)
@receiver(post_delete, sender=Rack)
@receiver(post_delete, sender=NetworkDevice)
def hardware_changed(sender: Any, instance: Any, **kwargs: Any) -> None:
    _touch(_cluster_of(instance))


@receiver(post_delete, sender=Cluster)
def cluster_deleted(sender: Any, instance: Cluster, **kwargs: Any) -> None:
    from twin.telemetry import state

    cluster_id = instance.pk
    try:
        state.forget_cluster(cluster_id)
        transaction.on_commit(lambda: state.forget_cluster(cluster_id))
    except Exception:  # noqa: BLE001
        import logging

        logging.getLogger(__name__).warning("could not drop the live state of cluster %s",
                                            cluster_id, exc_info=True)
