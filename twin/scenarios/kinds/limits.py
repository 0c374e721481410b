"""How big a scenario may be: refused up front (400 naming the limit), never computed.

A worker runs one scenario at a time per process, so one request must not be
able to occupy it for a quarter of an hour (the time limit) or exhaust its
memory: every input whose size drives the cost has a ceiling, checked in
``prepare`` — in the web request, before anything is written or queued —
with a message that says the limit. Each ceiling is a setting (``TWIN_SCENARIO_*``
in Django settings) so an installation with bigger workers can raise it.

* ``MAX_SIZES`` (64): message sizes of one collective run; each size is a full
  pricing of every algorithm on the fabric.
* ``MAX_LIST_ITEMS`` (4096): explicit links, link pairs, nodes and cards of a
  failure run.
* ``MAX_SAMPLES`` (10,000): sampled sources of the topology and failure
  metrics (each is a breadth-first search over the whole graph).
* ``MAX_TOPOLOGY_CARDS`` (1,048,576): cards of a topology described in the
  parameters (a family or a cluster description); a cluster of the inventory
  is as big as it was built.
"""
from __future__ import annotations

from collections.abc import Sized
from typing import Any

from django.conf import settings

from twin.scenarios.kinds.base import ScenarioInputError

__all__ = [
    "MAX_LIST_ITEMS",
    "MAX_SAMPLES",
    "MAX_SIZES",
    "MAX_TOPOLOGY_CARDS",
    "check_items",
    "check_topology_cards",
]


def _setting(name: str, default: int) -> int:
    return int(getattr(settings, f"TWIN_SCENARIO_{name}", default))


MAX_SIZES = _setting("MAX_SIZES", 64)
MAX_LIST_ITEMS = _setting("MAX_LIST_ITEMS", 4096)
MAX_SAMPLES = _setting("MAX_SAMPLES", 10_000)
MAX_TOPOLOGY_CARDS = _setting("MAX_TOPOLOGY_CARDS", 1 << 20)


def check_items(value: Any, field: str, limit: int, what: str) -> None:
    """Refuse a list of more than ``limit`` items on ``field`` (other types are
    left to the parser, which names what it expected)."""
    if isinstance(value, Sized) and not isinstance(value, str | bytes | dict) \
            and len(value) > limit:
        raise ScenarioInputError.one(field, f"at most {limit:,} {what} per run, got "
                                            f"{len(value):,}: split the run")


def check_topology_cards(cards: int, field: str = "params") -> None:
    """Refuse a topology of parameters with more than ``MAX_TOPOLOGY_CARDS`` cards."""
    if cards > MAX_TOPOLOGY_CARDS:
        raise ScenarioInputError.one(field, f"at most {MAX_TOPOLOGY_CARDS:,} cards in a "
                                            f"topology given in the parameters, got "
                                            f"{cards:,}")
