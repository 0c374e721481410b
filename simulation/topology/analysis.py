"""One call for every topology metric, and the JSON-in/JSON-out entry points.

:func:`topology_from_dict` accepts what the REST API will accept
(``{"family": "torus", "dims": [8, 8, 8]}``, ``{"family": "ring", "nodes":
512}`` or a cluster description with ``"supernodes"``) and
:func:`analyze` returns a JSON-ready dict whose top-level keys are the ones
the scenario API promises: ``avg_hops``, ``diameter_hops``,
``bisection_links``, ``bisection_gbps``, ``hop_histogram``, ``latency_ns``
— plus the full results, the method used and, for a cluster, the metrics
of one supernode's fabric alone.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from .bisection import bisection
from .builders import build
from .cluster import from_spec
from .graph import Topology, TopologyError
from .metrics import DEFAULT_SAMPLES, EXACT_LIMIT, hop_stats, latency_stats
from .requirements import check_latency
from .spec import ClusterSpec, FabricSpec, FamilySpec

__all__ = ["analyze", "fabric_family", "spec_from_dict", "topology_from_dict"]


def spec_from_dict(data: Mapping[str, Any]) -> FamilySpec | ClusterSpec:
    """Validate a family or cluster description (per-field errors)."""
    if not isinstance(data, Mapping):
        raise TopologyError("params", "must be an object")
    if "supernodes" in data:
        return ClusterSpec.from_dict(data)
    if "family" not in data:
        raise TopologyError("family", "give a family (ring, torus, …) or a cluster's supernodes")
    return FamilySpec.from_dict(data)


def topology_from_dict(data: Mapping[str, Any]) -> Topology:
    """Validate and build in one go."""
    return from_spec(spec_from_dict(data))


def fabric_family(fabric: FabricSpec) -> FamilySpec:
    """The standalone family equal to one supernode's fabric.

    A ``server_mesh`` fabric is disconnected on its own (its servers meet
    only through the network), so its family is one server's NVLink domain:
    the full mesh of ``dims[1]`` cards.
    """
    if fabric.kind == "server_mesh":
        return FamilySpec(
            "full_mesh",
            nodes=fabric.dims[1],
            link_gbps=fabric.link_gbps,
            link_ns=fabric.link_ns,
            switch_ns=fabric.switch_ns,
        )
    kind = {"switch": "star"}.get(fabric.kind, fabric.kind)
    if kind in ("torus", "mesh"):
        return FamilySpec(
            kind,
            dims=fabric.dims,
            link_gbps=fabric.link_gbps,
            link_ns=fabric.link_ns,
            switch_ns=fabric.switch_ns,
        )
    return FamilySpec(
        kind,
        nodes=fabric.n_cards,
        link_gbps=fabric.link_gbps,
        link_ns=fabric.link_ns,
        switch_ns=fabric.switch_ns,
    )


def analyze(
    topo: Topology,
    *,
    spec: FamilySpec | ClusterSpec | None = None,
    exact_limit: int = EXACT_LIMIT,
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
) -> dict[str, Any]:
    """Hops, latency, bisection and the seeds' latency requirements, as a dict.

    ``timings_s`` records how long each part took.
    """
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    hops = hop_stats(topo, exact_limit=exact_limit, samples=samples, seed=seed)
    timings["hops"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    lat = latency_stats(topo, exact_limit=exact_limit, samples=samples, seed=seed, hops=hops)
    timings["latency"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    bis = bisection(topo)
    timings["bisection"] = time.perf_counter() - t0
    reqs = check_latency(topo, lat)
    frac = hops.average_fraction()
    out: dict[str, Any] = {
        "name": topo.name,
        "family": topo.family,
        "cards": topo.n_endpoints,
        "nodes": topo.n_nodes,
        "links": topo.n_links,
        "node_kinds": topo.kind_counts(),
        "memory_bytes": topo.nbytes(),
        "avg_hops": hops.average,
        "avg_hops_exact": f"{frac.numerator}/{frac.denominator}" if hops.exact else None,
        "diameter_hops": hops.diameter,
        "hop_histogram": hops.histogram,
        "latency_ns": {
            "average": lat.average_ns,
            "p50": lat.p50_ns,
            "p99": lat.p99_ns,
            "max": lat.max_ns,
        },
        "bisection_links": bis.links,
        "bisection_gbps": bis.gbps,
        "bisection": bis.to_dict(),
        "hops": hops.to_dict(),
        "latency": {k: v for k, v in lat.to_dict().items() if k != "distribution"},
        "requirements": [r.to_dict() for r in reqs],
        "method": hops.method,
        "exact": hops.exact and lat.exact,
        "timings_s": timings,
    }
    if isinstance(spec, ClusterSpec) and len(spec.supernodes) == 1:
        fam = fabric_family(spec.supernodes[0].fabric)
        fabric = build(fam)
        fh = hop_stats(fabric)
        fl = latency_stats(fabric, hops=fh)
        ff = fh.average_fraction()
        out["fabric"] = {
            "family": fam.to_dict(),
            "avg_hops": fh.average,
            "avg_hops_exact": f"{ff.numerator}/{ff.denominator}",
            "diameter_hops": fh.diameter,
            "latency_ns": {"average": fl.average_ns, "p99": fl.p99_ns, "max": fl.max_ns},
            "bisection": bisection(fabric).to_dict(),
        }
    return out
