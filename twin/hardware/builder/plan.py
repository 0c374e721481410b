"""Validate and plan a build: which preset, how many supernodes, which budget.

Everything here runs before a row is written, so an API request or the CLI can
refuse a build with the field to blame (``BuildError``) without a transaction.
The plan itself (counts, rack packing) is ``twin.hardware.presets``'; this adds
the catalogue's TDP, the cluster name and the checks around them.
"""
from __future__ import annotations

from simulation.power import RackBudgetError
from twin.hardware.constants import MAX_RACK_BUDGET_W
from twin.hardware.presets import PRESETS, ClusterPlan, Preset

__all__ = ["BuildError", "catalogue_tdp", "check_build", "plan_build", "resolve"]


class BuildError(Exception):
    """A build that cannot run: ``field`` names the bad input, ``message`` says
    why and what to do instead (one line, for a CLI or an API error body)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message

    def __str__(self) -> str:
        return self.message


def _preset(name: str) -> Preset:
    preset = PRESETS.get(name) if isinstance(name, str) else None
    if preset is None:
        raise BuildError("preset", f"Unknown preset {name!r}; choose one of: "
                                   f"{', '.join(sorted(PRESETS))}.")
    return preset


def catalogue_tdp(preset: Preset) -> tuple[int, int]:
    """(accelerator id, TDP W) from the catalogue: the figure rack power uses."""
    from twin.hardware.models import AcceleratorType

    row = (AcceleratorType.objects.filter(slug=preset.supernode.accelerator)
           .values_list("pk", "tdp_w").first())
    if row is None:
        raise BuildError("preset", f"The catalogue has no accelerator "
                                   f"{preset.supernode.accelerator!r} that preset "
                                   f"{preset.name!r} uses; run 'python manage.py migrate' "
                                   f"(it loads the catalogue).")
    return int(row[0]), int(row[1])


def plan_build(
    preset: str,
    *,
    supernodes: int | None = None,
    rack_budget_w: int | None = None,
    card_tdp_w: int | None = None,
) -> ClusterPlan:
    """The plan of a build (counts, rack packing), computed without the database.

    ``card_tdp_w`` defaults to the preset's planning TDP; ``build_cluster``
    passes the catalogue's, which is what rack power is summed from. Raises
    ``BuildError`` for bad input, with the field to blame.
    """
    spec = _preset(preset)
    if supernodes is not None and (isinstance(supernodes, bool)
                                   or not isinstance(supernodes, int) or supernodes < 1):
        raise BuildError("supernodes", f"Supernodes must be a whole number ≥ 1, not "
                                       f"{supernodes!r}.")
    if rack_budget_w is not None:
        if isinstance(rack_budget_w, bool) or not isinstance(rack_budget_w, int):
            raise BuildError("rack_budget_w", f"The rack budget must be a whole number of "
                                              f"watts, not {rack_budget_w!r}.")
        if rack_budget_w > MAX_RACK_BUDGET_W:
            raise BuildError("rack_budget_w", f"The rack budget is at most "
                                              f"{MAX_RACK_BUDGET_W:,} W (1 MW), not "
                                              f"{rack_budget_w:,} W.")
        if rack_budget_w <= 0:
            server_w = spec.supernode.server_draw(card_tdp_w).total_w
            raise BuildError("rack_budget_w", f"The rack budget must be positive, not "
                                              f"{rack_budget_w:,} W; one {spec.name} server "
                                              f"needs {server_w:,} W (default budget "
                                              f"{spec.rack_budget_w:,} W).")
    try:
        return spec.plan(supernodes, rack_budget_w, card_tdp_w)
    except RackBudgetError as exc:
        raise BuildError("rack_budget_w", f"Preset {spec.name!r} does not fit the rack "
                                          f"budget: {exc.message}") from exc
    except ValueError as exc:
        raise BuildError("supernodes", f"{exc} (asked for {supernodes} supernodes).") from exc


def resolve(preset: str, name: str | None, supernodes: int | None,
            rack_budget_w: int | None, replace: bool) -> tuple[ClusterPlan, str, int]:
    """(plan with the catalogue's TDP, cluster name, accelerator id) of a build
    that may run; raises ``BuildError`` for the first input that stops it."""
    spec = _preset(preset)
    accelerator_id, tdp = catalogue_tdp(spec)
    plan = plan_build(preset, supernodes=supernodes, rack_budget_w=rack_budget_w,
                      card_tdp_w=tdp)
    cluster_name = (spec.default_name or spec.name) if name is None else name
    if not isinstance(cluster_name, str) or not cluster_name.strip():
        raise BuildError("name", "The cluster name must not be empty.")
    if len(cluster_name) > 100:
        raise BuildError("name", f"The cluster name is {len(cluster_name)} characters long; "
                                 f"keep it to 100.")
    from twin.hardware.models import Cluster

    if not replace and Cluster.objects.filter(name=cluster_name).exists():
        raise BuildError("name", f"A cluster named {cluster_name!r} exists; choose another "
                                 f"name, or pass --replace (API: \"replace\": true) to "
                                 f"rebuild it.")
    return plan, cluster_name, accelerator_id


def check_build(
    preset: str,
    *,
    name: str | None = None,
    supernodes: int | None = None,
    rack_budget_w: int | None = None,
    replace: bool = False,
) -> None:
    """Validate a build without writing anything; raises ``BuildError``."""
    resolve(preset, name, supernodes, rack_budget_w, replace)

