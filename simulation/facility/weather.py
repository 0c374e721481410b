"""The site's weather at a wall-clock time: what the live plant's heat rejection sees.

A site's ``weather`` series is ``(seconds, dry bulb °C, wet bulb °C)`` points
(:class:`~simulation.facility.plant.Site`). A what-if reads the seconds from its own
start; the live tick needs a wall clock, so it reads them as follows (a convention of
the twin, labelled as such, no published source):

* **Timestamps** — a series whose first point is at or after 1e9 s (2001-09-09) holds
  Unix times (a measured or forecast series): linear interpolation at ``t_unix``; before
  the first or after the last point the nearest end holds (``numpy.interp``).
* **A repeating profile** — otherwise the seconds are from 00:00 UTC and the series
  repeats every whole number of days that covers it (a design-day shape, as ASHRAE's
  climatic design data gives): linear interpolation at ``t_unix`` modulo that period,
  wrapping from the last point to the first of the next period.
* **No series** — the design dry and wet bulb.

>>> from simulation.facility.plant import Site
>>> day = Site(dry_bulb_c=35.0, wet_bulb_c=24.0,
...            weather=((0.0, 20.0, 15.0), (43200.0, 40.0, 28.0)))
>>> ambient_at(day, 86400.0 * 100 + 21600.0)   # 06:00 UTC: half way up
(30.0, 21.5, 'weather')
>>> ambient_at(day, 86400.0 * 100 + 64800.0)   # 18:00: half way back (wrap)
(30.0, 21.5, 'weather')
>>> ambient_at(Site(), 1.7e9)
(35.0, 24.0, 'design')
"""
from __future__ import annotations

import math

import numpy as np

from simulation.facility.plant import Site

__all__ = ["DAY_S", "UNIX_TIME_FROM_S", "ambient_at"]

DAY_S = 86400.0
UNIX_TIME_FROM_S = 1e9
"""A series starting at or after this many seconds holds Unix times."""


def ambient_at(site: Site, t_unix: float) -> tuple[float, float, str]:
    """(dry bulb °C, wet bulb °C, ``"weather"`` or ``"design"``) at ``t_unix``."""
    series = site.weather
    if not series:
        return site.dry_bulb_c, site.wet_bulb_c, "design"
    ts = np.array([p[0] for p in series], dtype=float)
    dry = np.array([p[1] for p in series], dtype=float)
    wet = np.array([p[2] for p in series], dtype=float)
    if ts[0] >= UNIX_TIME_FROM_S:
        t = float(t_unix)
    else:
        period = DAY_S * max(1, math.ceil((ts[-1] + 1.0) / DAY_S))
        t = float(t_unix) % period
        ts = np.concatenate(([ts[-1] - period], ts, [ts[0] + period]))
        dry = np.concatenate(([dry[-1]], dry, [dry[0]]))
        wet = np.concatenate(([wet[-1]], wet, [wet[0]]))
    d, w = float(np.interp(t, ts, dry)), float(np.interp(t, ts, wet))
    return round(d, 6), round(min(w, d), 6), "weather"
