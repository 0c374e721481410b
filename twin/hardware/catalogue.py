"""Loads the accelerator catalogue fixture into every database after migrate.

The fixture is the single source of the spec-sheet figures; loading is an
upsert by slug so edits to the fixture reach existing databases, and rows an
operator added by hand are left alone.
"""
from __future__ import annotations

import json
from pathlib import Path

__all__ = ["CATALOGUE_FIXTURE", "load_catalogue"]

CATALOGUE_FIXTURE = Path(__file__).parent / "fixtures" / "catalogue.json"


def load_catalogue(using: str = "default") -> int:
    """Upsert every fixture entry; returns how many entries the fixture holds."""
    from twin.hardware.models import AcceleratorType

    entries = json.loads(CATALOGUE_FIXTURE.read_text())
    for entry in entries:
        fields = dict(entry["fields"])
        slug = fields.pop("slug")
        AcceleratorType.objects.using(using).update_or_create(slug=slug, defaults=fields)
    return len(entries)
