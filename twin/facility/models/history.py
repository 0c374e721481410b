"""The plant's minute history (``twin.facility.history`` writes it): one row per
cluster and minute, with the telemetry minute rows."""
from __future__ import annotations

from django.db import models

__all__ = ["PlantMinute"]


class PlantMinute(models.Model):
    """One minute of the live plant of a cluster: PUE (Σ facility / Σ IT energy over
    the minute), mean IT and facility power, per CDU the mean and peak load fraction
    and supply temperature, per feed the least headroom, per rated element its least
    headroom and peak load fraction (``rated``), and how many limits bound
    the caps (null: capping off all minute). Rows older than
    ``TELEMETRY_RETENTION_DAYS`` go with the telemetry minutes (cleanup beat task)."""

    cluster = models.ForeignKey("hardware.Cluster", on_delete=models.CASCADE,
                                related_name="plant_minutes")
    minute = models.DateTimeField(help_text="Start of the minute (UTC).")
    samples = models.PositiveIntegerField(default=0, help_text="Plant steps in the minute.")
    pue = models.FloatField(null=True, blank=True,
                            help_text="Σ facility power / Σ IT power over the minute.")
    it_w = models.FloatField(null=True, blank=True, help_text="Mean IT power (W).")
    facility_w = models.FloatField(null=True, blank=True,
                                   help_text="Mean facility power (W): IT + losses + cooling.")
    feed_headroom_w = models.FloatField(
        null=True, blank=True, help_text="The least headroom of any feed in the minute (W).")
    cdus = models.JSONField(default=list, blank=True, help_text=(
        "Per CDU: key, load_fraction (mean), load_fraction_max, supply_c (mean), "
        "supply_c_max."))
    feeds = models.JSONField(default=list, blank=True, help_text=(
        "Per feed: key, headroom_w (least), load_fraction_max."))
    rated = models.JSONField(default=list, blank=True, help_text=(
        "Per rated element (feeds, transformers, UPS, PDUs, busways, power shelves, CDUs, "
        "towers, dry coolers, chillers, CRAHs): key, kind, chain, headroom_w (least), "
        "load_fraction_max."))
    caps_binding = models.IntegerField(
        null=True, blank=True,
        help_text="Most limits binding the caps at once in the minute (null: capping off).")
    cards_capped = models.IntegerField(null=True, blank=True,
                                       help_text="Most cards capped at once in the minute.")

    class Meta:
        ordering = ["cluster_id", "minute"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "minute"], name="plant_minute_unique"),
        ]

    def __str__(self) -> str:
        return f"plant of cluster {self.cluster_id} @ {self.minute:%Y-%m-%d %H:%M}"
