"""Prometheus remote write 1.0 at ``…/clusters/<id>/write``: the decoder, the mapping
(the DCGM text path's, exactly), every kind of bad request and its status code.

Requests are built with ``tests/telemetry/promwrite.py``; a real Prometheus
sending to a real server is ``test_remote_write_prometheus.py``.
"""
from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest
from django.test import Client

from tests.faults.away import redis_away
from tests.telemetry import promwrite
from tests.telemetry.conftest import drain_now, metrics_url
from twin.telemetry import prometheus, remote_write, state
from twin.telemetry.models import TelemetryAgent

pytestmark = pytest.mark.django_db

DATA = Path(__file__).parent / "data"
HEADERS = {"content_type": "application/x-protobuf", "HTTP_CONTENT_ENCODING": "snappy",
           "HTTP_X_PROMETHEUS_REMOTE_WRITE_VERSION": "0.1.0"}


def write_url(cluster_id: int) -> str:
    return f"/api/telemetry/clusters/{cluster_id}/write"


def now_ms() -> int:
    return int(time.time() * 1000)


def post(client: Client, cluster_id: int, raw: bytes, *, compress: bool = True, **headers):
    body = promwrite.snappy(raw) if compress else raw
    return client.post(write_url(cluster_id), body, **{**HEADERS, **headers})


def dcgm(name: str, value: float, *, gpu: int | None = None, host: str | None = None,
         uuid: str | None = None, ts: int | None = None, **extra: str):
    labels = {"__name__": name, "job": "dcgm", "instance": "node0:9400", **extra}
    if gpu is not None:
        labels["gpu"] = str(gpu)
    if host is not None:
        labels["Hostname"] = host
    if uuid is not None:
        labels["UUID"] = uuid
    return labels, [(value, now_ms() if ts is None else ts)]


# --- the decoder ---------------------------------------------------------------

def test_the_decoder_reads_a_write_request_spelled_out_byte_by_byte():
    """``up{} 1.0 @ 1000 ms`` written by hand from the wire format (no encoder)."""
    label = bytes([0x0A, 0x08]) + b"__name__" + bytes([0x12, 0x02]) + b"up"
    sample = bytes([0x09]) + bytes.fromhex("000000000000f03f") + bytes([0x10, 0xE8, 0x07])
    ts_body = bytes([0x0A, len(label)]) + label + bytes([0x12, len(sample)]) + sample
    raw = bytes([0x0A, len(ts_body)]) + ts_body
    [s] = remote_write.decode_write_request(raw)
    assert (s.name, s.labels, s.values, s.timestamps_ms) == ("up", {"__name__": "up"},
                                                             [1.0], [1000])


def test_the_decoder_skips_unknown_fields_and_keeps_negative_timestamps():
    labels = {"__name__": "x", "a": "b"}
    body = promwrite.series(labels, [(2.5, -5), (3.0, 7)])
    # An exemplar (field 3) inside the series and metadata (field 3) in the request.
    inner = body[2:] + promwrite.field(3, b"\x08\x01") + promwrite.varint(5 << 3) + b"\x01"
    raw = promwrite.field(1, inner) + promwrite.field(3, b"\x08\x01\x12\x01x")
    [s] = remote_write.decode_write_request(raw)
    assert s.labels == labels and s.values == [2.5, 3.0] and s.timestamps_ms == [-5, 7]


def test_staleness_markers_are_set_apart_from_readings():
    raw = promwrite.encode_request([({"__name__": "x"}, [(1.0, 1), (promwrite.STALE_NAN, 2),
                                                        (math.nan, 3)])])
    [s] = remote_write.decode_write_request(raw)
    assert s.stale == 1 and len(s.values) == 2 and math.isnan(s.values[1])


@pytest.mark.parametrize("raw, reason", [
    (promwrite.encode_request([({"__name__": "x"}, [(1.0, 1)])])[:-3], "truncated"),
    (b"\x0a\x7f\x0a", "past the end"),
    (b"\x0b", "wire type 3"),
    (b"\x00\x01", "field number 0"),
    (promwrite.field(1, promwrite.field(1, promwrite.field(1, b"\xff\xfe"))), "UTF-8"),
    (b"\x0a" + b"\xff" * 11, "varint"),
])
def test_the_decoder_names_what_is_wrong(raw, reason):
    with pytest.raises(remote_write.BadWriteRequest, match=reason):
        remote_write.decode_write_request(raw)


# --- mapping: the DCGM text path's ----------------------------------------------

def latest(cluster_id: int, metric: str, cards) -> list[float | None]:
    values = state.latest(cluster_id, metric, [c.pk for c in cards])
    return [None if np.isnan(v) else round(float(v), 3) for v in values]


def test_a_captured_dcgm_exposition_maps_exactly_as_the_text_path_does(agent):
    """The same exporter output, once as text to …/metrics/ and once as remote
    write: the same cards get the same values, and the same samples are dropped."""
    cluster, cards = agent["cluster"], agent["cards"]
    text = (DATA / "dcgm_node0.prom").read_text()
    samples, _, _ = prometheus.parse_exposition(text)
    ts = now_ms()
    items = [({"__name__": s.name, **s.labels}, [(s.value, ts)]) for s in samples]
    response = post(agent["client"], cluster.pk, promwrite.encode_request(items))
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["series"] == len(samples) and body["samples"] == len(samples)
    drain_now()
    metrics = ["sm_clock_mhz", "mem_temp_c", "power_w", "gpu_util", "tensor_active",
               "hbm_used_gib"]
    by_write = {m: latest(cluster.pk, m, cards) for m in metrics}
    from tests.telemetry.conftest import flush_namespace
    flush_namespace()
    text_answer = agent["client"].post(metrics_url(cluster.pk), text, content_type="text/plain")
    assert text_answer.status_code == 202
    drain_now()
    by_text = {m: latest(cluster.pk, m, cards) for m in metrics}
    assert by_write == by_text
    assert any(v is not None for v in by_write["power_w"])
    text_body = text_answer.json()
    assert body["dropped"] == text_body["dropped"]  # the "not supported" sentinels among them
    assert body["dropped"]["not_supported"] >= 1
    assert body["rejected_total"] == text_body["rejected_total"]
    assert body["accepted"] == text_body["accepted"]
    assert {r["reason"] for r in body["rejected"]} == {r["reason"] for r in text_body["rejected"]}
    assert all("series" in r for r in body["rejected"])


def test_cards_by_uuid_or_host_and_gpu_and_what_is_dropped(agent):
    cluster, cards = agent["cluster"], agent["cards"]
    items = [
        dcgm("DCGM_FI_DEV_POWER_USAGE", 301, uuid="GPU-00000000-0000-0000-0000-000000000001"),
        dcgm("DCGM_FI_DEV_POWER_USAGE", 302, gpu=1, host="node0"),
        dcgm("DCGM_FI_DEV_POWER_USAGE", 303, gpu=2, hostname="NODE0"),
        dcgm("DCGM_FI_DEV_POWER_USAGE", 9223372036854775794, gpu=3, host="node0"),
        dcgm("DCGM_FI_DEV_POWER_USAGE", math.nan, gpu=4, host="node0"),
        dcgm("DCGM_FI_DEV_POWER_USAGE", promwrite.STALE_NAN, gpu=5, host="node0"),
        dcgm("DCGM_FI_DEV_POWER_USAGE", 306, gpu=6, host="node0", GPU_I_ID="1"),
        dcgm("DCGM_FI_DEV_POWER_USAGE", 307, gpu=9, host="node0"),
        dcgm("scrape_duration_seconds", 0.01),
        dcgm("DCGM_FI_DEV_FB_USED", 40960, gpu=7, host="node0"),
    ]
    response = post(agent["client"], cluster.pk, promwrite.encode_request(items))
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["accepted"] == 4
    assert body["dropped"] == {"not_supported": 1, "stale_marker": 1, "mig_instance": 1,
                               "unmapped_metric": 1}
    reasons = {(r["series"], r["reason"]) for r in body["rejected"]}
    assert reasons == {(4, "NaN is not a reading"), (7, "unknown card: not in this cluster")}
    drain_now()
    assert latest(cluster.pk, "power_w", cards)[:4] == [301, 302, 303, None]
    assert latest(cluster.pk, "hbm_used_gib", cards)[7] == 40.0  # MiB → GiB as for text
    row = TelemetryAgent.objects.get(pk=agent["agent"].pk)
    assert row.batches == 1 and row.samples == 4 and row.rejected == 2


def test_a_metadata_only_request_is_a_success_that_stores_nothing(agent):
    raw = promwrite.field(3, b"\x08\x01\x12\x05DCGM_")
    response = post(agent["client"], agent["cluster"].pk, raw)
    assert response.status_code == 200 and response.json()["accepted"] == 0


def test_samples_too_old_are_rejected_with_the_reason(agent):
    old = now_ms() - 2 * 3600 * 1000
    response = post(agent["client"], agent["cluster"].pk, promwrite.encode_request(
        [dcgm("DCGM_FI_DEV_GPU_TEMP", 50, gpu=0, host="node0", ts=old)]))
    assert response.status_code == 200
    assert "in the past" in response.json()["rejected"][0]["reason"]


# --- bad requests: 4xx, nothing stored; 5xx only for what a retry can fix -----------

def good_request() -> bytes:
    return promwrite.encode_request([dcgm("DCGM_FI_DEV_GPU_TEMP", 50, gpu=0, host="node0")])


@pytest.mark.parametrize("body, status, words", [
    (b"\x00\x01\x02garbage", 400, "snappy"),
    (b"", 400, "snappy"),
    (promwrite.snappy(b"\x0a\x7f\x0a"), 400, "past the end"),
    (promwrite.snappy(b"\x0b\x00"), 400, "wire type"),
    (b"\xff\x06\x00\x00sNaPpY" + b"\x00" * 8, 400, "framed"),
    (promwrite.snappy(b"x")[:1] + b"\x00", 400, "snappy"),
])
def test_a_body_that_is_no_write_request_is_400_with_the_reason(agent, body, status, words):
    response = agent["client"].post(write_url(agent["cluster"].pk), body, **HEADERS)
    assert response.status_code == status, response.content
    assert words in response.json()["detail"]
    assert TelemetryAgent.objects.get(pk=agent["agent"].pk).batches == 0


@pytest.mark.parametrize("headers, words", [
    ({"content_type": "application/json"}, "content type"),
    ({"content_type": "application/x-protobuf;proto=io.prometheus.write.v2.Request"},
     "content type"),
    ({"HTTP_CONTENT_ENCODING": "gzip"}, "encoding"),
    ({"HTTP_CONTENT_ENCODING": ""}, "encoding"),
])
def test_wrong_headers_are_415_so_the_sender_does_not_retry(agent, headers, words):
    response = post(agent["client"], agent["cluster"].pk, good_request(), **headers)
    assert response.status_code == 415, response.content
    assert words in response.json()["detail"]


def test_token_and_cluster_are_checked_like_every_ingest_path(agent, issue_agent, db):
    from twin.hardware.models import Cluster

    cluster = agent["cluster"]
    assert post(Client(), cluster.pk, good_request()).status_code == 401
    other, token = issue_agent(Cluster.objects.create(name="other"), "elsewhere")
    foreign = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert post(foreign, cluster.pk, good_request()).status_code == 403
    assert post(agent["client"], 10**9, good_request()).status_code == 404


def test_a_body_over_the_limit_is_413_before_it_is_inflated(agent, settings):
    settings.TELEMETRY_MAX_BODY_BYTES = 4096
    items = [dcgm("DCGM_FI_DEV_GPU_TEMP", 50 + i % 10, gpu=i % 8, host="node0", pad="x" * i)
             for i in range(400)]
    raw = promwrite.encode_request(items)
    compressed = promwrite.snappy(raw)
    assert len(compressed) > 4096
    assert post(agent["client"], agent["cluster"].pk, raw).status_code == 413
    # Small on the wire, declaring a gigabyte inflated: refused from its header.
    bomb = promwrite.varint(10**9) + promwrite.snappy(b"\x0a\x00" * 1000)[2:]
    assert len(bomb) < 4096
    response = agent["client"].post(write_url(agent["cluster"].pk), bomb, **HEADERS)
    assert response.status_code == 413 and "decompresses" in response.json()["detail"]


def test_redis_away_is_503_with_retry_after(agent):
    with redis_away():
        response = post(agent["client"], agent["cluster"].pk, good_request())
    assert response.status_code == 503 and int(response["Retry-After"]) >= 1
    assert response.json()["service"] == "redis"
    # Back: the same request is stored.
    assert post(agent["client"], agent["cluster"].pk, good_request()).status_code == 200


def test_workers_behind_is_503_with_retry_after(agent, settings):
    settings.TELEMETRY_MAX_BACKLOG = 1
    assert post(agent["client"], agent["cluster"].pk, good_request()).status_code == 200
    response = post(agent["client"], agent["cluster"].pk, good_request())
    assert response.status_code == 503 and response["Retry-After"] == "1"


def test_labels_split_by_a_sample_are_still_one_series():
    """Protobuf allows fields in any order: labels after a sample belong to the series."""
    body = (promwrite.label("__name__", "x") + promwrite.sample(1.0, 5)
            + promwrite.label("gpu", "3") + promwrite.label("z", "9"))
    [s] = remote_write.decode_write_request(promwrite.field(1, body))
    assert s.labels == {"__name__": "x", "gpu": "3", "z": "9"} and s.values == [1.0]


def test_the_fast_path_reads_what_the_field_by_field_walk_reads():
    """Series of Prometheus' shape (labels, then one sample with a millisecond time)
    are read in bulk; the same series with a second sample are walked field by
    field: both give the same labels, values and times, staleness markers included."""
    ts = now_ms()
    items = [({"__name__": "DCGM_FI_DEV_GPU_TEMP", "gpu": str(g)}, [(40.0 + g, ts + g)])
             for g in range(5)] + [({"__name__": "x"}, [(promwrite.STALE_NAN, ts)])]
    fast = remote_write.decode_write_request(promwrite.encode_request(items))
    slow = remote_write.decode_write_request(promwrite.encode_request(
        [(labels, [*samples, (0.0, 1)]) for labels, samples in items]))
    assert [(s.labels, s.values, s.timestamps_ms, s.stale) for s in fast] == [
        (s.labels, s.values[:-1], s.timestamps_ms[:-1], s.stale) for s in slow]
    assert fast[-1].stale == 1 and fast[-1].values == []


def test_a_label_value_that_looks_like_a_sample_is_not_taken_for_one():
    """The last 18 bytes of this series spell a sample (tag, length 16, a double, a
    6-byte time) but are the end of a label's value: the series has no sample."""
    fake = "\x12\x10\x09" + "ABCDEFGH" + "\x10" + "€éA"
    raw = promwrite.encode_request([({"__name__": "x", "zz": fake}, [])])
    [s] = remote_write.decode_write_request(raw)
    assert s.labels == {"__name__": "x", "zz": fake} and s.values == []


def test_labels_in_any_field_order_and_long_values_are_read():
    """The label fast path takes only ``0A n 0A a name 12 b value`` with short lengths;
    fields swapped, a 20,000-byte value (three-byte lengths) or an unknown field inside a
    label go through the general reader and give the same labels."""
    swapped = promwrite.field(1, promwrite.field(2, b"v1") + promwrite.field(1, b"k1"))
    long_value = promwrite.label("k2", "x" * 20_000)  # a series over 16 kB: 3-byte length
    extra = promwrite.field(1, promwrite.field(1, b"k3") + promwrite.field(2, b"v3")
                            + promwrite.varint(3 << 3) + b"\x05")
    body = promwrite.label("__name__", "m") + swapped + long_value + extra
    body += promwrite.sample(1.5, now_ms())
    [s] = remote_write.decode_write_request(promwrite.field(1, body))
    assert s.labels == {"__name__": "m", "k1": "v1", "k2": "x" * 20_000, "k3": "v3"}
    assert s.values == [1.5]


def test_the_endpoint_s_decoder_gives_the_same_samples_in_the_same_order():
    """``decode_samples`` (straight to samples) and ``decode_write_request`` +
    ``samples_of`` agree on a request mixing bulk-read and walked series."""
    ts = now_ms()
    items = [({"__name__": "a", "gpu": "0"}, [(1.0, ts)]),
             ({"__name__": "b", "gpu": "1"}, [(2.0, 5), (3.0, 6)]),
             ({"__name__": "c", "gpu": "2"}, [(promwrite.STALE_NAN, ts)]),
             ({"__name__": "d", "gpu": "3"}, [(4.0, ts + 1)])]
    raw = promwrite.encode_request(items)
    samples, stale, counts = remote_write.decode_samples(raw)
    assert (samples, stale) == remote_write.samples_of(remote_write.decode_write_request(raw))
    assert [(s.name, s.value, s.timestamp_ms, s.line) for s in samples] == [
        ("a", 1.0, ts, 0), ("b", 2.0, 5, 1), ("b", 3.0, 6, 1), ("d", 4.0, ts + 1, 3)]
    assert stale == 1 and counts == {"series": 4, "samples": 5}
