"""Loads the accelerator catalogue fixture into every database after migrate.

The fixture is the single source of the spec-sheet figures; loading is an
upsert by slug so edits to the fixture reach existing databases, and rows an
operator added by hand are left alone.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["ACCELERATOR_FIELDS", "CATALOGUE_FIXTURE", "accelerator_figures", "load_catalogue"]

CATALOGUE_FIXTURE = Path(__file__).parent / "fixtures" / "catalogue.json"

ACCELERATOR_FIELDS = ("slug", "name", "vendor", "bf16_tflops", "fp8_tflops", "fp32_tflops",
                      "tf32_tflops", "fp4_tflops", "hbm_gib", "hbm_tbps", "tdp_w", "idle_w",
                      "scaleup_gbps", "nvlink_domain_cards")
"""The catalogue columns the training library's ``system_for_accelerator`` reads
(``fp4_tflops``: dense FP4, None before Blackwell; ``nvlink_domain_cards``: the
cards one NVLink switch domain of the part joins, 72 on NVL72 parts, 8 on HGX). Here,
below every app that prices a step with the training model (the scenario kinds, the
facility's live capping)."""


def accelerator_figures(slug: str) -> dict[str, Any] | None:
    """The catalogue row ``slug`` as the plain dict ``system_for_accelerator`` takes
    (None: no such accelerator type)."""
    from twin.hardware.models import AcceleratorType

    return AcceleratorType.objects.filter(slug=slug).values(*ACCELERATOR_FIELDS).first()


def load_catalogue(using: str = "default") -> int:
    """Upsert every fixture entry; returns how many entries the fixture holds."""
    from twin.hardware.models import AcceleratorType

    entries = json.loads(CATALOGUE_FIXTURE.read_text())
    for entry in entries:
        fields = dict(entry["fields"])
        slug = fields.pop("slug")
        AcceleratorType.objects.using(using).update_or_create(slug=slug, defaults=fields)
    return len(entries)
