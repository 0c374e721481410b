"""Scenario kinds: pluggable, each a ``prepare`` (validate, up front) and a ``run``.

A kind turns the client's ``params`` (and an optional cluster) into
``inputs`` — plain JSON the simulation library accepts — in ``prepare``,
which runs in the web request: every error it raises is a 400 with the field
to blame, and nothing is queued. ``run`` happens in a Celery worker (or the
``run_scenario`` command), takes only ``inputs`` and returns a JSON-ready
result, reporting progress through a callback. Because ``run`` sees nothing
but ``inputs``, equal inputs give equal results: that is what makes the
result cache (``ScenarioRun.params_hash``) sound.

Adding a kind is one new module in this package: subclass :class:`ScenarioKind`
(``base.py``), set ``name``, describe each option in ``fields``
(:class:`FieldSpec`), implement ``prepare``/``run``/``rows``, decorate with
:func:`register`, and import the module below (the import registers it; the
order of the imports is the order ``GET /api/scenarios/kinds/`` lists). The API,
the command, the admin and the websocket pick it up from :data:`REGISTRY`.

Why ``fields`` (served by ``GET /api/scenarios/kinds/``, from which the
dashboard builds its form): ``options`` — the parameters ``prepare`` takes as
the kind's own — is derived from them, and the defaults, minimums and choices
``prepare`` enforces are read from the same specs (or from the same simulation
dataclass and constants), so the form cannot drift from what the API accepts
(``tests/scenarios/test_kinds_api.py`` checks it field by field). ``chart``
tells the UI which result rows to plot.

Parameters (flat: the topology's fields sit next to the kind's own)
    topology    ``{"family": "torus", "dims": [8, 8, 8]}`` /
                ``{"family": "ring", "nodes": 512}`` / a cluster description
                (``"supernodes"``, ``"network"``) — or nothing, with a cluster;
                options ``samples``, ``seed`` for sampled metrics.
    route       topology + ``src``, ``dst`` (card node numbers of a family; card
                ids or serials of the cluster) and ``by`` (``hops``/``latency``).
    failure     topology + the simulation's ``FailureSpec`` fields (``links``,
                ``link_pairs``, ``nodes``, ``random_links``, ``random_cards``,
                ``random_switches``, ``seed``, ``samples``); with a cluster also
                ``cards`` (ids or serials) and ``live`` (true: also fail the cards
                whose status is *failed* and the scale-up links that are *down*).
    collective  topology + ``CollectiveSpec`` fields (``op``, ``algorithm`` or
                ``auto``, ``ranks``, ``sizes``, ``compression``,
                ``overhead_ns``, ``reduce_gbps``, ``scale_up_efficiency``,
                ``scale_out_efficiency``).
    resilience  no topology: ``accelerator`` + ``cards`` (or the cluster's), ``days``,
                the model (``model`` or ``params_b``, ``tp``, ``pp``, ``zero``), the
                checkpoint policy (``checkpoint_interval_min``, ``checkpoint_mode``,
                ``storage_tiers``, ``pfs_gbps``, ``replicas``), recovery (``spares``,
                ``hot_spare``, ``elastic``, ``restart_s``, ``swap_s``), the failure mix
                (``failure_<class>`` multipliers), ``seed``.
    scheduling  ``policies`` (comma-separated), ``mode``, ``trace`` (an uploaded
                trace's id) or ``jobs`` (synthetic), ``target_load``, ``servers`` /
                ``gpus_per_server`` (without a cluster or a trace node list),
                ``allreduce_bytes``, ``seed``, ``from_live`` (with a cluster).
    training    ``model`` (catalogue slug or shape), ``accelerator`` (catalogue
                slug: hypothetical 8-card NVLink servers) or the cluster's own
                hardware (the run's cluster or ``cluster`` by name), ``cards``,
                and ``Execution``'s fields (``tp``, ``pp``, ``dp``,
                ``micro_batch``, ``global_batch``, ``recompute``,
                ``sequence_parallel``, ``precision``, ``zero`` …); no topology.
    training_search  the same hardware, ``cards``, ``global_batch``,
                ``objective`` (time/energy/cost), ``top``, ``limits``.
    whatif      a cluster (always forked): ``events``, ``horizon_h``, ``policy``,
                ``seed``, ``failure_rate``, ``checkpoint_interval_min``,
                ``restart_s``, ``default_duration_h``, ``spares``, ``compute_share``.
    capacity    no topology: ``site``, ``candidates``, ``workload``, ``prices``
                (objects), ``compare`` (older,newer), ``top`` (docs/capacity.md).

Sweeps: a kind whose run is many independent computations (training_search's
configurations, scheduling's policies, resilience's checkpoint intervals) also
defines ``parts``/``run_part``/``merge`` (``base.py``) and its big runs are split
across workers (``twin.scenarios.sweeps``); the merged result equals ``run``'s.

Errors name the field as a dotted path under ``params`` (``params.dims[0]``,
``params.supernodes[0].fabric.dims``, ``params.sizes[2]``, ``params.dst``);
a cluster the simulation cannot represent is an error on ``cluster``.
"""
from twin.scenarios.kinds.base import (
    ENGINE_VERSION,
    FIELD_TYPES,
    REGISTRY,
    TOPOLOGY_KEYS,
    FieldSpec,
    Progress,
    ScenarioInputError,
    ScenarioKind,
    describe_kinds,
    get_kind,
    jsonable,
    register,
)
from twin.scenarios.kinds.cards import card_lookup

# The kinds, in registration order (the order the API lists them and the form offers them).
# isort: off
from twin.scenarios.kinds.topology import TopologyKind
from twin.scenarios.kinds.route import ROUTE_BY, RouteKind
from twin.scenarios.kinds.failure import FailureKind
from twin.scenarios.kinds.collective import CollectiveKind
from twin.scenarios.kinds.resilience import ResilienceKind
from twin.scenarios.kinds.scheduling import SchedulingKind
from twin.scenarios.kinds.training import TrainingKind, TrainingSearchKind
from twin.scenarios.kinds.whatif import WhatIfKind
from twin.scenarios.kinds.capacity import CapacityKind
from twin.scenarios.kinds.facility import FacilityKind
# isort: on

__all__ = [
    "ENGINE_VERSION",
    "FIELD_TYPES",
    "REGISTRY",
    "ROUTE_BY",
    "TOPOLOGY_KEYS",
    "CapacityKind",
    "CollectiveKind",
    "FacilityKind",
    "FailureKind",
    "FieldSpec",
    "Progress",
    "ResilienceKind",
    "RouteKind",
    "ScenarioInputError",
    "ScenarioKind",
    "SchedulingKind",
    "TopologyKind",
    "TrainingKind",
    "TrainingSearchKind",
    "WhatIfKind",
    "card_lookup",
    "describe_kinds",
    "get_kind",
    "jsonable",
    "register",
]
