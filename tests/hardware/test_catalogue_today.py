"""Today's catalogue: H100/H200/B200 checked, GB200 and GB300 added, dense FP4, NVLink domains.

Each figure is the datasheet's (the fixture's ``notes`` and docs/hardware.md name
the source); the tests check them against the rack-level totals NVIDIA publishes
for the NVL72 (so a typo in one figure breaks the sum), the new fields' rules
(FP4 empty before Blackwell, a domain of 72 on NVL72 parts), the API and the
``nvlink_domain_cards`` figure the training model reads.
"""
from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.test import Client
from django.urls import reverse

from twin.hardware.models import AcceleratorType
from twin.scenarios.hardware import ACCELERATOR_FIELDS, accelerator_figures

pytestmark = pytest.mark.django_db


def get(slug: str) -> AcceleratorType:
    return AcceleratorType.objects.get(slug=slug)


def test_nvl72_parts_match_the_rack_totals_nvidia_publishes() -> None:
    """GB200 NVL72 page: FP4 1,440 PF, FP8 720 PF, BF16 360 PF, TF32 180 PF (sparse,
    twice the dense), 13.4 TB HBM3e at 576 TB/s, NVLink 130 TB/s; GB300 NVL72: FP4
    1,080 PF dense, 20 TB HBM3e (288 GB a GPU), the same NVLink."""
    gb200, gb300 = get("gb200-186gb"), get("gb300-288gb")
    for part in (gb200, gb300):
        assert part.nvlink_domain_cards == 72
        assert 72 * 2 * part.fp8_tflops / 1e3 == pytest.approx(720)
        assert 72 * 2 * part.bf16_tflops / 1e3 == pytest.approx(360)
        assert 72 * 2 * part.tf32_tflops / 1e3 == pytest.approx(180)
        assert 72 * part.hbm_tbps == pytest.approx(576)
        assert 72 * part.scaleup_gbps / 1e3 == pytest.approx(130, rel=0.01)
        assert part.scaleup_links == 18
    assert 72 * 2 * gb200.fp4_tflops / 1e3 == pytest.approx(1_440)
    assert 72 * gb200.hbm_gib / 1e3 == pytest.approx(13.4, rel=0.01)
    assert 72 * gb300.fp4_tflops / 1e3 == pytest.approx(1_080)
    assert (gb300.hbm_gib, gb200.tdp_w, gb300.tdp_w) == (288, 1_200, 1_400)
    # FP4 runs at twice FP8 on Blackwell, three times on Blackwell Ultra
    assert gb200.fp4_tflops == 2 * gb200.fp8_tflops
    assert gb300.fp4_tflops == 3 * gb300.fp8_tflops


def test_hbm_boards_and_fp4() -> None:
    """Hopper and Ampere have no FP4 (left empty, not zero); HGX boards are 8-card
    NVLink domains; B200's dense figures are the HGX B200 board's ÷ 8 ÷ 2 (FP4 144 PF,
    FP8 72 PF, BF16 36 PF, TF32 18 PF sparse)."""
    for slug in ("h100-sxm5-80gb", "h200-sxm-141gb", "a100-sxm-80gb"):
        part = get(slug)
        assert part.fp4_tflops is None and part.nvlink_domain_cards == 8
    b200 = get("b200-sxm-180gb")
    assert (b200.fp4_tflops, b200.fp8_tflops, b200.bf16_tflops, b200.tf32_tflops) == (
        144_000 / 16, 72_000 / 16, 36_000 / 16, 18_000 / 16)
    assert (b200.nvlink_domain_cards, b200.hbm_gib, b200.tdp_w) == (8, 180, 1_000)
    h100, h200 = get("h100-sxm5-80gb"), get("h200-sxm-141gb")
    assert (h100.fp8_tflops, h100.bf16_tflops, h100.hbm_tbps) == (1979, 989.5, 3.35)
    assert (h200.fp8_tflops, h200.hbm_gib, h200.hbm_tbps) == (1979, 141, 4.8)
    for part in AcceleratorType.objects.all():
        assert part.source.startswith("https://") and part.notes, part
        part.full_clean()


def test_the_new_figures_are_bounded_in_clean_and_in_the_database() -> None:
    part = get("gb200-186gb")
    part.fp4_tflops, part.nvlink_domain_cards = -1, 0
    with pytest.raises(ValidationError) as bad:
        part.full_clean()
    assert {"fp4_tflops", "nvlink_domain_cards"} <= set(bad.value.message_dict)
    for change in ({"fp4_tflops": -1}, {"nvlink_domain_cards": 0}):
        with pytest.raises(IntegrityError), transaction.atomic():
            AcceleratorType.objects.filter(slug="gb200-186gb").update(**change)


def test_the_api_shows_and_validates_them(reader_client, admin_client_api) -> None:
    listed = reader_client.get(reverse("api:acceleratortype-list"), {"slug": "gb300-288gb"})
    (row,) = listed.json()["results"]
    assert (row["fp4_tflops"], row["nvlink_domain_cards"]) == (15_000, 72)
    pk = row["id"]
    refused = admin_client_api.patch(reverse("api:acceleratortype-detail", args=[pk]),
                                     {"fp4_tflops": -5, "nvlink_domain_cards": 0},
                                     format="json")
    assert refused.status_code == 400
    assert {"fp4_tflops", "nvlink_domain_cards"} <= set(refused.json())
    assert get("gb300-288gb").fp4_tflops == 15_000


def test_the_simulation_figures_carry_the_nvlink_domain() -> None:
    """``nvlink_domain_cards`` is the key the training model reads from the figures."""
    assert {"fp4_tflops", "nvlink_domain_cards"} <= set(ACCELERATOR_FIELDS)
    figures = accelerator_figures("gb200-186gb")
    assert figures is not None
    assert (figures["nvlink_domain_cards"], figures["fp4_tflops"]) == (72, 10_000)
    assert accelerator_figures("h100-sxm5-80gb")["nvlink_domain_cards"] == 8


def test_the_admin_shows_fp4_and_the_nvlink_domain(admin_user) -> None:
    client = Client()
    client.force_login(admin_user)
    listing = client.get(reverse("admin:hardware_acceleratortype_changelist"))
    assert listing.status_code == 200
    html = listing.content.decode()
    assert "NVIDIA GB300 (NVL72) 288GB" in html and "FP4 TFLOP/s" in html
    assert "NVLink domain (cards)" in html
    form = client.get(reverse("admin:hardware_acceleratortype_change",
                              args=[get("gb200-186gb").pk]))
    assert form.status_code == 200
    body = form.content.decode()
    assert 'name="fp4_tflops"' in body and 'name="nvlink_domain_cards"' in body
