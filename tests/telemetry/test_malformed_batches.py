"""Malformed batches that were a 500 (issue 11, items 5 and 6): now a 400 naming the
field, or a rejected sample with its reason, and nothing queued for a 400.

Huge card ids (past 64 bits) in the row and columnar forms, JSON nested 100,000
levels deep (a ``RecursionError``), msgpack errors whose message was empty,
values and timestamps past the float range, map keys that cannot be keys, and
``+Inf`` in a Prometheus exposition, which was counted as DCGM's "not
supported" sentinel instead of refused as infinite.
"""
from __future__ import annotations

import json

import msgpack
import pytest

from tests.telemetry.conftest import batches_url, metrics_url
from twin.telemetry import keys, state
from twin.telemetry.models import TelemetryAgent

HUGE = 99999999999999999999999


def post(world: dict, body: bytes | str, content_type: str = "application/json") -> object:
    return world["client"].post(batches_url(world["cluster"].pk), body,
                                content_type=content_type)


def stream_length() -> int:
    r = state.redis_client()
    return r.xlen(keys.stream()) if r.exists(keys.stream()) else 0


def refused(response: object, field: str | None, contains: str = "") -> dict:
    assert response.status_code == 400, response.content
    body = response.json()
    assert body.get("field") == field, body
    assert body["detail"] and contains in body["detail"], body
    assert stream_length() == 0, "a refused batch was queued"
    return body


def nothing_recorded(world: dict) -> None:
    row = TelemetryAgent.objects.get(pk=world["agent"].pk)
    assert row.last_sequence is None and row.batches == 0


# --- card ids past 64 bits ----------------------------------------------------------

@pytest.mark.parametrize("card", [HUGE, 2**63, -(2**63) - 1, 10**400])
def test_a_row_card_id_past_64_bits_is_400_on_that_card(agent, card):
    cards = [{"card": agent["cards"][0].pk, "gpu_util": 5}, {"card": card, "gpu_util": 5}]
    body = refused(post(agent, json.dumps({"seq": 1, "cards": cards})), "cards[1].card",
                   "64-bit")
    assert len(body["detail"]) < 300  # the number is not echoed whole
    nothing_recorded(agent)


@pytest.mark.parametrize("card", [HUGE, 2**63, -(2**63) - 1])
def test_a_columnar_card_id_past_64_bits_is_400_on_that_id(agent, card):
    doc = {"seq": 1, "cards": {"ids": [agent["cards"][0].pk, card]},
           "columns": {"gpu_util": [1, 2]}}
    refused(post(agent, json.dumps(doc)), "cards.ids[1]", "64-bit")
    nothing_recorded(agent)


def test_a_msgpack_uint64_card_id_is_400(agent):
    doc = {"seq": 1, "cards": [{"card": 2**64 - 1, "gpu_util": 5}]}
    refused(post(agent, msgpack.packb(doc), "application/msgpack"), "cards[0].card")


def test_a_64_bit_id_of_no_card_is_still_a_rejected_sample(agent):
    """Inside 64 bits an id is an id: naming no card of the cluster rejects the sample
    (as before), it does not refuse the batch."""
    doc = {"seq": 1, "cards": [{"card": 2**63 - 1, "gpu_util": 5},
                               {"card": agent["cards"][0].pk, "gpu_util": 6}]}
    response = post(agent, json.dumps(doc))
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["accepted"] == 1
    assert body["rejected"] == [{"index": 0, "card": 2**63 - 1,
                                 "reason": "unknown card: not in this cluster"}]


def test_a_columnar_range_past_the_layout_is_400(agent):
    lay = state.layout(agent["cluster"].pk)
    doc = {"seq": 1, "cards": {"range": [0, HUGE], "layout": lay.version},
           "columns": {"gpu_util": [1]}}
    refused(post(agent, json.dumps(doc)), "cards.range", "outside the layout")


# --- nesting ----------------------------------------------------------------------------

def test_json_nested_100000_levels_is_400_nesting_too_deep(agent):
    refused(post(agent, "[" * 100_000 + "]" * 100_000), None, "nesting too deep")
    deep_inside = '{"seq": 1, "cards": [{"card": 1, "gpu_util": ' + "[" * 100 + "]" * 100 + "}]}"
    refused(post(agent, deep_inside), None, "nesting too deep")
    nothing_recorded(agent)


def test_msgpack_nested_deeply_is_400_nesting_too_deep(agent):
    for depth in (100_000, 100):
        body = b"\x82\xa3seq\x01\xa1x" + b"\x91" * depth + b"\x90"  # {"seq": 1, "x": [[…]]}
        refused(post(agent, body, "application/msgpack"), None, "nesting too deep")
    value: object = 1
    for _ in range(70):
        value = [value]
    doc = {"seq": 1, "cards": [{"card": agent["cards"][0].pk, "gpu_util": value}]}
    refused(post(agent, msgpack.packb(doc), "application/msgpack"), None, "nesting too deep")


def test_moderate_nesting_is_still_read(agent):
    """The limit is far above what a batch needs: a value nested 40 levels deep is a
    rejected sample ("not a number"), as before."""
    value: object = 1
    for _ in range(40):
        value = [value]
    doc = {"seq": 1, "cards": [{"card": agent["cards"][0].pk, "gpu_util": value}]}
    response = post(agent, json.dumps(doc))
    assert response.status_code == 202, response.content
    assert response.json()["rejected"][0]["reason"] == "not a number: a list"


# --- msgpack errors say why ------------------------------------------------------------

@pytest.mark.parametrize(("body", "reason"), [
    (b"\xc1", "0xc1 is reserved"),
    (b"\x81\x92\x01\x02\x01", "keys must be strings or numbers"),
    (b"\x81\x81\x01\x02\x01", "keys must be strings or numbers"),
    (b"\x81\xa3seq\x01\x01", "extra bytes"),
    (b"\x92\x01", "incomplete input"),
    (b"\x81\xa2\xff\xfe\x01", "not UTF-8"),
])
def test_a_msgpack_error_says_why(agent, body, reason):
    answer = refused(post(agent, body, "application/msgpack"), None, reason)
    assert not answer["detail"].endswith(": "), answer


# --- numbers past the float range -------------------------------------------------------

def test_a_value_past_the_float_range_is_a_rejected_sample(agent):
    c0, c1 = agent["cards"][0].pk, agent["cards"][1].pk
    rows = {"seq": 1, "cards": [{"card": c0, "gpu_util": 10**400},
                                {"card": c1, "gpu_util": -(10**400), "power_w": 500}]}
    response = post(agent, json.dumps(rows))
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["accepted"] == 1 and body["values"] == 1 and body["rejected_total"] == 2
    assert body["rejected"][0]["reason"].startswith("above the valid range")
    assert body["rejected"][1]["reason"].startswith("below the valid range")
    columns = {"seq": 2, "cards": {"ids": [c0, c1]}, "columns": {"gpu_util": [10**400, 7]}}
    response = post(agent, json.dumps(columns))
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["values"] == 1 and body["rejected_total"] == 1
    assert body["rejected"][0]["card"] == c0


@pytest.mark.parametrize("ts", [10**400, float("inf"), "9" * 5000])
def test_a_timestamp_past_the_float_or_date_range_is_400_on_ts(agent, ts):
    doc = {"seq": 1, "ts": ts, "cards": [{"card": agent["cards"][0].pk, "gpu_util": 1}]}
    refused(post(agent, json.dumps(doc)), "ts")


# --- infinities in an exposition ---------------------------------------------------------

def test_inf_in_an_exposition_is_rejected_as_infinite_not_dropped_as_unsupported(agent):
    text = ('DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="node0"} +Inf\n'
            'DCGM_FI_DEV_POWER_USAGE{gpu="1",Hostname="node0"} -Inf\n'
            'DCGM_FI_DEV_GPU_TEMP{gpu="2",Hostname="node0"} 9223372036854775794\n'
            'DCGM_FI_DEV_GPU_UTIL{gpu="3",Hostname="node0"} 50\n')
    response = agent["client"].post(metrics_url(agent["cluster"].pk), text.encode(),
                                    content_type="text/plain")
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["dropped"] == {"not_supported": 1}  # only the real DCGM sentinel
    assert [(r["line"], r["value"], r["reason"]) for r in body["rejected"]] == [
        (1, "inf", "infinite value"), (2, "-inf", "infinite value")]
    assert body["accepted"] == 1
