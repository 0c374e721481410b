"""The capacity kind: which designs fit a site, what they cost, cost and energy per token.

``prepare`` (in the request) checks the site, the candidate space, the workload and
the price table with the library's ``from_dict`` (``simulation.capacity``): every
refusal — a negative or non-numeric price, an unknown accelerator, switch or optic,
a model outside the training catalogue — is a 400 on ``params.<dotted path>``
(``params.prices.energy_per_kwh``), and nothing is queued. It reads the catalogue
rows of the accelerators named (``GET /api/accelerators/``) into the inputs, so
``run`` (in the worker) sees nothing but ``inputs``. ``run`` prices every design
(one training search per distinct accelerator and card count, reported as
progress), and answers ``compare`` (two accelerators: the seeds' "unit compute cost
−70 %") on the same workload. A run where nothing fits succeeds with
``nothing_fits``: a sentence saying what failed for the nearest design.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simulation.capacity import (
    CandidateSpace,
    CapacityInputError,
    PriceTable,
    Site,
    Timer,
    Workload,
    compare_generations,
    evaluate,
)
from simulation.capacity.design import check_space
from twin.scenarios.hardware import accelerator_figures
from twin.scenarios.kinds.base import (
    FieldSpec,
    Progress,
    ScenarioInputError,
    ScenarioKind,
    fmt,
    int_option,
    jsonable,
    register,
)

__all__ = ["DEFAULT_CANDIDATES", "DEFAULT_SITE", "DEFAULT_WORKLOAD", "MAX_CANDIDATES",
           "CapacityKind"]

DEFAULT_SITE: dict[str, Any] = {"power_kw": 10_000, "cooling_kw": 10_000, "floor_racks": 250,
                                "pue": 1.1}
"""The site a capacity run plans for when ``params.site`` is absent: a 10 MW
liquid-cooled hall. **Assumptions — replace by your site's figures**: 10 MW is a
round mid-size AI hall; a liquid-cooled hall rejects all its heat through its loops,
so cooling = the feed; 250 rack positions hold every default design (the densest,
4,608 cards in 40 kW racks, needs 144 racks plus its network racks); PUE 1.1 is
``simulation.capacity.Site``'s own default for a liquid-cooled hall (an assumption
there too; ``docs/facility.md`` computes one from a plant)."""
DEFAULT_CANDIDATES: dict[str, Any] = {"accelerators": ["h100-sxm5-80gb", "gb200-186gb"]}
"""Two catalogue generations (Hopper HGX and Blackwell NVL72, the pair of
``docs/capacity.md``'s comparison); rack classes, card counts, switch and optic keep
``CandidateSpace``'s defaults (40/132 kW; 1,152/2,304/4,608 cards; ib-ndr-64;
transceiver)."""
DEFAULT_WORKLOAD: dict[str, Any] = {"model": "llama3-70b", "tokens": 1.5e12}
"""Llama 3 70B on 1.5 T tokens: the workload of ``docs/capacity.md``'s worked example
(an assumption: a stand-in for "a frontier-class training run")."""
_DEFAULTS = {"site": DEFAULT_SITE, "candidates": DEFAULT_CANDIDATES,
             "workload": DEFAULT_WORKLOAD}

MAX_CANDIDATES = 20_000
"""Most designs one run prices (~10 k designs/s once the step times are known; each
distinct (accelerator, cards) costs one training search, ~0.5 s)."""
MAX_SEARCHES = 60
"""Most distinct (accelerator, cards) pairs one run prices with the training model."""


def _wrap(exc: CapacityInputError) -> ScenarioInputError:
    return ScenarioInputError.one(f"params.{exc.field}", exc.reason)


def _figures(slugs: list[tuple[str, str]]) -> dict[str, dict[str, Any]]:
    """The catalogue rows of ``slugs`` ((field, slug) pairs) as plain JSON numbers."""
    out: dict[str, dict[str, Any]] = {}
    for field, slug in slugs:
        row = accelerator_figures(slug)
        if row is None:
            from twin.hardware.models import AcceleratorType

            known = ", ".join(AcceleratorType.objects.order_by("slug")
                              .values_list("slug", flat=True))
            raise ScenarioInputError.one(field, f"unknown accelerator {slug!r} "
                                                f"(known: {known})")
        out[slug] = jsonable({k: float(v) if isinstance(v, int | float) or hasattr(v, "is_nan")
                              else v for k, v in row.items()})
    return out


@register
class CapacityKind(ScenarioKind):
    name = "capacity"
    label = "Capacity plan"
    description = ("Designs that fit the site's power, cooling and floor: cards, racks, "
                   "switches and optics, capex, yearly opex, time to train, cost per million "
                   "tokens and energy per token; the Pareto front; two generations compared.")
    fields = (
        FieldSpec("site", "object", "Site", 'JSON: {"power_kw": 20000, "cooling_kw": 20000, '
                  '"floor_racks": 200, "pue": 1.1}. Empty: a 10 MW liquid-cooled hall '
                  '(assumption, docs/capacity.md).', default=DEFAULT_SITE),
        FieldSpec("candidates", "object", "Candidate designs", 'JSON: {"accelerators": '
                  '["h100-sxm5-80gb", "gb200-186gb"], "rack_kw": [40, 132], "cards": [1152, '
                  '4608], "switches": ["ib-ndr-64"], "optics": ["transceiver"]}. Empty: H100 '
                  'and GB200 at the default racks and card counts.',
                  default=DEFAULT_CANDIDATES),
        FieldSpec("workload", "object", "Workload", 'JSON: {"model": "llama3-70b", "tokens": '
                  '1.5e12, "global_batch": 1152} or {"gpu_hours": 1e6, "reference": '
                  '"h100-sxm5-80gb"}. Empty: Llama 3 70B on 1.5 T tokens.',
                  default=DEFAULT_WORKLOAD),
        FieldSpec("prices", "object", "Price table", "JSON overriding the defaults "
                  "(energy_per_kwh, depreciation_years, facility_per_kw, facility_years, "
                  "maintenance_share, systems, switches, optics); each default names its "
                  "source or says it is an assumption."),
        FieldSpec("compare", "string", "Compare generations", "Two accelerators of the "
                  "candidates, older,newer (e.g. h100-sxm5-80gb,gb200-186gb): cost per million "
                  "tokens of each one's cheapest fitting design and the % change."),
        FieldSpec("top", "integer", "Designs listed", "The cheapest N fitting designs.",
                  default=20, min=1, max=200),
    )
    chart = {"series": "pareto", "x": "days_to_train", "y": "cost_per_mtok", "log_x": False,
             "x_label": "Days to train", "y_label": "Cost per million tokens ($)"}

    def prepare(self, params: Mapping[str, Any], cluster: Any | None) -> dict[str, Any]:
        rest, mine = self.split(params)
        if rest:
            key = sorted(rest)[0]
            raise ScenarioInputError.one(f"params.{key}", (
                f"unknown field for a capacity scenario (allowed: "
                f"{', '.join(sorted(self.options))})"))
        # absent → the documented default; given (even null) → validated as given
        mine = {**{k: v for k, v in _DEFAULTS.items() if k not in mine}, **mine}
        try:
            site = Site.from_dict(mine["site"])
            space = CandidateSpace.from_dict(mine["candidates"])
            workload = Workload.from_dict(mine["workload"])
            prices = PriceTable.from_dict(mine.get("prices"))
        except CapacityInputError as exc:
            raise _wrap(exc) from exc
        top = int_option(mine, self.field("top"))
        slugs = [(f"params.candidates.accelerators[{i}]", s)
                 for i, s in enumerate(space.accelerators)]
        if workload.reference is not None:
            slugs.append(("params.workload.reference", workload.reference))
        figures = _figures(slugs)
        try:
            check_space(space, prices, figures)
            Timer(figures, workload)
        except CapacityInputError as exc:
            raise _wrap(exc) from exc
        compare = self._compare(mine.get("compare"), space)
        if space.size > MAX_CANDIDATES:
            raise ScenarioInputError.one("params.candidates", (
                f"{space.size:,} designs; at most {MAX_CANDIDATES:,} per run"))
        searches = len(space.accelerators) * len(space.cards)
        if not workload.is_trace and searches > MAX_SEARCHES:
            raise ScenarioInputError.one("params.candidates.cards", (
                f"{searches:,} (accelerator, cards) pairs to price with the training model; at "
                f"most {MAX_SEARCHES} per run (~0.5 s each)"))
        return jsonable({"site": site.to_dict(), "candidates": space.to_dict(),
                         "workload": workload.to_dict(), "prices": prices.to_dict(),
                         "figures": figures, "compare": compare, "top": top})

    @staticmethod
    def _compare(value: Any, space: CandidateSpace) -> list[str] | None:
        if value in (None, ""):
            return None
        items = [v.strip() for v in value.split(",")] if isinstance(value, str) else value
        if not isinstance(items, list) or len(items) != 2 \
                or not all(isinstance(v, str) for v in items):
            raise ScenarioInputError.one("params.compare", "two accelerators: older,newer")
        for slug in items:
            if slug not in space.accelerators:
                raise ScenarioInputError.one("params.compare", (
                    f"{slug!r} is not among params.candidates.accelerators"))
        return list(items)

    def run(self, inputs: Mapping[str, Any], progress: Progress) -> dict[str, Any]:
        site = Site.from_dict(inputs["site"])
        space = CandidateSpace.from_dict(inputs["candidates"])
        workload = Workload.from_dict({k: v for k, v in inputs["workload"].items()
                                       if v is not None})
        prices = PriceTable.from_dict(inputs["prices"])
        figures = inputs["figures"]
        progress(0.02, "pricing the workload on each accelerator and card count")
        found = evaluate(site, space, workload, prices, figures, Timer(figures, workload),
                         lambda f: progress(0.02 + 0.9 * f, "training model: time to train"))
        progress(0.95, "designs priced")
        out = found.to_dict(top=inputs["top"])
        if inputs.get("compare"):
            older, newer = inputs["compare"]
            out["comparison"] = compare_generations(found, older, newer)
        return jsonable(out)

    def rows(self, result: Mapping[str, Any]) -> list[tuple[str, str]]:
        out = [("designs", f"{fmt(result.get('fitting'))} of {fmt(result.get('candidates'))} "
                           f"fit the site")]
        for reason, count in (result.get("refused") or {}).items():
            if count:
                out.append((f"  refused: {reason}", fmt(count)))
        if result.get("nothing_fits"):
            out.append(("nothing fits", str(result["nothing_fits"])))
        for d in result.get("pareto") or []:
            out.append((f"front: {d['cards']:,} × {d['accelerator']}",
                        f"{d['rack_kw']:g} kW racks, {d['switch']}/{d['optic']}: "
                        f"{fmt(d['days_to_train'])} days, ${fmt(d['cost_per_mtok'])}/M tokens, "
                        f"{fmt(d['energy_j_per_token'])} J/token, capex ${fmt(d['capex'])}, "
                        f"opex ${fmt(d['opex_per_year'])}/yr, {fmt(d['facility_kw'])} kW"))
        comparison = result.get("comparison")
        if comparison:
            out.append(("generations", str(comparison.get("answer"))))
        return out
