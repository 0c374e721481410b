"""The accelerator catalogue: spec-sheet figures every power and simulation model reads."""
from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from twin.core.bounds import bounded
from twin.core.deletion import GuardedDeletion
from twin.core.models import TimestampedModel
from twin.core.validators import printable, printable_constraint
from twin.hardware.constants import (
    MAX_CARD_TDP_W,
    MAX_HBM_GIB,
    MAX_HBM_TBPS,
    MAX_SCALEUP_GBYTES,
    MAX_SCALEUP_LINKS,
    MAX_SUPERNODE_CARDS,
    MAX_TFLOPS,
)
from twin.hardware.models.racks import BudgetedWrite, Rack

__all__ = ["AcceleratorType"]


class AcceleratorType(GuardedDeletion, BudgetedWrite, TimestampedModel):
    """One accelerator model with its published figures.

    TFLOP/s are *dense* (no 2:4 sparsity), as used by MFU calculations; a
    precision the part does not support is left empty rather than zero (FP8 on
    an A100, FP4 before Blackwell). ``nvlink_domain_cards`` is how many cards
    the part's scale-up switches join at full bandwidth (72 in an NVL72 rack,
    8 on an HGX board): the simulation reads it as ``nvlink_domain_cards``.
    ``idle_w`` is not on spec sheets: it is a measured idle draw, see ``notes``.

    Its ``tdp_w`` is every one of its cards' share of its rack's draw: raising it
    is checked against the budget of every rack holding such cards.

    Cards of a type are in clusters, not in the type: a type in use is never deleted
    with them (``deletion_cascades`` is off), whatever the caller confirms.
    """

    deletion_cascades = False

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=100, unique=True, validators=[printable])
    vendor = models.CharField(max_length=50, validators=[printable])
    fp32_tflops = models.FloatField("FP32 TFLOP/s", null=True, blank=True,
                                    validators=bounded(0, MAX_TFLOPS, "TFLOP/s"))
    tf32_tflops = models.FloatField("TF32 TFLOP/s", null=True, blank=True,
                                    validators=bounded(0, MAX_TFLOPS, "TFLOP/s"))
    bf16_tflops = models.FloatField("BF16/FP16 TFLOP/s",
                                    validators=bounded(0, MAX_TFLOPS, "TFLOP/s"))
    fp8_tflops = models.FloatField("FP8 TFLOP/s", null=True, blank=True,
                                   validators=bounded(0, MAX_TFLOPS, "TFLOP/s"))
    fp4_tflops = models.FloatField(
        "FP4 TFLOP/s", null=True, blank=True, validators=bounded(0, MAX_TFLOPS, "TFLOP/s"),
        help_text="Dense FP4 (NVFP4/MXFP4) tensor peak; empty on parts without FP4 "
                  "(Hopper, Ampere).")
    hbm_gib = models.FloatField("HBM (GiB)", validators=bounded(0, MAX_HBM_GIB, "GiB"))
    hbm_tbps = models.FloatField("HBM bandwidth (TB/s)",
                                 validators=bounded(0, MAX_HBM_TBPS, "TB/s"))
    tdp_w = models.PositiveIntegerField("TDP (W)", validators=bounded(1, MAX_CARD_TDP_W, "W"))
    idle_w = models.PositiveIntegerField("Idle (W)", validators=bounded(0, MAX_CARD_TDP_W, "W"))
    scaleup_links = models.PositiveSmallIntegerField(
        "Scale-up links", validators=bounded(0, MAX_SCALEUP_LINKS, "links"))
    scaleup_gbps = models.FloatField(
        "Scale-up bandwidth (GB/s)", help_text="Aggregate bidirectional, as on the datasheet.",
        validators=bounded(0, MAX_SCALEUP_GBYTES, "GB/s"),
    )
    nvlink_domain_cards = models.PositiveSmallIntegerField(
        "NVLink domain (cards)", default=8,
        validators=bounded(1, MAX_SUPERNODE_CARDS, "cards"),
        help_text="Cards one scale-up switch domain of this part joins at full bandwidth: "
                  "72 for an NVL72 rack (GB200, GB300), 8 for an HGX/DGX board.")
    source = models.URLField(max_length=400, help_text="Where the figures come from.")
    notes = models.TextField(blank=True)

    class Meta:
        ordering = ["vendor", "name"]
        constraints = [
            printable_constraint("name", "accelerator_name_printable"),
            models.CheckConstraint(
                condition=Q(idle_w__lte=models.F("tdp_w")), name="accelerator_idle_le_tdp"
            ),
            models.CheckConstraint(
                condition=Q(bf16_tflops__gt=0) & Q(hbm_gib__gt=0) & Q(hbm_tbps__gt=0)
                & Q(scaleup_gbps__gte=0),
                name="accelerator_figures_positive",
            ),
            models.CheckConstraint(
                condition=Q(bf16_tflops__lte=MAX_TFLOPS) & Q(hbm_gib__lte=MAX_HBM_GIB)
                & Q(hbm_tbps__lte=MAX_HBM_TBPS) & Q(tdp_w__gte=1) & Q(tdp_w__lte=MAX_CARD_TDP_W)
                & Q(scaleup_links__lte=MAX_SCALEUP_LINKS) & Q(scaleup_gbps__lte=MAX_SCALEUP_GBYTES)
                & Q(fp32_tflops__gte=0) & Q(fp32_tflops__lte=MAX_TFLOPS)
                & Q(tf32_tflops__gte=0) & Q(tf32_tflops__lte=MAX_TFLOPS)
                & Q(fp8_tflops__gte=0) & Q(fp8_tflops__lte=MAX_TFLOPS)
                & Q(fp4_tflops__gte=0) & Q(fp4_tflops__lte=MAX_TFLOPS)
                & Q(nvlink_domain_cards__gte=1)
                & Q(nvlink_domain_cards__lte=MAX_SUPERNODE_CARDS),
                name="accelerator_figures_bounded",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def deletion_contents(self) -> dict[str, models.QuerySet]:
        from twin.hardware.models import Card

        return {"cards": Card.objects.filter(accelerator=self)}

    def deletion_refusal_hint(self) -> str:
        from twin.hardware.models import Card

        serial = Card.objects.filter(accelerator=self).values_list("serial", flat=True).first()
        return f"Re-type or delete those cards first (e.g. {serial})."

    def stored_tdp_w(self) -> int | None:
        return type(self).objects.filter(pk=self.pk).values_list("tdp_w", flat=True).first() \
            if self.pk else None

    def lock_for_budget(self) -> None:
        stored = self.stored_tdp_w()
        if stored is not None and self.tdp_w is not None and self.tdp_w > stored:
            # A card may land in any rack while this commits, so every rack is locked
            # (in primary-key order); card writes read the TDP after their rack lock.
            list(Rack.objects.select_for_update().order_by("pk").values_list("pk", flat=True))

    def clean(self) -> None:
        errors: dict[str, Any] = {}
        for field in ("bf16_tflops", "hbm_gib", "hbm_tbps"):  # ≥ 0 is the fields' own check
            if getattr(self, field) == 0:
                errors[field] = "Must be positive: every card has some."
        if self.idle_w is not None and self.tdp_w is not None and self.idle_w > self.tdp_w:
            errors["idle_w"] = f"Idle draw {self.idle_w} W exceeds the TDP of {self.tdp_w} W."
        stored = self.stored_tdp_w()
        if stored is not None and self.tdp_w is not None and self.tdp_w > stored:
            self.check_budget(errors, lambda: Rack.objects.check_tdp_change(
                self.pk, self.tdp_w, allow=self.allow_over_budget))
        if errors:
            raise ValidationError(errors)
