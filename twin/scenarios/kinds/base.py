"""What every scenario kind shares: the base class, field specs, the registry.

A kind module (``topology.py``, ``route.py``, …) subclasses :class:`ScenarioKind`,
describes its options with :class:`FieldSpec` and decorates the class with
:func:`register`; ``kinds/__init__.py`` imports it, which is what registers it.
The helpers below (``param_error``, ``split_params``, ``int_option``, ``fmt``, …)
are the ones more than one kind uses.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import MISSING, asdict, dataclass, is_dataclass
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from simulation.topology import (
    ClusterSpec,
    FamilySpec,
    Topology,
    TopologyError,
    from_spec,
    spec_from_dict,
)
from twin.scenarios.inputs import ClusterInput, ConversionError, cluster_input

__all__ = [
    "ENGINE_VERSION",
    "FIELD_TYPES",
    "REGISTRY",
    "TOPOLOGY_KEYS",
    "FieldSpec",
    "Progress",
    "ScenarioInputError",
    "ScenarioKind",
    "describe_kinds",
    "field_default",
    "field_required",
    "fmt",
    "get_kind",
    "int_option",
    "jsonable",
    "param_error",
    "register",
    "split_params",
]

ENGINE_VERSION = "5"
"""Bump when a kind's results change for the same inputs: it is part of the
cache key, so older cached results stop matching."""

Progress = Callable[[float, str], None]

FIELD_TYPES = ("choice", "integer", "number", "boolean", "string", "integer_list", "card",
               "card_list", "integer_pairs", "object", "choice_list", "object_list")
"""Input types a form needs: ``card`` is a card id or serial of the cluster (a
card number with a topology family instead), ``integer_pairs`` ``[[a, b], …]``,
``object`` a JSON object (a form takes it as JSON text), ``object_list`` a JSON list
of objects (the what-if's events; JSON text too), ``choice_list`` several of
``choices`` (a list; a kind may also take them as one comma-separated string, for the
API and the command line)."""

TOPOLOGY_KEYS = frozenset({
    "family", "nodes", "dims", "k", "tiers", "link_gbps", "link_ns", "switch_ns",
    "name", "supernodes", "network",
})


class ScenarioInputError(Exception):
    """Bad scenario input: ``errors`` maps a field path to its messages; ``missing``
    names the fields whose value is well formed but names nothing stored (a card
    serial no card has): the API answers those 404/409, not 400."""

    def __init__(self, errors: Mapping[str, list[str]],
                 missing: frozenset[str] = frozenset()) -> None:
        self.errors = {key: list(value) for key, value in errors.items()}
        self.missing = frozenset(missing)
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in self.errors.items()))

    @classmethod
    def one(cls, field: str, message: str, missing: bool = False) -> ScenarioInputError:
        return cls({field: [message]}, frozenset({field}) if missing else frozenset())

    def line(self) -> str:
        """One readable line (for the command line)."""
        return str(self)


def param_error(exc: TopologyError) -> ScenarioInputError:
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


def split_params(params: Mapping[str, Any], options: frozenset[str]) -> tuple[dict, dict]:
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
        if (self.type in ("choice", "choice_list")) != (self.choices is not None):
            raise ValueError(f"field {self.name}: choices go with type 'choice' or "
                             f"'choice_list' only")

    def to_dict(self) -> dict[str, Any]:
        return jsonable(asdict(self))


def field_default(cls: type, name: str) -> Any:
    """The default of dataclass field ``name`` (None when it has none)."""
    f = cls.__dataclass_fields__[name]  # type: ignore[attr-defined]
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return None


def field_required(cls: type, name: str) -> bool:
    f = cls.__dataclass_fields__[name]  # type: ignore[attr-defined]
    return f.default is MISSING and f.default_factory is MISSING


def int_option(data: Mapping[str, Any], spec: FieldSpec) -> int:
    """The integer option ``spec`` from ``data``, its default if absent."""
    value = data.get(spec.name, spec.default)
    minimum = int(spec.min or 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ScenarioInputError.one(f"params.{spec.name}",
                                     f"an integer ≥ {minimum}, got {value!r}")
    if spec.max is not None and value > spec.max:
        raise ScenarioInputError.one(f"params.{spec.name}",
                                     f"at most {int(spec.max):,}, got {value:,}")
    return value


class ScenarioKind:
    """Base of every kind (see the package docstring, ``twin.scenarios.kinds``)."""

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
        return split_params(params, self.options)

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
            raise param_error(exc) from exc
        from twin.scenarios.kinds.limits import check_topology_cards

        size_key = next((k for k in ("dims", "nodes", "k", "supernodes") if k in rest), None)
        check_topology_cards(spec.n_cards, f"params.{size_key}" if size_key else "params")
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

    # ------------------------------------------------- sweeps (optional)
    # A kind whose run is a sweep (configurations, policies, intervals) may split
    # it into independent parts that run as Celery tasks of their own, on any
    # worker (twin.scenarios.sweeps). The contract, checked by its tests:
    #     merge(inputs, [run_part(inputs, p, …) for p in parts(inputs, n)])
    # equals run(inputs, …) for every n (timings aside), so the result and its
    # cache entry (params_hash) do not depend on how many workers computed it.

    def parts(self, inputs: Mapping[str, Any], most: int) -> list[dict[str, Any]]:
        """At most ``most`` small JSON descriptions of independent shares of the
        run (not copies of ``inputs``: each part reads those from the run); fewer
        than two (the default: none) runs it whole, with :meth:`run`."""
        return []

    def run_part(self, inputs: Mapping[str, Any], part: Mapping[str, Any],
                 progress: Progress) -> dict[str, Any]:
        """Compute one share (JSON-ready partial result), reporting 0 → 1."""
        raise NotImplementedError(f"{self.name} does not split")

    def merge(self, inputs: Mapping[str, Any],
              partials: list[dict[str, Any]]) -> dict[str, Any]:
        """The run's result from every part's partial result, in the parts' order."""
        raise NotImplementedError(f"{self.name} does not split")

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


def fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.{digits}g}" if abs(value) < 10 ** digits else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
