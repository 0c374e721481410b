"""The builder and its presets: counts, wiring, budgets, validation, all-or-nothing."""
from __future__ import annotations

import re
from collections import Counter

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, F, Max, Q

from twin.hardware.builder import (
    BuildError,
    build_cluster,
    check_build,
    check_foreign_keys,
    plan_build,
)
from twin.hardware.constants import CARD_ENDPOINT, allowed_link_kinds
from twin.hardware.models import (
    Card,
    Cluster,
    ClusterBuild,
    Link,
    NetworkDevice,
    Rack,
    Server,
    SuperNode,
)
from twin.hardware.presets import PRESETS, design_fabric, torus_links

HARDWARE = (Cluster, SuperNode, Rack, Server, Card, NetworkDevice, Link)


def row_counts() -> dict[str, int]:
    return {m.__name__: m.objects.count() for m in HARDWARE}


def assert_valid_sample(cluster: Cluster, per_model: int = 25) -> None:
    """Rows written by COPY/executemany pass the same clean() as the admin/API."""
    querysets = [
        SuperNode.objects.filter(cluster=cluster),
        Rack.objects.filter(cluster=cluster),
        Server.objects.filter(rack__cluster=cluster),
        Card.objects.filter(supernode__cluster=cluster),
        NetworkDevice.objects.filter(cluster=cluster),
        Link.objects.filter(cluster=cluster),
    ]
    for qs in querysets:
        ids = list(qs.values_list("pk", flat=True))
        step = max(1, len(ids) // per_model)
        for obj in qs.model.objects.filter(pk__in=ids[::step] + ids[-1:]):
            obj.full_clean()


def assert_link_ends_compatible(cluster: Cluster) -> None:
    # exactly one of card/device per end is a DB constraint: no device kind means a card
    combos = (Link.objects.filter(cluster=cluster)
              .values_list("kind", "a_device__kind", "b_device__kind").distinct())
    assert combos
    for kind, a, b in combos:
        assert kind in allowed_link_kinds(a or CARD_ENDPOINT, b or CARD_ENDPOINT), (kind, a, b)


@pytest.fixture
def seed(db):
    return build_cluster("seed-512")


def test_seed_512_counts(seed):
    assert seed["name"] == "seed-512"
    assert (seed["supernodes"], seed["cards"], seed["servers"]) == (1, 512, 64)
    # 64 servers of 7,800 W, 5 per 40 kW rack → 13 racks; 4 switches → 1 network rack;
    # 2 file-system appliances → 1 storage rack
    assert (seed["racks_per_supernode"], seed["network_racks"], seed["storage_racks"],
            seed["racks"]) == (13, 1, 1, 15)
    # per server 2 PCIe switches + 2 NICs; 2 leaves + 2 spines; 2 appliances
    assert seed["devices"] == 64 * 4 + 4 + 2 == 262
    torus, card_switch, switch_nic, nic_leaf, leaf_spine = 1536, 512, 128, 128, 2 * 64
    assert seed["links"] == torus + card_switch + switch_nic + nic_leaf + leaf_spine == 2432
    cluster = Cluster.objects.get(pk=seed["cluster_id"])
    assert cluster.preset == "seed-512"
    assert Card.objects.filter(supernode__cluster=cluster).count() == 512
    assert Server.objects.filter(rack__cluster=cluster).count() == 64
    assert Rack.objects.filter(cluster=cluster).count() == 15
    assert Rack.objects.filter(cluster=cluster, supernode__isnull=False).count() == 13
    assert NetworkDevice.objects.filter(cluster=cluster).count() == 262
    assert Link.objects.filter(cluster=cluster).count() == 2432
    kinds = Counter(Link.objects.filter(cluster=cluster).values_list("kind", flat=True))
    assert kinds == {"scale_up": 1536, "pcie": 640, "roce": 256}
    sn = SuperNode.objects.get(cluster=cluster)
    assert (sn.fabric, sn.dims, sn.card_count) == ("torus3d", (8, 8, 8), 512)


def test_seed_512_no_rack_over_budget_in_sql(seed):
    racks = Rack.objects.filter(cluster_id=seed["cluster_id"])
    assert racks.over_budget().count() == 0
    power = racks.with_power()
    assert power.aggregate(m=Max("power_w"))["m"] == seed["max_rack_w"] == 39_000
    assert sum(r.power_w for r in power) == seed["it_power_w"]
    # 12 full racks of 5 servers and one of 4
    per_rack = Counter(racks.filter(supernode__isnull=False)
                       .annotate(n=Count("servers")).values_list("n", flat=True))
    assert per_rack == {5: 12, 4: 1}


def test_seed_512_torus_wiring(seed):
    cluster_id = seed["cluster_id"]
    scale_up = Link.objects.filter(cluster_id=cluster_id, kind="scale_up")
    degree = Counter()
    for a, b in scale_up.values_list("a_card_id", "b_card_id"):
        degree[a] += 1
        degree[b] += 1
    assert len(degree) == 512 and set(degree.values()) == {6}   # ±x, ±y, ±z
    cards = {c.pk: c for c in Card.objects.filter(supernode__cluster_id=cluster_id)}
    wraps = 0
    for a, b in scale_up.values_list("a_card_id", "b_card_id"):
        ca, cb = cards[a], cards[b]
        diffs = [(q - p) % 8 for p, q in ((ca.x, cb.x), (ca.y, cb.y), (ca.z, cb.z))]
        assert sorted(diffs) == [0, 0, 1]                     # exactly one step on one axis
        wraps += max(ca.x, ca.y, ca.z, cb.x, cb.y, cb.z) == 7 and 0 in (cb.x, cb.y, cb.z) \
            and (ca.x == 7 and cb.x == 0 or ca.y == 7 and cb.y == 0 or ca.z == 7 and cb.z == 0)
    assert wraps == 3 * 64                                      # wrap-around on every ring
    card = Card.objects.get(supernode__cluster_id=cluster_id, index=8 * 8 * 3 + 8 * 2 + 5)
    assert (card.x, card.y, card.z) == (5, 2, 3)
    assert card.slot == card.index % 8


def test_seed_512_access_and_network_tiers(seed):
    cluster_id = seed["cluster_id"]
    links = Link.objects.filter(cluster_id=cluster_id)
    # every card has one PCIe link to a PCIe switch of its own server
    card_pcie = links.filter(a_card__isnull=False, b_device__kind="pcie_switch")
    assert card_pcie.count() == 512
    assert card_pcie.filter(~Q(b_device__server=F("a_card__server"))).count() == 0
    assert links.filter(a_device__kind="pcie_switch", b_device__kind="smart_nic",
                        a_device__server=F("b_device__server")).count() == 128
    nic_leaf = links.filter(a_device__kind="smart_nic", b_device__kind="leaf")
    assert nic_leaf.count() == 128
    # rail-optimised: leaf 0 takes every server's nic0, leaf 1 every nic1
    for leaf in NetworkDevice.objects.filter(cluster_id=cluster_id, kind="leaf"):
        names = {n[-4:] for n in nic_leaf.filter(b_device=leaf)
                 .values_list("a_device__name", flat=True)}
        assert len(names) == 1
    assert links.filter(a_device__kind="leaf", b_device__kind="spine").count() == 128
    switches = NetworkDevice.objects.filter(cluster_id=cluster_id, server__isnull=True)
    assert switches.exclude(kind="storage").filter(
        rack__supernode__isnull=True).count() == 4   # network racks only
    assert_link_ends_compatible(Cluster.objects.get(pk=cluster_id))


def test_seed_512_rows_pass_model_validation(seed):
    assert_valid_sample(Cluster.objects.get(pk=seed["cluster_id"]))


def test_serials_and_uuids_are_unique_across_clusters(seed):
    other = build_cluster("seed-512", name="seed-b")
    first = Card.objects.filter(supernode__cluster_id=seed["cluster_id"])
    second = Card.objects.filter(supernode__cluster_id=other["cluster_id"])
    assert not set(first.values_list("serial", flat=True)) & set(
        second.values_list("serial", flat=True))
    assert not set(first.values_list("uuid", flat=True)) & set(
        second.values_list("uuid", flat=True))
    assert all(re.fullmatch(rf"C{other['cluster_id']}-sn0000-g\d{{3}}", s)
               for s in second.values_list("serial", flat=True))
    # version-7 UUIDs, ordered like the cards (an index append, not random inserts)
    uuids = list(second.order_by("index").values_list("uuid", flat=True))
    assert all(u.version == 7 and u.variant == "specified in RFC 4122" for u in uuids)
    assert uuids == sorted(uuids, key=lambda u: u.bytes) and len(set(uuids)) == 512


def test_dgx_h100_superpod(db):
    r = build_cluster("dgx-h100-superpod")
    cluster_id = r["cluster_id"]
    assert (r["cards"], r["servers"]) == (256, 32)
    # 10.2 kW per DGX H100: 3 per 40 kW rack (NVIDIA racks 4 at 40.8 kW) → 11 racks per SU
    assert r["server_w"] == 10_200 and r["servers_per_rack"] == 3
    assert r["racks_per_supernode"] == 11 and r["max_rack_w"] == 30_600
    links = Link.objects.filter(cluster_id=cluster_id)
    assert links.filter(kind="scale_up").count() == 32 * 28      # NVLink full mesh per DGX
    for server in Server.objects.filter(rack__cluster_id=cluster_id)[:4]:
        in_server = links.filter(kind="scale_up", a_card__server=server,
                                 b_card__server=server).count()
        assert in_server == 28
    assert links.filter(a_card__isnull=False, b_device__kind="smart_nic").count() == 256
    ib = links.filter(kind="infiniband")
    assert ib.filter(b_device__kind="leaf").count() == 256
    assert ib.filter(a_device__kind="leaf", b_device__kind="spine").count() == 8 * 32
    assert NetworkDevice.objects.filter(cluster_id=cluster_id, kind="leaf").count() == 8
    # rail-optimised: each leaf serves one GPU index (rail) of all 32 DGX
    for leaf in NetworkDevice.objects.filter(cluster_id=cluster_id, kind="leaf"):
        slots = set(Card.objects.filter(links_a__b_device__links_a__b_device=leaf)
                    .values_list("slot", flat=True))
        assert len(slots) == 1
    assert Rack.objects.filter(cluster_id=cluster_id).over_budget().count() == 0
    rack = Rack.objects.filter(cluster_id=cluster_id).first()
    assert (rack.cooling, rack.pue) == ("air", 1.4)
    assert_link_ends_compatible(Cluster.objects.get(pk=cluster_id))
    assert_valid_sample(Cluster.objects.get(pk=cluster_id))


def test_dgx_supernodes_scale_scalable_units(db):
    r = build_cluster("dgx-h100-superpod", supernodes=2, name="two-su")
    assert (r["supernodes"], r["cards"], r["racks_per_supernode"]) == (2, 512, 11)
    assert SuperNode.objects.filter(cluster_id=r["cluster_id"], fabric="fat_tree").count() == 2


def test_million_plan_without_writing(db):
    before = row_counts()
    plan = plan_build("million")
    assert (plan.supernodes, plan.cards, plan.servers) == (2_048, 1_048_576, 131_072)
    assert plan.racks_per_supernode == 13
    assert plan.compute.fullest_rack_w == 39_000 <= plan.rack_budget_w == 40_000
    assert plan.max_rack_w <= 40_000 and plan.network.fullest_rack_w <= 40_000
    f = plan.fabric
    # 262,144 NIC ports on a non-blocking 3-tier fat tree of radix-128 switches
    assert f.endpoints == 131_072 * 2 and f.tiers == 3
    assert (f.leaves, f.spines, f.cores) == (4_096, 4_096, 2_048)
    assert f.leaves * 64 == f.endpoints                      # 64 down, 64 up per leaf
    assert f.leaf_spine_links == f.spine_core_links == f.endpoints   # no oversubscription
    assert f.cores * 128 == f.spine_core_links                # every core port used
    assert plan.network_racks == 10_240 // 16 == 640
    # the seeds' file system (100–200 GB/s) is 2 appliances whatever the card count
    assert (plan.pfs_appliances, plan.storage_racks) == (2, 1)
    assert plan.racks == 2_048 * 13 + 640 + 1
    assert plan.devices == 131_072 * 4 + 10_240 + 2 == 534_530
    assert plan.links == 2_048 * (1_536 + 512 + 128) + 3 * 262_144 == 5_242_880
    assert plan.it_power_w == 131_072 * 7_800 + 10_240 * 2_200 + 2 * 2_400
    assert row_counts() == before


def test_demo_preset_is_eight_seed_supernodes(db):
    plan = plan_build("demo")
    assert (plan.supernodes, plan.cards, plan.preset.default_name) == (8, 4_096, "demo")
    r = build_cluster("seed-512", supernodes=8, name="demo-like")
    assert r["cards"] == 4_096
    assert r["racks"] == 8 * 13 + r["network_racks"] + r["storage_racks"]
    assert Rack.objects.filter(cluster_id=r["cluster_id"]).over_budget().count() == 0


def test_fabric_design_bounds():
    assert design_fabric(64, 128).tiers == 1
    two = design_fabric(8_192, 128)                       # k²/2: the two-tier maximum
    assert (two.tiers, two.leaves, two.spines) == (2, 128, 64)
    assert design_fabric(8_193, 128).tiers == 3
    with pytest.raises(ValueError, match="exceed a 3-tier fat tree"):
        design_fabric(128 ** 3 // 4 + 1, 128)
    assert torus_links((8, 8, 8)) == 1_536 and torus_links((2, 2, 2)) == 12


def test_duplicate_name_fails_unless_replace(seed):
    with pytest.raises(BuildError) as err:
        build_cluster("seed-512")
    assert err.value.field == "name" and "--replace" in err.value.message
    old_id = seed["cluster_id"]
    ClusterBuild.objects.create(preset="seed-512", name="seed-512", cluster_id=old_id)
    again = build_cluster("seed-512", replace=True)
    assert again["cluster_id"] != old_id
    assert not Cluster.objects.filter(pk=old_id).exists()
    assert row_counts()["Card"] == 512 and row_counts()["Link"] == 2_432
    assert ClusterBuild.objects.get().cluster_id is None          # SET_NULL kept the record


def test_unknown_preset_lists_known(db):
    with pytest.raises(BuildError) as err:
        check_build("seed-1024")
    assert err.value.field == "preset"
    for name in PRESETS:
        assert name in err.value.message
    assert str(err.value) == err.value.message


@pytest.mark.parametrize("supernodes", [0, -3])
def test_supernodes_must_be_positive(db, supernodes):
    with pytest.raises(BuildError) as err:
        check_build("seed-512", supernodes=supernodes)
    assert err.value.field == "supernodes"


def test_too_many_supernodes_for_the_fabric(db):
    with pytest.raises(BuildError) as err:
        check_build("seed-512", supernodes=5_000)
    assert err.value.field == "supernodes" and "3-tier fat tree" in err.value.message


@pytest.mark.parametrize("budget", [0, -1])
def test_budget_must_be_positive(db, budget):
    with pytest.raises(BuildError) as err:
        check_build("seed-512", rack_budget_w=budget)
    assert err.value.field == "rack_budget_w" and "7,800 W" in err.value.message


def test_budget_too_small_says_what_fits_and_writes_nothing(db):
    before = row_counts()
    with pytest.raises(BuildError) as err:
        build_cluster("seed-512", name="tight", rack_budget_w=5_000)
    e = err.value
    assert e.field == "rack_budget_w"
    assert "One server draws 7,800 W" in e.message
    assert "at most 4 cards per server would fit" in e.message
    assert "at least 7,800 W" in e.message
    assert "\n" not in e.message
    assert row_counts() == before


def test_smaller_budget_means_more_racks(db):
    r = build_cluster("seed-512", name="tight", rack_budget_w=16_000)
    assert r["racks_per_supernode"] == 32 and r["max_rack_w"] == 15_600
    racks = Rack.objects.filter(cluster_id=r["cluster_id"])
    assert racks.over_budget().count() == 0
    assert set(racks.values_list("power_budget_w", flat=True)) == {16_000}


def test_check_build_writes_nothing(db):
    before = row_counts()
    check_build("million")
    check_build("seed-512", name="x", supernodes=3, rack_budget_w=30_000)
    assert row_counts() == before


def test_progress_is_reported_and_ends_at_one(db):
    seen: list[tuple[float, str]] = []
    build_cluster("seed-512", progress=lambda f, m: seen.append((f, m)))
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and len(seen) >= 6
    assert any("cards" in m for _, m in seen)


class Stop(Exception):
    pass


def _stop_half_way(fraction: float, message: str) -> None:
    if "links" in message:
        raise Stop(message)


def test_failure_mid_build_leaves_nothing(db):
    before = row_counts()
    with pytest.raises(Stop):
        build_cluster("seed-512", supernodes=2, progress=_stop_half_way)
    assert row_counts() == before


def test_failed_replace_keeps_the_old_cluster(seed):
    before = row_counts()
    with pytest.raises(Stop):
        build_cluster("seed-512", replace=True, progress=_stop_half_way)
    assert row_counts() == before
    assert Cluster.objects.filter(pk=seed["cluster_id"]).exists()


def test_row_by_row_foreign_key_checks_give_the_same_cluster(db, settings):
    """With set-based FK checks off (or not permitted) the database checks each row."""
    settings.TWIN_BUILDER_SET_BASED_FK = False
    r = build_cluster("seed-512", name="rows")
    assert r["fk_checks"] == "triggers"
    assert r["links"] == Link.objects.filter(cluster_id=r["cluster_id"]).count() == 2_432
    assert Rack.objects.filter(cluster_id=r["cluster_id"]).over_budget().count() == 0


def test_postgres_build_checks_foreign_keys_set_wise(seed):
    expected = "set-based" if connection.vendor == "postgresql" else "triggers"
    assert seed["fk_checks"] == expected


def test_foreign_key_check_finds_a_dangling_reference(seed):
    links = Link.objects.filter(cluster_id=seed["cluster_id"])
    lo, hi = min(links.values_list("id", flat=True)), max(links.values_list("id", flat=True))
    check_foreign_keys(Link, lo, hi)                              # the build's rows are sound
    missing_card = Card.objects.order_by("-id").values_list("id", flat=True)[0] + 1_000
    # Django's foreign keys are deferred: the bad row is accepted until commit
    with transaction.atomic():
        with connection.cursor() as cur:
            cur.execute("UPDATE hardware_link SET a_card_id = %s WHERE id = %s",
                        [missing_card, lo])
        with pytest.raises(IntegrityError, match="a_card: 1"):
            check_foreign_keys(Link, lo, hi)
        transaction.set_rollback(True)


def test_million_fat_tree_wiring_without_writing():
    """The 3-tier fabric only exists at million scale: check the generated rows
    (numpy, no database) for the fat-tree degrees."""
    import datetime as dt

    import numpy as np

    from twin.hardware.builder import Generator, IdBases

    plan = plan_build("million", card_tdp_w=700)
    f = plan.fabric
    gen = Generator(plan, cluster_id=1, cluster_name="m", accelerator_id=1,
                    ids=IdBases(1, 1, 1, 1, 1, 1), now=dt.datetime.now(dt.UTC))
    leaf0 = gen.switch_base()
    spine0, core0 = leaf0 + f.leaves, leaf0 + f.leaves + f.spines
    nic_leaf, leaf_spine, spine_core = [], [], []
    total = 0
    for block in gen._link_blocks():
        total += block.n
        a, b = block.values["a_device_id"], block.values["b_device_id"]
        if not isinstance(b, np.ndarray):
            continue
        if b.min() >= core0:
            spine_core.append((a, b))
        elif b.min() >= spine0 and a.min() >= leaf0:
            leaf_spine.append((a, b))
        elif b.min() >= leaf0:
            nic_leaf.append((a, b))
    assert total == plan.links
    nic_b = np.concatenate([b for _, b in nic_leaf]) - leaf0
    assert len(nic_b) == f.endpoints and set(np.bincount(nic_b)) == {64}   # 64 NICs per leaf
    ls_a = np.concatenate([a for a, _ in leaf_spine]) - leaf0
    ls_b = np.concatenate([b for _, b in leaf_spine]) - spine0
    assert set(np.bincount(ls_a)) == {64} and set(np.bincount(ls_b)) == {64}
    assert np.array_equal(ls_a // 64, ls_b // 64)                     # leaves meet their pod
    sc_a = np.concatenate([a for a, _ in spine_core]) - spine0
    sc_b = np.concatenate([b for _, b in spine_core]) - core0
    assert set(np.bincount(sc_a)) == {64} and set(np.bincount(sc_b)) == {128}
    assert np.array_equal(sc_b // f.cores_per_group, sc_a % 64)         # spine j → group j
    pods_per_core = {len(set((sc_a[sc_b == c] // 64).tolist())) for c in (0, 7, f.cores - 1)}
    assert pods_per_core == {64}                                       # every pod, 2 links each


def _analyze_statements_of_a_build() -> list[str]:
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        build_cluster("seed-512", supernodes=1)
    return [q["sql"] for q in ctx.captured_queries if q["sql"].startswith("ANALYZE")]


@pytest.mark.skipif(connection.vendor == "postgresql",
                    reason="the PostgreSQL build runs ANALYZE (the test below)")
def test_sqlite_build_runs_no_analyze(db):
    assert _analyze_statements_of_a_build() == []  # SQLite plans without statistics here


@pytest.mark.postgres_only
def test_postgres_build_leaves_planner_statistics(db):
    """A bulk load used to leave the planner blind until autovacuum came round
    (the dashboard's floor query: 5.9 s instead of 1.4 s at a million cards).
    ANALYZE counts the rows the build inserted, so pg_class.reltuples matches."""
    # The hardware tables (the facility built on the build's hook analyzes its own).
    analyzed = [sql for sql in _analyze_statements_of_a_build() if '"hardware_' in sql]
    tables = [m._meta.db_table for m in HARDWARE if m is not Cluster]
    assert sorted(analyzed) == sorted(f'ANALYZE "{t}"' for t in tables)
    with connection.cursor() as cur:
        for model in (Card, Link, Server):
            cur.execute("SELECT reltuples::bigint FROM pg_class WHERE relname = %s",
                        [model._meta.db_table])
            assert cur.fetchone()[0] == model.objects.count(), model.__name__
