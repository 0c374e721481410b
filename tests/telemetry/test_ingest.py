"""The ingest endpoints: authentication, every kind of bad input, sequence numbers.

Batches are applied in this process with ``drain_now()`` (the worker's code);
the end-to-end path through a real worker is in ``test_integration.py``.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import msgpack
import numpy as np
import pytest
from django.test import Client

from tests.telemetry.conftest import batches_url, drain_now, metrics_url
from twin.telemetry import keys, state
from twin.telemetry.config import conf
from twin.telemetry.models import TelemetryAgent

DATA = Path(__file__).parent / "data"


def post_json(client: Client, cluster_id: int, doc: object) -> object:
    return client.post(batches_url(cluster_id), json.dumps(doc), content_type="application/json")


def stream_length() -> int:
    r = state.redis_client()
    return r.xlen(keys.stream()) if r.exists(keys.stream()) else 0


def card_ids(world: dict) -> list[int]:
    return [c.pk for c in world["cards"]]


# --- authentication ----------------------------------------------------------

def test_missing_token_is_401_with_a_challenge(agent):
    response = Client().post(batches_url(agent["cluster"].pk), "{}",
                             content_type="application/json")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert "Authorization: Bearer" in response.json()["detail"]


def test_wrong_or_deactivated_token_is_401(agent):
    wrong = Client(HTTP_AUTHORIZATION="Bearer twa_not-a-token")
    assert post_json(wrong, agent["cluster"].pk, {"seq": 1, "cards": []}).status_code == 401
    TelemetryAgent.objects.filter(pk=agent["agent"].pk).update(is_active=False)
    from twin.telemetry.api import ingest_views

    ingest_views._cache.clear()
    response = post_json(agent["client"], agent["cluster"].pk, {"seq": 1, "cards": []})
    assert response.status_code == 401


def test_another_clusters_token_is_403_and_nothing_is_stored(agent, issue_agent):
    from twin.hardware.models import Cluster

    other = Cluster.objects.create(name="other")
    _, token = issue_agent(other, "intruder")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    doc = {"seq": 1, "cards": [{"card": agent["cards"][0].pk, "gpu_util": 50}]}
    response = post_json(client, agent["cluster"].pk, doc)
    assert response.status_code == 403
    assert f"cluster {other.pk}" in response.json()["detail"]
    assert stream_length() == 0


def test_the_token_scheme_may_be_token_or_bearer(agent):
    client = Client(HTTP_AUTHORIZATION=f"Token {agent['token']}")
    doc = {"seq": 1, "cards": [{"card": agent["cards"][0].pk, "gpu_util": 50}]}
    assert post_json(client, agent["cluster"].pk, doc).status_code == 202


# --- malformed bodies: 400 and nothing stored ---------------------------------

@pytest.mark.parametrize(("body", "content_type", "status", "needle"), [
    (b"{not json", "application/json", 400, "not valid"),
    (b"[1, 2]", "application/json", 400, "must be an object"),
    (b'{"cards": []}', "application/json", 400, "seq"),
    (b'{"seq": -1, "cards": []}', "application/json", 400, "seq"),
    (b'{"seq": "7", "cards": []}', "application/json", 400, "seq"),
    (b'{"seq": 1}', "application/json", 400, "cards"),
    (b'{"seq": 1, "ts": "yesterday", "cards": []}', "application/json", 400, "ISO 8601"),
    (b'{"seq": 1, "cards": [5]}', "application/json", 400, "cards[0]"),
    (b'{"seq": 1, "cards": [{"gpu_util": 5}]}', "application/json", 400, "names no card"),
    (b"\xc1\xc1", "application/msgpack", 400, "not valid"),
    (b"seq=1", "application/x-www-form-urlencoded", 415, "content type"),
])
def test_malformed_bodies_are_refused_and_nothing_is_stored(agent, body, content_type, status,
                                                            needle):
    response = agent["client"].post(batches_url(agent["cluster"].pk), body,
                                    content_type=content_type)
    assert response.status_code == status, response.content
    assert needle in response.json()["detail"]
    assert stream_length() == 0
    agent["agent"].refresh_from_db()
    assert agent["agent"].last_sequence is None and agent["agent"].batches == 0


def test_a_columnar_batch_with_a_short_column_is_refused_whole(agent):
    ids = card_ids(agent)
    doc = {"seq": 1, "cards": {"ids": ids},
           "columns": {"gpu_util": [50] * len(ids), "power_w": [500] * (len(ids) - 1)}}
    response = post_json(agent["client"], agent["cluster"].pk, doc)
    assert response.status_code == 400
    assert response.json() == {"detail": f"column power_w has {len(ids) - 1} values for "
                                         f"{len(ids)} cards", "field": "columns.power_w"}
    assert stream_length() == 0


def test_a_stale_layout_version_is_409(agent):
    doc = {"seq": 1, "cards": {"range": [0, 8], "layout": "nope"},
           "columns": {"gpu_util": [50] * 8}}
    response = post_json(agent["client"], agent["cluster"].pk, doc)
    assert response.status_code == 409 and "fetch" in response.json()["detail"]


def test_an_oversize_body_is_413(agent, settings):
    settings.TELEMETRY_MAX_BODY_BYTES = 1000
    doc = {"seq": 1, "cards": [{"card": agent["cards"][0].pk, "gpu_util": 1}] * 100}
    response = post_json(agent["client"], agent["cluster"].pk, doc)
    assert response.status_code == 413
    assert response.json()["limit"] == 1000
    assert stream_length() == 0


# --- rejected samples: listed, the valid rest kept ------------------------------

def test_row_form_keeps_valid_samples_and_lists_each_rejected_one(agent):
    c0, c1, c2 = card_ids(agent)[:3]
    body = (
        '{"seq": 1, "cards": ['
        f'{{"card": {c0}, "gpu_util": 97.5, "power_w": 655, "gpu_temp_c": 71}},'
        f'{{"card": {c1}, "gpu_util": NaN, "power_w": -3, "gpu_temp_c": 1e6, "hbm_used_gib": 60,'
        ' "made_up": 1},'
        '{"card": 424242, "gpu_util": 50},'
        f'{{"uuid": "GPU-{agent["cards"][2].uuid}", "metrics": {{"gpu_util": 12}}}},'
        '{"host": "node0", "gpu": 3, "gpu_util": 33}'
        "]}"
    )
    response = agent["client"].post(batches_url(agent["cluster"].pk), body,
                                    content_type="application/json")
    assert response.status_code == 202, response.content
    answer = response.json()
    reasons = {(r.get("card"), r.get("metric")): r["reason"] for r in answer["rejected"]}
    assert reasons == {
        (c1, "gpu_util"): "NaN is not a reading",
        (c1, "power_w"): "negative value",
        (c1, "gpu_temp_c"): "above the valid range (1e+06 > 130 °C)",
        (c1, "made_up"): "unknown metric",
        (424242, None): "unknown card: not in this cluster",
    }
    assert answer["rejected_total"] == 5
    assert answer["accepted"] == 4 and answer["values"] == 6
    drain_now()
    cid = agent["cluster"].pk
    util = state.latest(cid, "gpu_util", card_ids(agent)[:4])
    assert util[0] == pytest.approx(97.5) and np.isnan(util[1])
    assert util[2] == pytest.approx(12) and util[3] == pytest.approx(33)
    assert state.latest(cid, "hbm_used_gib", [c1])[0] == pytest.approx(60)
    assert np.isnan(state.latest(cid, "power_w", [c1])[0])


def test_timestamps_far_in_the_future_or_past_are_rejected(agent):
    cid = agent["cluster"].pk
    c0, c1, c2 = card_ids(agent)[:3]
    now = time.time()
    future = post_json(agent["client"], cid, {"seq": 1, "ts": now + 7200,
                                              "cards": [{"card": c0, "gpu_util": 1}]}).json()
    assert future["accepted"] == 0 and future["rejected_total"] == 1
    assert "in the future" in future["rejected"][0]["reason"]
    past = post_json(agent["client"], cid, {"seq": 2, "ts": "2001-01-01T00:00:00Z",
                                            "cards": [{"card": c0, "gpu_util": 1}]}).json()
    assert past["accepted"] == 0 and "in the past" in past["rejected"][0]["reason"]
    mixed = post_json(agent["client"], cid, {"seq": 3, "cards": [
        {"card": c1, "ts": now - 1, "gpu_util": 10},
        {"card": c2, "ts": now + 86400, "gpu_util": 20}]}).json()
    assert mixed["accepted"] == 1
    assert mixed["rejected"] == [{"index": 1, "card": c2,
                                  "reason": mixed["rejected"][0]["reason"]}]
    assert "future" in mixed["rejected"][0]["reason"]
    drain_now()
    values = state.latest(cid, "gpu_util", [c0, c1, c2])
    assert np.isnan(values[0]) and values[1] == 10 and np.isnan(values[2])
    assert state.last_seen(cid, [c1])[0] == pytest.approx(now - 1)


def test_columnar_json_with_ids_unknown_cards_and_bad_values(agent):
    cid = agent["cluster"].pk
    ids = card_ids(agent)
    doc = {"seq": 1, "cards": {"ids": [*ids[:4], 999999]},
           "columns": {"gpu_util": [10, None, 30, 400, 50], "power_w": [100, 200, -1, 400, 500],
                       "bogus": [1, 2, 3, 4, 5]}}
    answer = post_json(agent["client"], cid, doc).json()
    rejected = {(r.get("card"), r.get("metric")): r["reason"] for r in answer["rejected"]}
    assert rejected == {
        (ids[3], "gpu_util"): "above the valid range (400 > 100 %)",
        (ids[2], "power_w"): "negative value",
        (None, "bogus"): "unknown metric",
        (999999, None): "unknown card: not in this cluster",
    }
    assert answer["accepted"] == 4
    drain_now()
    util = state.latest(cid, "gpu_util", ids[:4])
    assert util[0] == 10 and np.isnan(util[1]) and util[2] == 30 and np.isnan(util[3])


def test_columnar_msgpack_float32_over_a_layout_range(agent):
    cid = agent["cluster"].pk
    lay = state.layout(cid)
    power = np.linspace(100, 800, lay.n).astype("<f4")
    power[5] = np.nan  # no reading for that card: float32 has no null
    power[6] = 5000  # absurd
    doc = {"seq": 1, "ts": time.time(), "cards": {"range": [0, lay.n], "layout": lay.version},
           "columns": {"power_w": power.tobytes(),
                       "gpu_util": np.full(lay.n, 50, "<f4").tobytes()}}
    response = agent["client"].post(batches_url(cid), msgpack.packb(doc),
                                     content_type="application/msgpack")
    answer = response.json()
    assert response.status_code == 202
    assert answer["accepted"] == lay.n and answer["values"] == 2 * lay.n - 2
    assert [(r["card"], r["metric"]) for r in answer["rejected"]] == [
        (int(lay.card_ids[6]), "power_w")]
    drain_now()
    got = state.latest(cid, "power_w")
    expected = power.astype(np.float64)
    expected[6] = np.nan
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_a_card_listed_twice_keeps_the_last_value(agent):
    cid = agent["cluster"].pk
    c0 = card_ids(agent)[0]
    answer = post_json(agent["client"], cid, {"seq": 1, "cards": [
        {"card": c0, "gpu_util": 1}, {"card": c0, "gpu_util": 2}]}).json()
    assert answer["rejected"][0]["reason"].startswith("duplicate card")
    drain_now()
    assert state.latest(cid, "gpu_util", [c0])[0] == 2


# --- sequence numbers ------------------------------------------------------------

def test_a_repeated_batch_is_ignored_and_a_gap_is_counted(agent, admin_client_api):
    cid = agent["cluster"].pk
    c0 = card_ids(agent)[0]

    def send(seq: int, util: float) -> dict:
        response = post_json(agent["client"], cid, {"seq": seq,
                                                    "cards": [{"card": c0, "gpu_util": util}]})
        assert response.status_code in (200, 202)
        return response.json() | {"status": response.status_code}

    assert send(1, 10)["status"] == 202
    again = send(1, 99)
    assert again["status"] == 200 and again["duplicate"] is True and again["accepted"] == 0
    assert stream_length() == 1
    jump = send(5, 50)
    assert jump["gap"] == 3 and not jump["duplicate"]
    assert send(4, 40)["duplicate"] is True  # late: behind the last sequence number
    drain_now()
    assert state.latest(cid, "gpu_util", [c0])[0] == 50
    restart = send(1, 20)
    assert restart["restart"] is True and not restart["duplicate"]
    body = admin_client_api.get(f"/api/telemetry/agents/{agent['agent'].pk}/").json()
    assert body["last_sequence"] == 1 and body["duplicates"] == 2
    assert body["gaps"] == 1 and body["missed_batches"] == 3 and body["restarts"] == 1
    assert body["batches"] == 5 and body["token"] is None


def test_the_sequence_survives_a_redis_restart_through_the_database(agent):
    cid = agent["cluster"].pk
    c0 = card_ids(agent)[0]
    post_json(agent["client"], cid, {"seq": 7, "cards": [{"card": c0, "gpu_util": 1}]})
    state.redis_client().delete(keys.agent_seq(agent["agent"].pk))
    again = post_json(agent["client"], cid, {"seq": 7, "cards": [{"card": c0, "gpu_util": 1}]})
    assert again.status_code == 200 and again.json()["duplicate"] is True


def test_a_full_stream_answers_503_without_consuming_the_sequence(agent, settings):
    settings.TELEMETRY_MAX_BACKLOG = 1
    cid = agent["cluster"].pk
    c0 = card_ids(agent)[0]
    assert post_json(agent["client"], cid, {"seq": 1, "cards": [
        {"card": c0, "gpu_util": 1}]}).status_code == 202
    busy = post_json(agent["client"], cid, {"seq": 2, "cards": [{"card": c0, "gpu_util": 2}]})
    assert busy.status_code == 503 and busy["Retry-After"] == "1"
    # the refusal episode is noted from its first refusal, on Redis's clock (the
    # ticks do not call the refused cards silent: tickparts.ingest_lag_s)
    r = state.redis_client()
    first = int(r.get(keys.ingest_refused()))
    seconds, micros = r.time()
    assert 0 <= seconds * 1000 + micros // 1000 - first < 5_000
    assert post_json(agent["client"], cid, {"seq": 2, "cards": [
        {"card": c0, "gpu_util": 2}]}).status_code == 503
    assert int(r.get(keys.ingest_refused())) == first
    assert 0 < r.pttl(keys.ingest_refused()) <= 1000 * conf().stale_after_s
    drain_now()
    retry = post_json(agent["client"], cid, {"seq": 2, "cards": [{"card": c0, "gpu_util": 2}]})
    assert retry.status_code == 202 and retry.json()["duplicate"] is False


# --- Prometheus text -------------------------------------------------------------

def post_text(world: dict, text: str, **headers: str) -> object:
    return world["client"].post(metrics_url(world["cluster"].pk), text.encode(),
                                content_type="text/plain; version=0.0.4", **headers)


def test_a_captured_dcgm_exposition_is_mapped_to_cards(agent):
    text = (DATA / "dcgm_node0.prom").read_text()
    response = post_text(agent, text, HTTP_X_TELEMETRY_SEQ="1")
    assert response.status_code == 202, response.content
    answer = response.json()
    assert answer["broken_total"] == 0 and answer["accepted"] == 8
    assert answer["dropped"] == {"not_supported": 1, "unmapped_metric": 32}  # 4 fields × 8
    assert answer["rejected"] == [{"line": answer["rejected"][0]["line"],
                                   "card": "UUID=GPU-00000000-0000-0000-0000-000000000007",
                                   "metric": "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "value": "NaN",
                                   "reason": "NaN is not a reading"}]
    drain_now()
    cid, ids = agent["cluster"].pk, card_ids(agent)
    np.testing.assert_allclose(state.latest(cid, "gpu_util", ids), [90 + g for g in range(8)])
    np.testing.assert_allclose(state.latest(cid, "power_w", ids),
                               [600 + 7.123 * g for g in range(8)], rtol=1e-6)
    assert state.latest(cid, "hbm_used_gib", ids)[0] == pytest.approx(69503 / 1024)
    assert state.latest(cid, "tensor_active", ids)[0] == pytest.approx(61.2874, rel=1e-5)
    assert np.isnan(state.latest(cid, "tensor_active", ids)[6])
    assert state.latest(cid, "pcie_tx_gbps", ids)[0] == pytest.approx(9.87654321, rel=1e-6)
    assert state.latest(cid, "nvlink_gbps", ids)[0] == pytest.approx(312.0)
    mem = state.latest(cid, "mem_temp_c", ids)
    assert np.isnan(mem[5]) and mem[4] == 42  # 9223372036854775794: not supported, dropped


def test_hosts_match_by_hostname_or_Hostname_and_gpu_index(agent):
    text = ('DCGM_FI_DEV_GPU_TEMP{gpu="2",hostname="node0"} 61\n'
            'DCGM_FI_DEV_GPU_TEMP{gpu="3",Hostname="NODE0"} 62\n'
            'DCGM_FI_DEV_GPU_TEMP{gpu="9",Hostname="node0"} 63\n'
            'DCGM_FI_DEV_GPU_TEMP{gpu="1"} 64\n')
    answer = post_text(agent, text).json()
    assert answer["accepted"] == 2
    assert [r["reason"] for r in answer["rejected"]] == [
        "unknown card: not in this cluster",
        "no UUID label and no Hostname/hostname + gpu labels"]
    drain_now()
    temps = state.latest(agent["cluster"].pk, "gpu_temp_c", card_ids(agent)[2:4])
    assert list(temps) == [61, 62]


def test_prometheus_text_with_broken_lines_keeps_the_good_ones(agent):
    text = ('DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="node0"} 77\n'
            'DCGM_FI_DEV_GPU_UTIL{gpu="1",Hostname="node0" 78\n'
            'DCGM_FI_DEV_GPU_UTIL{gpu="2",Hostname="node0"} lots\n'
            'DCGM_FI_DEV_POWER_USAGE{gpu="0",Hostname="node0"} -20\n')
    answer = post_text(agent, text).json()
    assert answer["accepted"] == 1 and answer["broken_total"] == 2
    assert [b["line"] for b in answer["broken_lines"]] == [2, 3]
    assert answer["rejected"][0]["reason"] == "negative value"
    drain_now()
    assert state.latest(agent["cluster"].pk, "gpu_util", card_ids(agent)[:1])[0] == 77


def test_prometheus_text_that_is_all_broken_is_400(agent):
    response = post_text(agent, "this is not\nan exposition {{\n")
    assert response.status_code == 400
    assert response.json()["broken_total"] == 2
    assert stream_length() == 0
    bad_seq = post_text(agent, "up 1\n", HTTP_X_TELEMETRY_SEQ="x")
    assert bad_seq.status_code == 400 and bad_seq.json()["field"] == "X-Telemetry-Seq"


def test_prometheus_push_needs_text(agent):
    response = agent["client"].post(metrics_url(agent["cluster"].pk), b"{}",
                                    content_type="application/json")
    assert response.status_code == 415


def test_layout_and_whoami_for_agents(agent):
    cid = agent["cluster"].pk
    layout = agent["client"].get(f"/api/telemetry/clusters/{cid}/layout/").json()
    assert layout["count"] == 8 and sorted(layout["card_ids"]) == sorted(card_ids(agent))
    assert layout["layout"] == state.layout(cid).version
    me = agent["client"].get("/api/telemetry/whoami/").json()
    assert me == {"agent": agent["agent"].pk, "name": "agent", "cluster": cid,
                  "cluster_name": "tiny"}
    assert Client().get(f"/api/telemetry/clusters/{cid}/layout/").status_code == 401
