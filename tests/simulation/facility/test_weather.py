"""The live plant's weather at a wall-clock time (``simulation.facility.weather``)."""
from __future__ import annotations

import pytest

from simulation.facility.plant import Site
from simulation.facility.weather import DAY_S, ambient_at


def test_unix_time_series_interpolates_and_holds_its_ends() -> None:
    t0 = 1.7e9
    site = Site(weather=((t0, 20.0, 10.0), (t0 + 100.0, 30.0, 20.0)))
    assert ambient_at(site, t0 + 25.0) == (22.5, 12.5, "weather")
    assert ambient_at(site, t0 - 1e6) == (20.0, 10.0, "weather")   # before: first point
    assert ambient_at(site, t0 + 1e6) == (30.0, 20.0, "weather")   # after: last point


def test_a_profile_repeats_over_the_whole_days_it_covers() -> None:
    # two days: 10 °C at 00:00 of day 1, 30 °C at 00:00 of day 2 → period 2 days
    site = Site(weather=((0.0, 10.0, 5.0), (DAY_S, 30.0, 25.0)))
    base = 2 * DAY_S * 10_000  # a whole number of periods after the epoch
    assert ambient_at(site, base + DAY_S / 2) == (20.0, 15.0, "weather")
    assert ambient_at(site, base + 1.5 * DAY_S) == (20.0, 15.0, "weather")  # wraps back
    assert ambient_at(site, base + 2 * DAY_S) == (10.0, 5.0, "weather")


def test_one_point_is_constant_and_no_series_is_the_design_day() -> None:
    assert ambient_at(Site(weather=((3600.0, 41.0, 30.0),)), 1.7e9) == (41.0, 30.0, "weather")
    assert ambient_at(Site(dry_bulb_c=28.0, wet_bulb_c=19.0), 0.0) == (28.0, 19.0, "design")


@pytest.mark.parametrize("t", [0.0, 1234.5, 50_000.0, 86_399.0])
def test_the_wet_bulb_never_passes_the_dry_bulb(t: float) -> None:
    site = Site(weather=((0.0, 20.0, 20.0), (40_000.0, 35.0, 24.0)))
    dry, wet, _ = ambient_at(site, t)
    assert wet <= dry
