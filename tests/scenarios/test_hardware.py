"""A cluster's own hardware as the training kinds read it (``twin.scenarios.hardware``)."""
from __future__ import annotations

import pytest

from twin.hardware.models import AcceleratorType, Card
from twin.scenarios.hardware import accelerator_figures, cluster_hardware
from twin.scenarios.inputs import ConversionError


def test_dgx_superpod_is_nvlink_servers_with_one_400g_nic_per_gpu(dgx_cluster,
                                                                  django_assert_max_num_queries):
    with django_assert_max_num_queries(10):
        hw = cluster_hardware(dgx_cluster)
    assert hw.accelerator["slug"] == "h100-sxm5-80gb" and hw.accelerator["bf16_tflops"] == 989.5
    assert (hw.cards, hw.cards_per_server) == (256, 8)
    # NVLink inside one DGX: 8 cards, the H100's 450 GB/s per direction = 3,600 Gb/s
    assert (hw.scale_up_kind, hw.scale_up_domain, hw.scale_up_technology) == \
        ("server_mesh", 8, "nvlink")
    assert hw.scale_up_gbps == pytest.approx(3600)
    # one ConnectX-7 (400G NDR InfiniBand) per GPU
    assert (hw.scale_out_gbps, hw.scale_out_technology) == (pytest.approx(400), "infiniband")
    assert hw.server_static_w == pytest.approx(4400)
    assert hw.pue >= 1.0 and hw.network_w_per_card > 0
    assert hw.to_dict()["accelerator"]["slug"] == "h100-sxm5-80gb"


def test_seed_torus_is_one_512_card_scale_up_domain(seed_cluster):
    hw = cluster_hardware(seed_cluster)
    assert (hw.cards, hw.scale_up_kind, hw.scale_up_domain) == (1024, "torus", 512)
    # 6 torus links of 600 Gb/s = the H100's 3,600 Gb/s per direction
    assert hw.scale_up_gbps == pytest.approx(3600)
    # two 400G NICs per 8-card server: 100 Gb/s per card, RoCE
    assert (hw.scale_out_gbps, hw.scale_out_technology) == (pytest.approx(100), "roce")
    assert hw.pue == pytest.approx(1.05)


def test_mixed_accelerators_are_refused_on_cluster(tiny_cluster):
    other = AcceleratorType.objects.get(slug="a100-sxm-80gb")
    Card.objects.filter(pk=tiny_cluster["cards"][0].pk).update(accelerator=other)
    with pytest.raises(ConversionError) as caught:
        cluster_hardware(tiny_cluster["cluster"])
    assert caught.value.field == "cluster" and "2 accelerator types" in caught.value.message


def test_accelerator_figures_are_the_catalogue_row(db):
    row = accelerator_figures("a100-sxm-80gb")
    assert row is not None and row["bf16_tflops"] == 312 and row["hbm_gib"] == 80
    assert accelerator_figures("no-such-card") is None
