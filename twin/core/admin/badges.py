"""Coloured badges for choices: the colour each ``ChoiceSet`` declares, as a shade
dark enough for white text, so a status looks the same in every app's admin."""
from __future__ import annotations

from django.utils.html import format_html
from django.utils.safestring import SafeString

from twin.core.choices import ChoiceSet

__all__ = ["COLOUR_HEX", "badge"]

#: The ChoiceSets' colour names, as dark enough shades for white text.
COLOUR_HEX = {
    "green": "#2e7d32",
    "orange": "#c75b00",
    "red": "#c62828",
    "gray": "#616161",
    "blue": "#1565c0",
    "cyan": "#00838f",
    "teal": "#00695c",
    "purple": "#6a1b9a",
    "indigo": "#283593",
}


def badge(choices: type[ChoiceSet], value: str | None) -> SafeString | str:
    """A coloured label for ``value`` of ``choices`` (colours from the ChoiceSet)."""
    if not value:
        return "—"
    colour = COLOUR_HEX.get(choices.colour(value), COLOUR_HEX["gray"])
    return format_html(
        '<span class="twin-badge" style="background:{};color:#fff;padding:1px 7px;'
        'border-radius:8px;white-space:nowrap">{}</span>',
        colour, choices.label(value),
    )
