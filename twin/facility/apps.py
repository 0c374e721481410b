"""App config of the facility (site, power chain, cooling chain, racks' places in them)."""
from __future__ import annotations

from typing import Any

from django.apps import AppConfig

__all__ = ["FacilityConfig"]


def _build_facility(sender: Any, cluster: Any = None, progress: Any = None,
                    **kwargs: Any) -> None:
    """A preset cluster was built (``twin.hardware.signals.cluster_built``): size its
    facility in the same transaction, so a build leaves both or neither."""
    from twin.facility.builder import build_facility

    build_facility(cluster, progress=progress)


def _check_rack_draw(sender: Any, rack: Any = None, added_w: int = 0,
                     **kwargs: Any) -> list[str]:
    """A hardware write adds draw to a rack (``twin.hardware.signals.rack_draw_rising``):
    the rack's PDU, CDU, feed and the rest above it must still carry it."""
    from twin.facility.capacity import check_rack_draw

    return [o.message() for o in check_rack_draw(rack.pk, added_w)]


def _plant_pue(sender: Any, cluster_id: int = 0, **kwargs: Any) -> float | None:
    """The cluster summary asks (``twin.hardware.signals.plant_pue``): the PUE the plant
    model computes from its components at every rack's nameplate draw (steady state,
    the site's design day); None without a site or for a plant the engine refuses.
    Cached under the facility rows' and the inventory's versions (the draw)."""
    from twin.core.aggregates import cached
    from twin.facility.models import Site
    from twin.facility.plant import plant_for_cluster

    if not Site.objects.filter(cluster_id=cluster_id).exists():
        return None

    def compute() -> float | None:
        import math

        from simulation.facility.model import compile_model
        from simulation.facility.plant import PlantError

        try:
            plant = plant_for_cluster(cluster_id)
            draw = plant.racks.nameplate_w
            if draw is None or not len(draw) or float(draw.sum()) <= 0:
                return None
            pue = compile_model(plant).settle(draw.copy()).pue
        except PlantError:
            return None
        return float(pue) if math.isfinite(pue) else None

    return cached(("inventory", "facility"), f"plant-pue:{cluster_id}", compute)


class FacilityConfig(AppConfig):
    name = "twin.facility"
    label = "facility"
    verbose_name = "Facility"

    #: What the roles of ``twin.core.roles`` may do here: hardware admins edit the
    #: plant; operators and viewers read it.
    role_permissions = {
        "hardware admin": ("*",),
    }

    def ready(self) -> None:
        from twin.core.deletion import register_contents
        from twin.facility.models import Site
        from twin.hardware.models import Cluster
        from twin.hardware.signals import cluster_built, plant_pue, rack_draw_rising

        cluster_built.connect(_build_facility, dispatch_uid="twin.facility.build")
        rack_draw_rising.connect(_check_rack_draw, dispatch_uid="twin.facility.rack_draw")
        plant_pue.connect(_plant_pue, dispatch_uid="twin.facility.plant_pue")
        register_contents(Cluster, "facility_sites",
                          lambda cluster: Site.objects.filter(cluster=cluster))
