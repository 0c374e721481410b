"""Scenario kinds: pluggable, each a ``prepare`` (validate, up front) and a ``run``.

A kind turns the client's ``params`` (and an optional cluster) into
``inputs`` — plain JSON the simulation library accepts — in ``prepare``,
which runs in the web request: every error it raises is a 400 with the field
to blame, and nothing is queued. ``run`` happens in a Celery worker (or the
``run_scenario`` command), takes only ``inputs`` and returns a JSON-ready
result, reporting progress through a callback. Because ``run`` sees nothing
but ``inputs``, equal inputs give equal results: that is what makes the
result cache (``ScenarioRun.params_hash``) sound.

Adding a kind: subclass :class:`ScenarioKind`, set ``name``, describe each
option in ``fields`` (:class:`FieldSpec`), implement ``prepare``/``run``/``rows``,
decorate with :func:`register`. The API, the command, the admin and the
websocket pick it up from :data:`REGISTRY`.

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
                ``overhead_ns``, ``reduce_gbps``).

Errors name the field as a dotted path under ``params`` (``params.dims[0]``,
``params.supernodes[0].fabric.dims``, ``params.sizes[2]``, ``params.dst``);
a cluster the simulation cannot represent is an error on ``cluster``.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import MISSING, asdict, dataclass, is_dataclass, replace
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from simulation.collectives import (
    ALGORITHMS,
    OPS,
    CollectiveSpec,
    collective_curve,
    fabric_from_topology,
)
from simulation.collectives.models import MAX_SIZE, CollectivePoint
from simulation.topology import (
    ClusterSpec,
    FailureSpec,
    FamilySpec,
    Topology,
    TopologyError,
    analyze,
    from_spec,
    route,
    spec_from_dict,
)
from simulation.topology.metrics import DEFAULT_SAMPLES
from twin.hardware.choices import CardStatusChoices, LinkKindChoices, LinkStatusChoices
from twin.scenarios.inputs import ClusterInput, ConversionError, card_node, cluster_input

__all__ = [
    "ENGINE_VERSION",
    "FIELD_TYPES",
    "REGISTRY",
    "ROUTE_BY",
    "CollectiveKind",
    "FailureKind",
    "FieldSpec",
    "Progress",
    "RouteKind",
    "ScenarioInputError",
    "ScenarioKind",
    "TopologyKind",
    "card_lookup",
    "describe_kinds",
    "get_kind",
    "jsonable",
    "register",
]

ENGINE_VERSION = "2"
"""Bump when a kind's results change for the same inputs: it is part of the
cache key, so older cached results stop matching."""

Progress = Callable[[float, str], None]

ROUTE_BY = ("hops", "latency")
"""What a route may minimise (the simulation's ``route(by=…)``)."""

FIELD_TYPES = ("choice", "integer", "number", "boolean", "string", "integer_list", "card",
               "card_list", "integer_pairs")
"""Input types a form needs: ``card`` is a card id or serial of the cluster (a
card number with a topology family instead), ``integer_pairs`` ``[[a, b], …]``."""

TOPOLOGY_KEYS = frozenset({
    "family", "nodes", "dims", "k", "tiers", "link_gbps", "link_ns", "switch_ns",
    "name", "supernodes", "network",
})


class ScenarioInputError(Exception):
    """Bad scenario input: ``errors`` maps a field path to its messages."""

    def __init__(self, errors: Mapping[str, list[str]]) -> None:
        self.errors = {key: list(value) for key, value in errors.items()}
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in self.errors.items()))

    @classmethod
    def one(cls, field: str, message: str) -> ScenarioInputError:
        return cls({field: [message]})

    def line(self) -> str:
        """One readable line (for the command line)."""
        return str(self)


def _param_error(exc: TopologyError) -> ScenarioInputError:
    field = exc.field if exc.field.startswith("params") else f"params.{exc.field}"
    return ScenarioInputError.one(field, exc.message)


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON: numpy scalars and arrays, dataclasses, fractions
    and tuples converted; NaN and ±∞ (not valid JSON) become None."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [jsonable(v) for v in value.tolist()]
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, Fraction):
        return f"{value.numerator}/{value.denominator}"
    if is_dataclass(value) and not isinstance(value, type):
        return jsonable(asdict(value))
    if value is None or isinstance(value, str):
        return value
    return str(value)


def _split(params: Mapping[str, Any], options: frozenset[str]) -> tuple[dict, dict]:
    """(topology part, the kind's own part) of flat ``params``."""
    if not isinstance(params, Mapping):
        raise ScenarioInputError.one("params", "must be a JSON object")
    mine = {k: v for k, v in params.items() if k in options}
    rest = {k: v for k, v in params.items() if k not in options}
    return rest, mine


@dataclass(frozen=True)
class FieldSpec:
    """One option of a kind, as a form needs it (``GET /api/scenarios/kinds/``).

    ``min``/``max`` are inclusive bounds (of each element for a list);
    ``needs_cluster``: only with a cluster; ``advanced``: simulation node or
    link numbers, which a form may hide.
    """

    name: str
    type: str
    label: str
    help: str = ""
    required: bool = False
    default: Any = None
    choices: tuple[str, ...] | None = None
    min: float | None = None
    max: float | None = None
    needs_cluster: bool = False
    advanced: bool = False

    def __post_init__(self) -> None:
        if self.type not in FIELD_TYPES:
            raise ValueError(f"field {self.name}: unknown type {self.type!r}")
        if (self.type == "choice") != (self.choices is not None):
            raise ValueError(f"field {self.name}: choices go with type 'choice' only")

    def to_dict(self) -> dict[str, Any]:
        return jsonable(asdict(self))


def _default(cls: type, name: str) -> Any:
    """The default of dataclass field ``name`` (None when it has none)."""
    f = cls.__dataclass_fields__[name]  # type: ignore[attr-defined]
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return None


def _required(cls: type, name: str) -> bool:
    f = cls.__dataclass_fields__[name]  # type: ignore[attr-defined]
    return f.default is MISSING and f.default_factory is MISSING


def _int_option(data: Mapping[str, Any], spec: FieldSpec) -> int:
    """The integer option ``spec`` from ``data``, its default if absent."""
    value = data.get(spec.name, spec.default)
    minimum = int(spec.min or 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ScenarioInputError.one(f"params.{spec.name}",
                                     f"an integer ≥ {minimum}, got {value!r}")
    return value


class ScenarioKind:
    """Base of every kind (see the module docstring)."""

    name: ClassVar[str] = ""
    label: ClassVar[str] = ""
    description: ClassVar[str] = ""
    fields: ClassVar[tuple[FieldSpec, ...]] = ()
    chart: ClassVar[dict[str, Any] | None] = None
    """``{"series": <result key of the rows>, "x": .., "y": .., "log_x": ..}`` or None."""

    @property
    def options(self) -> frozenset[str]:
        """Names of this kind's own parameters (the rest is the topology)."""
        return frozenset(f.name for f in self.fields)

    def field(self, name: str) -> FieldSpec:
        return next(f for f in self.fields if f.name == name)

    def describe(self) -> dict[str, Any]:
        """What ``GET /api/scenarios/kinds/`` says about this kind."""
        return {"name": self.name, "label": self.label, "description": self.description,
                "fields": [f.to_dict() for f in self.fields],
                "chart": dict(self.chart) if self.chart else None}

    # ---------------------------------------------------------------- helpers
    def split(self, params: Mapping[str, Any]) -> tuple[dict, dict]:
        """(topology part, this kind's own part) of flat ``params``."""
        return _split(params, self.options)

    def topology(self, params: Mapping[str, Any],
                 cluster: Any | None) -> tuple[dict[str, Any], FamilySpec | ClusterSpec,
                                                ClusterInput | None]:
        """Validate the topology part: (inputs, spec, cluster input or None)."""
        rest, _ = self.split(params)
        unknown = [k for k in rest if k not in TOPOLOGY_KEYS]
        if unknown:
            allowed = sorted(self.options | (set() if cluster is not None else TOPOLOGY_KEYS))
            raise ScenarioInputError.one(
                f"params.{unknown[0]}",
                f"unknown field for a {self.name} scenario (allowed: {', '.join(allowed)})")
        if cluster is not None:
            if rest:
                key = sorted(rest)[0]
                raise ScenarioInputError.one(
                    f"params.{key}", f"the topology comes from cluster {cluster.name!r}; "
                                     f"give either a cluster or {key}, not both")
            try:
                info = cluster_input(cluster)
            except ConversionError as exc:
                raise ScenarioInputError.one(exc.field, exc.message) from exc
            inputs = {
                "topology": info.spec.to_dict(),
                "cluster": {"id": info.cluster_id, "name": info.cluster_name,
                            "supernode_indices": list(info.supernode_indices),
                            "offsets": list(info.offsets), "notes": list(info.notes)},
            }
            return inputs, info.spec, info
        try:
            spec = spec_from_dict(rest)
        except TopologyError as exc:
            raise _param_error(exc) from exc
        return {"topology": spec.to_dict()}, spec, None

    @staticmethod
    def build(inputs: Mapping[str, Any]) -> tuple[FamilySpec | ClusterSpec, Topology]:
        spec = spec_from_dict(inputs["topology"])
        return spec, from_spec(spec)

    # ------------------------------------------------------------- interface
    def prepare(self, params: Mapping[str, Any], cluster: Any | None) -> dict[str, Any]:
        """Validate; return the inputs ``run`` needs (JSON). Raises ScenarioInputError."""
        raise NotImplementedError

    def run(self, inputs: Mapping[str, Any], progress: Progress) -> dict[str, Any]:
        """Compute the result (JSON-ready) from ``inputs``."""
        raise NotImplementedError

    def rows(self, result: Mapping[str, Any]) -> list[tuple[str, str]]:
        """(label, value) rows the command prints as a table."""
        return [(k, str(v)) for k, v in result.items() if not isinstance(v, dict | list)]


REGISTRY: dict[str, ScenarioKind] = {}


def register(cls: type[ScenarioKind]) -> type[ScenarioKind]:
    """Class decorator: make a kind available to the API, command and admin."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    names = [f.name for f in cls.fields]
    if len(set(names)) != len(names):
        raise ValueError(f"{cls.__name__} describes a field twice: {names}")
    REGISTRY[cls.name] = cls()
    return cls


def describe_kinds() -> list[dict[str, Any]]:
    """Every kind with its form fields and chart hint, in registration order."""
    return [kind.describe() for kind in REGISTRY.values()]


def get_kind(name: Any) -> ScenarioKind:
    """The kind called ``name``, or a ScenarioInputError on ``kind``."""
    kind = REGISTRY.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ScenarioInputError.one(
            "kind", f"unknown kind {name!r} (choose from {', '.join(sorted(REGISTRY))})")
    return kind


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.{digits}g}" if abs(value) < 10 ** digits else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


# ---------------------------------------------------------------- topology
@register
class TopologyKind(ScenarioKind):
    name = "topology"
    label = "Topology metrics"
    description = "Hop histogram, average and diameter, latency, bisection, latency specs."
    fields = (
        FieldSpec("samples", "integer", "Samples", "Source cards sampled when a metric "
                  "cannot be computed exactly.", default=DEFAULT_SAMPLES, min=2),
        FieldSpec("seed", "integer", "Seed", "Random seed of the sampling.", default=0, min=0),
    )

    def prepare(self, params: Mapping[str, Any], cluster: Any | None) -> dict[str, Any]:
        inputs, _, _ = self.topology(params, cluster)
        _, mine = self.split(params)
        inputs["options"] = {f.name: _int_option(mine, f) for f in self.fields}
        return inputs

    def run(self, inputs: Mapping[str, Any], progress: Progress) -> dict[str, Any]:
        progress(0.05, "building the topology")
        spec, topo = self.build(inputs)
        progress(0.3, f"hops, latency and bisection of {topo.n_endpoints:,} cards")
        options = inputs.get("options", {})
        result = analyze(topo, spec=spec, samples=options.get("samples", DEFAULT_SAMPLES),
                         seed=options.get("seed", 0))
        if "cluster" in inputs:
            result["cluster"] = inputs["cluster"]
        return jsonable(result)

    def rows(self, result: Mapping[str, Any]) -> list[tuple[str, str]]:
        lat = result.get("latency_ns") or {}
        out = [
            ("topology", f"{result.get('name')} ({result.get('family')})"),
            ("cards / nodes / links", f"{_fmt(result.get('cards'))} / "
                                      f"{_fmt(result.get('nodes'))} / {_fmt(result.get('links'))}"),
            ("avg_hops", f"{_fmt(result.get('avg_hops'), 8)}"
                         + (f" (= {result['avg_hops_exact']})" if result.get("avg_hops_exact")
                            else "")),
            ("diameter_hops", _fmt(result.get("diameter_hops"))),
            ("latency_ns avg / p99 / max", f"{_fmt(lat.get('average'))} / {_fmt(lat.get('p99'))}"
                                           f" / {_fmt(lat.get('max'))}"),
            ("bisection_links", _fmt(result.get("bisection_links"))),
            ("bisection_gbps", _fmt(result.get("bisection_gbps"))),
            ("method", f"{result.get('method')} (exact: {result.get('exact')})"),
        ]
        fabric = result.get("fabric")
        if fabric:
            out.append(("one supernode fabric: avg / diameter",
                        f"{fabric.get('avg_hops_exact')} / {fabric.get('diameter_hops')}"))
        for req in result.get("requirements") or []:
            if not req.get("applicable", True):
                continue
            verdict = "pass" if req.get("passed") else "FAIL"
            out.append((f"requirement {req.get('name', '')}", f"{verdict} "
                        f"(worst {_fmt(req.get('worst_ns'))} ns)"))
        return out


# ------------------------------------------------------------------ cards
def card_lookup(info: ClusterInput, value: Any, field: str) -> dict[str, Any]:
    """A card of the cluster by id (int) or serial (str) → its node and labels.

    Shared by the route and failure kinds and the synchronous route endpoint
    (``twin.api.route``); ``field`` is the key of the error.
    """
    from twin.hardware.models import Card

    cards = Card.objects.filter(supernode__cluster_id=info.cluster_id)
    if isinstance(value, bool) or not isinstance(value, int | str) or value == "":
        raise ScenarioInputError.one(field, f"a card id (integer) or serial (string), "
                                            f"got {value!r}")
    row = (cards.filter(pk=value) if isinstance(value, int) else cards.filter(serial=value)
           ).values("pk", "serial", "index", "x", "y", "z", "supernode__index",
                    "supernode__fabric", "supernode__dim_x", "supernode__dim_y",
                    "supernode__dim_z").first()
    if row is None:
        what = f"id {value}" if isinstance(value, int) else f"serial {value!r}"
        raise ScenarioInputError.one(field, f"no card with {what} in cluster "
                                            f"{info.cluster_name!r}")
    node = card_node(info, row["supernode__index"], row["supernode__fabric"], row["index"],
                     (row["supernode__dim_x"], row["supernode__dim_y"], row["supernode__dim_z"]),
                     (row["x"], row["y"], row["z"]))
    return {"node": node, "id": row["pk"], "serial": row["serial"],
            "supernode": row["supernode__index"], "index": row["index"]}


# ------------------------------------------------------------------ route
@register
class RouteKind(ScenarioKind):
    name = "route"
    label = "Route between two cards"
    description = "Fewest-hop or lowest-latency path with its hops, latency and bottleneck."
    fields = (
        FieldSpec("src", "card", "From", "Card id or serial (a card number without a "
                  "cluster).", required=True),
        FieldSpec("dst", "card", "To", "Card id or serial (a card number without a "
                  "cluster).", required=True),
        FieldSpec("by", "choice", "Minimise", "Fewest hops or lowest latency.",
                  default=ROUTE_BY[0], choices=ROUTE_BY),
    )

    def prepare(self, params: Mapping[str, Any], cluster: Any | None) -> dict[str, Any]:
        inputs, spec, info = self.topology(params, cluster)
        _, mine = self.split(params)
        by = mine.get("by", self.field("by").default)
        if by not in ROUTE_BY:
            raise ScenarioInputError.one("params.by", f"'hops' or 'latency', got {by!r}")
        ends: dict[str, Any] = {}
        for key in ("src", "dst"):
            field = f"params.{key}"
            if key not in mine:
                raise ScenarioInputError.one(field, "this field is required")
            value = mine[key]
            if info is not None:
                card = card_lookup(info, value, field)
                ends[key] = card["node"]
                inputs.setdefault("cards", {})[key] = card
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise ScenarioInputError.one(field, f"a card number (integer), got {value!r}")
            if not 0 <= value < spec.n_cards:
                raise ScenarioInputError.one(
                    field, f"card {value} does not exist (valid: 0…{spec.n_cards - 1})")
            ends[key] = value
        inputs.update(src=ends["src"], dst=ends["dst"], by=by)
        return inputs

    def run(self, inputs: Mapping[str, Any], progress: Progress) -> dict[str, Any]:
        progress(0.1, "building the topology")
        _, topo = self.build(inputs)
        progress(0.5, f"searching a path by {inputs['by']}")
        result = route(topo, int(inputs["src"]), int(inputs["dst"]), by=inputs["by"]).to_dict()
        if "cards" in inputs:
            result["cards"] = inputs["cards"]
        if "cluster" in inputs:
            result["cluster"] = inputs["cluster"]
        return jsonable(result)

    def rows(self, result: Mapping[str, Any]) -> list[tuple[str, str]]:
        cards = result.get("cards") or {}
        ends = {k: cards[k]["serial"] if k in cards else result.get(k) for k in ("src", "dst")}
        out = [
            ("from → to", f"{ends['src']} → {ends['dst']}"),
            ("by", str(result.get("by"))),
            ("reachable", str(result.get("reachable"))),
            ("hops", _fmt(result.get("hops"))),
            ("latency_ns", _fmt(result.get("latency_ns"))),
            ("bottleneck_gbps", _fmt(result.get("bottleneck_gbps"))),
        ]
        labels = result.get("labels") or []
        if labels:
            shown = labels if len(labels) <= 16 else [*labels[:8], "…", *labels[-7:]]
            out.append(("path", " → ".join(shown)))
        return out


# ---------------------------------------------------------------- failure
@register
class FailureKind(ScenarioKind):
    name = "failure"
    label = "Failure impact"
    description = "Remove links, cards or switches; connectivity and what got worse."
    fields = (
        *(FieldSpec(name, kind, label, text, default=jsonable(_default(FailureSpec, name)),
                    min=low, advanced=advanced)
          for name, (kind, label, text, low, advanced) in {
              "links": ("integer_list", "Links", "Simulation link numbers to remove.", 0, True),
              "link_pairs": ("integer_pairs", "Link pairs", "Links to remove, each as the "
                             "[a, b] simulation node numbers of its ends.", 0, True),
              "nodes": ("integer_list", "Nodes", "Simulation node numbers (cards first) to "
                        "remove.", 0, True),
              "random_links": ("integer", "Random links", "How many more links to remove "
                               "at random.", 0, False),
              "random_cards": ("integer", "Random cards", "How many more cards to remove at "
                               "random.", 0, False),
              "random_switches": ("integer", "Random switches", "How many more switches "
                                  "(PCIe, NIC, leaf, spine, core) to remove at random.", 0,
                                  False),
              "seed": ("integer", "Seed", "Random seed of the picks and the sampling.", 0,
                       False),
              "samples": ("integer", "Samples", "Source cards sampled when a metric cannot "
                          "be computed exactly.", 2, False),
          }.items()),
        FieldSpec("cards", "card_list", "Cards", "Cards to fail, by id or serial.",
                  default=[], needs_cluster=True),
        FieldSpec("live", "boolean", "Live failures", "Also fail the cards whose status is "
                  "failed and the scale-up links that are down.", default=False,
                  needs_cluster=True),
    )

    def split(self, params: Mapping[str, Any]) -> tuple[dict, dict]:
        """``nodes`` is the node list to remove when it is a list, and a ring's
        (full mesh's, star's) size when it is a number."""
        rest, mine = _split(params, self.options)
        if "nodes" in mine and not isinstance(mine["nodes"], list | tuple):
            rest["nodes"] = mine.pop("nodes")
        return rest, mine

    def prepare(self, params: Mapping[str, Any], cluster: Any | None) -> dict[str, Any]:
        inputs, spec, info = self.topology(params, cluster)
        _, mine = self.split(params)
        cards = mine.pop("cards", None)
        live = mine.pop("live", False)
        try:
            failure = FailureSpec.from_dict(dict(mine), "params.")
        except TopologyError as exc:
            raise _param_error(exc) from exc
        named: list[dict[str, Any]] = []
        if cards is not None or live:
            if info is None:
                key = "cards" if cards is not None else "live"
                raise ScenarioInputError.one(f"params.{key}", "needs a cluster (give "
                                                              "\"cluster\": <id>)")
            if not isinstance(live, bool):
                raise ScenarioInputError.one("params.live", f"true or false, got {live!r}")
            if cards is not None and not isinstance(cards, list):
                raise ScenarioInputError.one("params.cards", "a list of card ids or serials")
            named = [card_lookup(info, c, f"params.cards[{i}]")
                     for i, c in enumerate(cards or [])]
        extra_nodes = [c["node"] for c in named]
        extra_pairs: list[tuple[int, int]] = []
        if live and info is not None:
            live_nodes, extra_pairs = _live_failures(info)
            extra_nodes += live_nodes
        failure = replace(failure, nodes=tuple(failure.nodes) + tuple(extra_nodes),
                          link_pairs=tuple(failure.link_pairs) + tuple(extra_pairs))
        _check_failure(from_spec(spec), failure)
        inputs["failure"] = jsonable(asdict(failure))
        if named:
            inputs["cards"] = named
        if live:
            inputs["live"] = {"cards": len(extra_nodes) - len(named),
                              "links": len(extra_pairs)}
        return inputs

    def run(self, inputs: Mapping[str, Any], progress: Progress) -> dict[str, Any]:
        progress(0.05, "building the topology")
        _, topo = self.build(inputs)
        raw = inputs["failure"]
        failure = FailureSpec(
            links=tuple(raw["links"]), link_pairs=tuple(tuple(p) for p in raw["link_pairs"]),
            nodes=tuple(raw["nodes"]), random_links=raw["random_links"],
            random_cards=raw["random_cards"], random_switches=raw["random_switches"],
            seed=raw["seed"], samples=raw["samples"])
        progress(0.2, "removing and re-measuring")
        result = failure.run(topo).to_dict()
        for key in ("cards", "live", "cluster"):
            if key in inputs:
                result[key] = inputs[key]
        return jsonable(result)

    def rows(self, result: Mapping[str, Any]) -> list[tuple[str, str]]:
        removed = result.get("removed_nodes") or {}
        return [
            ("removed links", _fmt(result.get("removed_links"))),
            ("removed nodes", ", ".join(f"{v} {k}" for k, v in removed.items()) or "—"),
            ("surviving cards", _fmt(result.get("surviving_endpoints"))),
            ("connected", str(result.get("connected"))),
            ("partitions (largest)", f"{_fmt(result.get('partitions'))} "
                                     f"({_fmt(result.get('largest_partition'))})"),
            ("pairs disconnected", _fmt(result.get("pairs_disconnected"))),
            ("avg hops before → after", f"{_fmt(result.get('average_before'), 6)} → "
                                        f"{_fmt(result.get('average_after'), 6)}"),
            ("diameter before → after", f"{_fmt(result.get('diameter_before'))} → "
                                        f"{_fmt(result.get('diameter_after'))}"),
            ("pairs with a longer path", _fmt(result.get("pairs_longer"))),
            ("cards that lost bandwidth", _fmt(result.get("endpoints_degraded"))),
            ("method", f"{result.get('method')} (exact: {result.get('exact')})"),
        ]


def _live_failures(info: ClusterInput) -> tuple[list[int], list[tuple[int, int]]]:
    """Nodes of the failed cards and node pairs of the down scale-up links (two queries)."""
    from twin.hardware.models import Card, Link

    fields = ("index", "x", "y", "z", "supernode__index", "supernode__fabric",
              "supernode__dim_x", "supernode__dim_y", "supernode__dim_z")

    def node(row: Mapping[str, Any], prefix: str = "") -> int:
        g = {k: row[prefix + k] for k in fields}
        return card_node(info, g["supernode__index"], g["supernode__fabric"], g["index"],
                         (g["supernode__dim_x"], g["supernode__dim_y"], g["supernode__dim_z"]),
                         (g["x"], g["y"], g["z"]))

    failed = Card.objects.filter(supernode__cluster_id=info.cluster_id,
                                 status=CardStatusChoices.FAILED).values(*fields)
    nodes = [node(row) for row in failed]
    down = Link.objects.filter(cluster_id=info.cluster_id, status=LinkStatusChoices.DOWN,
                               kind=LinkKindChoices.SCALE_UP, a_card__isnull=False,
                               b_card__isnull=False).values(
        *(f"a_card__{f}" for f in fields), *(f"b_card__{f}" for f in fields))
    pairs = [(node(row, "a_card__"), node(row, "b_card__")) for row in down]
    return nodes, pairs


def _check_failure(topo: Topology, failure: FailureSpec) -> None:
    """The simulation's range checks, done before anything is queued."""
    for i, link in enumerate(failure.links):
        if not 0 <= link < topo.n_links:
            raise ScenarioInputError.one(f"params.links[{i}]", (
                f"link {link} does not exist (valid: 0…{topo.n_links - 1})"))
    chosen_links = set(failure.links)
    for i, (a, b) in enumerate(failure.link_pairs):
        field = f"params.link_pairs[{i}]"
        try:
            topo.check_node(a, field)
            topo.check_node(b, field)
        except TopologyError as exc:
            raise _param_error(exc) from exc
        lid = topo.link_between(a, b)
        if lid < 0:
            raise ScenarioInputError.one(field, f"there is no link between {a} and {b}")
        chosen_links.add(lid)
    for i, node in enumerate(failure.nodes):
        if not 0 <= node < topo.n_nodes:
            raise ScenarioInputError.one(f"params.nodes[{i}]", (
                f"node {node} does not exist (valid: 0…{topo.n_nodes - 1})"))
    nodes = set(failure.nodes)
    chosen_cards = sum(1 for n in nodes if n < topo.n_endpoints)
    pools = (
        ("random_links", failure.random_links, topo.n_links - len(chosen_links), "links"),
        ("random_cards", failure.random_cards, topo.n_endpoints - chosen_cards, "cards"),
        ("random_switches", failure.random_switches,
         topo.n_nodes - topo.n_endpoints - (len(nodes) - chosen_cards), "switches"),
    )
    for key, wanted, available, what in pools:
        if wanted > available:
            raise ScenarioInputError.one(f"params.{key}", (
                f"cannot remove {wanted:,} {what}: only {available:,} exist"
                + (" besides the ones chosen" if available < _total(topo, what) else "")))


def _total(topo: Topology, what: str) -> int:
    return {"links": topo.n_links, "cards": topo.n_endpoints,
            "switches": topo.n_nodes - topo.n_endpoints}[what]


# ------------------------------------------------------------- collective
@register
class CollectiveKind(ScenarioKind):
    name = "collective"
    label = "Collective cost"
    description = "Time, algbw and busbw per message size; the best algorithm per size."
    fields = tuple(
        FieldSpec(name, kind, label, text, required=_required(CollectiveSpec, name),
                  default=jsonable(_default(CollectiveSpec, name)), choices=choices,
                  min=low, max=high)
        for name, (kind, label, text, choices, low, high) in {
            "op": ("choice", "Operation", "The collective to price.", OPS, None, None),
            "algorithm": ("choice", "Algorithm", "auto: the best supported one per size.",
                          ("auto", *ALGORITHMS), None, None),
            "ranks": ("integer", "Ranks", "Cards taking part (empty: every card; more than "
                      "one supernode: whole supernodes).", None, 2, None),
            "sizes": ("integer_list", "Message sizes (bytes)", "One point per size.", None, 1,
                      MAX_SIZE),
            "compression": ("number", "Compression ratio", "Bytes on the wire divided by "
                            "this (4 = 4:1).", None, 1, None),
            "overhead_ns": ("number", "Overhead per message (ns)", "Software cost added to "
                            "every step.", None, 0, None),
            "reduce_gbps": ("number", "Reduction throughput (Gb/s)", "Must be > 0; empty: "
                            "reductions are free.", None, 0, None),
            "scale_up_efficiency": ("number", "Scale-up efficiency", "Fraction of line rate "
                                    "collectives reach on the scale-up fabric (empty: the "
                                    "default of its technology, e.g. NVLink 0.84).", None, 0, 1),
            "scale_out_efficiency": ("number", "Scale-out efficiency", "The same across the "
                                     "network (empty: e.g. InfiniBand 0.98, RoCE 0.97).", None,
                                     0, 1),
        }.items())
    chart = {"series": "sizes", "x": "size_bytes", "y": "busbw_gbps", "log_x": True,
             "x_label": "Message size (bytes)", "y_label": "Bus bandwidth (Gb/s)"}

    def prepare(self, params: Mapping[str, Any], cluster: Any | None) -> dict[str, Any]:
        _, mine = self.split(params)
        try:
            coll = CollectiveSpec.from_dict(mine, "params.")
        except TopologyError as exc:
            raise _param_error(exc) from exc
        inputs, spec, _ = self.topology(params, cluster)
        n = spec.n_cards
        ranks = coll.ranks if coll.ranks is not None else n
        if ranks > n:
            raise ScenarioInputError.one("params.ranks", (
                f"{ranks:,} ranks but the topology has only {n:,} cards"))
        _check_algorithm(coll, spec, ranks)
        inputs["collective"] = coll.to_dict()
        return inputs

    def run(self, inputs: Mapping[str, Any], progress: Progress) -> dict[str, Any]:
        progress(0.05, "building the topology")
        _, topo = self.build(inputs)
        coll = CollectiveSpec.from_dict(inputs["collective"])
        progress(0.2, "routing the communication patterns")
        fabric = fabric_from_topology(topo, coll.ranks, overhead_ns=coll.overhead_ns,
                                      scale_up_efficiency=coll.scale_up_efficiency,
                                      scale_out_efficiency=coll.scale_out_efficiency)
        points: list[CollectivePoint] = []
        best: list[CollectivePoint] = []
        last = None
        for i, size in enumerate(coll.sizes):
            part = collective_curve(fabric, replace(coll, sizes=(size,)))
            points += part.points
            best += part.best
            last = part
            progress(0.25 + 0.75 * (i + 1) / len(coll.sizes), f"{size:,} bytes")
        assert last is not None
        per_size = []
        for point in best:
            per_size.append({
                "size_bytes": point.size_bytes, "algorithm": point.algorithm,
                "time_s": point.time_s, "algbw_gbps": point.algbw_gbps,
                "busbw_gbps": point.busbw_gbps, "algbw_GBps": point.algbw_GBps,
                "busbw_GBps": point.busbw_GBps,
                "algorithms": {p.algorithm: {"time_s": p.time_s, "algbw_gbps": p.algbw_gbps,
                                             "busbw_gbps": p.busbw_gbps,
                                             "busbw_GBps": p.busbw_GBps}
                               for p in points if p.size_bytes == point.size_bytes},
            })
        result: dict[str, Any] = {
            "op": coll.op, "algorithm": coll.algorithm, "ranks": last.ranks,
            "compression": coll.compression, "levels": last.levels, "sizes": per_size,
            "points": [asdict(p) for p in points], "best": [asdict(p) for p in best],
            "unsupported": last.unsupported, "notes": last.notes,
            "efficiency": last.efficiency,
        }
        if "cluster" in inputs:
            result["cluster"] = inputs["cluster"]
        return jsonable(result)

    def rows(self, result: Mapping[str, Any]) -> list[tuple[str, str]]:
        out = [("operation", f"{result.get('op')} over {_fmt(result.get('ranks'))} ranks, "
                             f"algorithm {result.get('algorithm')}")]
        eff = result.get("efficiency") or {}
        if eff:
            out.append(("efficiency", f"scale-up {eff.get('scale_up'):g} "
                                      f"({eff.get('scale_up_from')}), scale-out "
                                      f"{eff.get('scale_out'):g} ({eff.get('scale_out_from')}) "
                                      f"of line rate"))
        for row in result.get("sizes") or []:
            # nccl-tests prints GB/s (bytes); link speeds here are Gb/s (bits): both
            busbw_GBps = row.get("busbw_GBps", row["busbw_gbps"] / 8)
            algbw_GBps = row.get("algbw_GBps", row["algbw_gbps"] / 8)
            out.append((f"{_fmt(row['size_bytes'])} B",
                        f"{row['algorithm']:<12} {_fmt(row['time_s'] * 1e6)} µs  "
                        f"algbw {_fmt(algbw_GBps)} GB/s ({_fmt(row['algbw_gbps'])} Gb/s)  "
                        f"busbw {_fmt(busbw_GBps)} GB/s ({_fmt(row['busbw_gbps'])} Gb/s)"))
        return out


def _check_nvls(coll: CollectiveSpec, spec: FamilySpec | ClusterSpec, ranks: int) -> None:
    """NVLS needs AllReduce inside one switch domain that reduces in flight."""
    field = "params.algorithm"
    if coll.op != "allreduce":
        raise ScenarioInputError.one(field, "in-switch reduction (NVLS) is modelled for "
                                            "AllReduce only")
    fabric = spec.supernodes[0].fabric if isinstance(spec, ClusterSpec) else None
    if fabric is None or not fabric.in_switch_reduction:
        raise ScenarioInputError.one(field, "nvls needs a scale-up fabric whose switches reduce "
                                            "in flight (a supernode with in_switch_reduction)")
    domain = fabric.dims[1] if fabric.kind == "server_mesh" else fabric.n_cards
    if ranks > domain:
        raise ScenarioInputError.one(field, f"nvls needs every rank in one switch domain of "
                                            f"{domain} cards; got {ranks:,} ranks")


def _check_algorithm(coll: CollectiveSpec, spec: FamilySpec | ClusterSpec, ranks: int) -> None:
    """Refuse up front what the cost models would refuse after building everything."""
    field = "params.algorithm"
    if coll.algorithm == "tree" and coll.op != "allreduce":
        raise ScenarioInputError.one(field, "the double binary tree only does AllReduce (as in "
                                            "NCCL)")
    if coll.algorithm == "nvls":
        _check_nvls(coll, spec, ranks)
    if isinstance(spec, ClusterSpec):
        first = spec.supernodes[0].fabric.n_cards
        if ranks > first and ranks % first:
            raise ScenarioInputError.one("params.ranks", (
                f"{ranks:,} ranks must fill whole supernodes of {first:,} cards (or fit in one)"))
        if coll.algorithm == "hierarchical" and ranks <= first:
            raise ScenarioInputError.one(field, "hierarchical needs ranks in more than one "
                                                "supernode")
        if coll.algorithm == "torus" and spec.supernodes[0].fabric.kind not in ("torus", "ring"):
            raise ScenarioInputError.one(field, "the supernode fabric is not a torus")
        return
    if coll.algorithm == "hierarchical":
        raise ScenarioInputError.one(field, "hierarchical needs a cluster (supernodes)")
    if coll.algorithm == "torus":
        if spec.family not in ("torus", "ring"):
            raise ScenarioInputError.one(field, f"a {spec.family} is not a torus")
        if ranks != spec.n_cards:
            raise ScenarioInputError.one(field, f"ranks ({ranks:,}) do not fill the torus")
