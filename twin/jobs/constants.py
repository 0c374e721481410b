"""Figures of the jobs app written once (bounds, units, what a card takes)."""
from __future__ import annotations

from twin.hardware.choices import CardStatusChoices

__all__ = ["FULL_CARD", "MAX_DURATION_S", "MAX_JOB_CARDS", "MAX_PRIORITY",
           "UNAVAILABLE_CARD_STATES"]

FULL_CARD = 1000
"""A card's capacity in thousandths (the Alibaba trace's ``gpu_milli``): a job asks
for whole cards (each 1000) or for a fraction of one card (1–999)."""
MAX_JOB_CARDS = 1_048_576
"""The largest preset has a million cards: no job asks for more than a cluster holds."""
MAX_PRIORITY = 1000
MAX_DURATION_S = 10 * 365 * 86400
"""Ten years: longer than any training run, short enough that a typo is caught."""
UNAVAILABLE_CARD_STATES = frozenset({CardStatusChoices.FAILED, CardStatusChoices.MAINTENANCE})
"""Cards that take no new work: failed ones, and ones taken out for maintenance."""
