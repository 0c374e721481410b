"""Delete a cluster with set-based SQL, in the caller's transaction."""
from __future__ import annotations

from django.db import models

from twin.hardware.builder.plan import BuildError

__all__ = ["delete_cluster"]


def delete_cluster(cluster_id: int) -> None:
    """Delete a cluster and everything in it with set-based SQL.

    ``Cluster.delete()`` would load every card into Python to cascade; at a
    million cards that takes minutes and gigabytes. Rows of other apps that
    point at this cluster's hardware are handled first through the ORM, per
    their ``on_delete``.
    """
    from twin.hardware.models import Card, Cluster, Link, NetworkDevice, Rack, Server, SuperNode

    scopes: list[tuple[type[models.Model], models.QuerySet]] = [
        (Link, Link.objects.filter(cluster_id=cluster_id)),
        (Card, Card.objects.filter(supernode__cluster_id=cluster_id)),
        (NetworkDevice, NetworkDevice.objects.filter(cluster_id=cluster_id)),
        (Server, Server.objects.filter(rack__cluster_id=cluster_id)),
        (Rack, Rack.objects.filter(cluster_id=cluster_id)),
        (SuperNode, SuperNode.objects.filter(cluster_id=cluster_id)),
    ]
    ours = {m for m, _ in scopes} | {Cluster}
    for model, qs in scopes:
        for rel in model._meta.related_objects:
            if rel.related_model in ours or not rel.field.concrete:
                continue
            related = rel.related_model._base_manager.filter(
                **{f"{rel.field.name}__in": qs.values("pk")})
            if rel.on_delete is models.SET_NULL:
                related.update(**{rel.field.name: None})
            elif rel.on_delete is models.PROTECT:
                if related.exists():
                    raise BuildError("name", f"{rel.related_model._meta.verbose_name_plural} "
                                             f"still refer to this cluster's "
                                             f"{model._meta.verbose_name_plural}; remove "
                                             f"them before replacing it.")
            elif rel.on_delete is not models.DO_NOTHING:
                related.delete()
    for _model, qs in scopes:
        qs._raw_delete(qs.db)
    Cluster.objects.filter(pk=cluster_id).delete()
