"""Agents' sequence numbers: 64-bit bounds, exact comparison, Redis and the agent row.

Issue 11, item 3: ``{"seq": 9223372036854775808}`` was queued and stored in
Redis before the database refused it (500); every later batch was then a
"duplicate". Sequence numbers are now checked while parsing (0 … 2^63 − 1),
compared exactly in the Lua script (Redis numbers are doubles, exact to 2^53
only), and the agent row follows Redis in the same request.
"""
from __future__ import annotations

import json

import msgpack
import pytest
from django.db import connection

from tests.telemetry.conftest import batches_url, metrics_url
from twin.telemetry import keys, state
from twin.telemetry.ingest import MAX_SEQ
from twin.telemetry.models import TelemetryAgent

TWO_53 = 2**53


def send(world: dict, seq: object, util: float = 50.0, **options: object) -> object:
    doc = {"seq": seq, "cards": [{"card": world["cards"][0].pk, "gpu_util": util}]}
    if options.get("msgpack"):
        return world["client"].post(batches_url(world["cluster"].pk), msgpack.packb(doc),
                                    content_type="application/msgpack")
    return world["client"].post(batches_url(world["cluster"].pk), json.dumps(doc),
                                content_type="application/json")


def stream_length() -> int:
    r = state.redis_client()
    return r.xlen(keys.stream()) if r.exists(keys.stream()) else 0


def redis_seq(world: dict) -> int | None:
    value = state.redis_client().get(keys.agent_seq(world["agent"].pk))
    return None if value is None else int(value)


def row_seq(world: dict) -> int | None:
    return TelemetryAgent.objects.get(pk=world["agent"].pk).last_sequence


def accepted(response: object) -> dict:
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["duplicate"] is False and body["accepted"] == 1, body
    return body


def duplicate(response: object) -> dict:
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["duplicate"] is True and body["accepted"] == 0, body
    return body


def test_the_issue_repro_seq_past_64_bits_is_400_and_later_batches_are_accepted(agent):
    """The exact sequence of the issue: 22, then 2^63 (400, nothing queued or stored),
    then 23, 24 and 1000 are all accepted."""
    accepted(send(agent, 22))
    before = stream_length()
    refused = send(agent, 9223372036854775808)
    assert refused.status_code == 400, refused.content
    assert refused.json()["field"] == "seq"
    assert "9,223,372,036,854,775,807" in refused.json()["detail"]
    assert stream_length() == before, "a refused batch was queued"
    assert redis_seq(agent) == 22 and row_seq(agent) == 22
    accepted(send(agent, 23))
    accepted(send(agent, 24))
    assert accepted(send(agent, 1000))["gap"] == 975
    assert redis_seq(agent) == 1000 == row_seq(agent)


@pytest.mark.parametrize("seq", [-1, 2**63, 2**64, 10**30, 1.5, "7", None, True, [1]])
def test_sequence_numbers_outside_signed_64_bits_are_400_on_seq(agent, seq):
    response = send(agent, seq)
    assert response.status_code == 400, response.content
    assert response.json()["field"] == "seq"
    assert stream_length() == 0 and redis_seq(agent) is None and row_seq(agent) is None


def test_msgpack_unsigned_64_bit_seq_is_refused_too(agent):
    """msgpack carries uint64: 2^63 … 2^64 − 1 decode fine and must still be refused."""
    response = send(agent, 2**64 - 1, msgpack=True)
    assert response.status_code == 400 and response.json()["field"] == "seq"
    accepted(send(agent, MAX_SEQ, msgpack=True))


@pytest.mark.parametrize("base", [TWO_53, MAX_SEQ - 3])
def test_numbers_one_apart_near_2_53_and_2_63_are_told_apart(agent, base):
    """As doubles, 2^53 + 1 == 2^53 (and 2^63 − 1 == 2^63 − 2): the script would
    call the larger a duplicate. Compared exactly, it is the next batch."""
    accepted(send(agent, base))
    assert accepted(send(agent, base + 1))["gap"] == 0
    duplicate(send(agent, base + 1))
    duplicate(send(agent, base))
    assert accepted(send(agent, base + 3))["gap"] == 1
    duplicate(send(agent, base + 2))
    assert redis_seq(agent) == base + 3 == row_seq(agent)


def test_the_largest_sequence_number_is_accepted_once(agent):
    accepted(send(agent, MAX_SEQ - 1))
    accepted(send(agent, MAX_SEQ))
    duplicate(send(agent, MAX_SEQ))
    restart = accepted(send(agent, 1))
    assert restart["restart"] is True
    assert redis_seq(agent) == 1 == row_seq(agent)


def test_a_huge_gap_saturates_the_missed_batches_counter(agent):
    accepted(send(agent, 0))
    assert accepted(send(agent, MAX_SEQ))["gap"] == MAX_SEQ - 1
    assert accepted(send(agent, 1))["restart"] is True
    assert accepted(send(agent, MAX_SEQ))["gap"] == MAX_SEQ - 2
    row = TelemetryAgent.objects.get(pk=agent["agent"].pk)
    assert row.missed_batches == MAX_SEQ and row.gaps == 2


def test_an_out_of_range_number_left_in_redis_falls_back_to_the_row(agent):
    """A number the old code stored past 2^63 (the issue's state) is no number:
    the row's is used, and the agent carries on."""
    accepted(send(agent, 22))
    state.redis_client().set(keys.agent_seq(agent["agent"].pk), "9223372036854775808")
    duplicate(send(agent, 22))
    accepted(send(agent, 23))
    assert redis_seq(agent) == 23 == row_seq(agent)


@pytest.mark.parametrize("header", ["9223372036854775808", "+5", " 5x", "5_000", "٣", "-1",
                                    "1" * 40])
def test_a_bad_sequence_header_on_a_pushed_exposition_is_400(agent, header):
    response = agent["client"].post(metrics_url(agent["cluster"].pk), b"up 1\n",
                                    content_type="text/plain", HTTP_X_TELEMETRY_SEQ=header)
    assert response.status_code == 400, response.content
    assert response.json()["field"] == "X-Telemetry-Seq"
    assert redis_seq(agent) is None and row_seq(agent) is None


def test_the_largest_sequence_header_is_accepted(agent):
    text = b'DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="node0"} 5\n'
    response = agent["client"].post(metrics_url(agent["cluster"].pk), text,
                                    content_type="text/plain",
                                    HTTP_X_TELEMETRY_SEQ=str(MAX_SEQ))
    assert response.status_code == 202, response.content
    assert redis_seq(agent) == MAX_SEQ == row_seq(agent)


# --- Redis and the agent row move together -------------------------------------------

def test_the_row_follows_redis_through_every_kind_of_answer(agent):
    steps = [(5, "queued"), (5, "dup"), (9, "queued"), (7, "dup"), (1, "queued"), (2, "queued")]
    for seq, kind in steps:
        (accepted if kind == "queued" else duplicate)(send(agent, seq))
        assert row_seq(agent) == redis_seq(agent), f"after seq {seq}"
    assert row_seq(agent) == 2


def test_a_row_left_behind_is_repaired_by_the_next_batch_even_a_duplicate(agent):
    accepted(send(agent, 40))
    TelemetryAgent.objects.filter(pk=agent["agent"].pk).update(last_sequence=12)
    duplicate(send(agent, 40))
    assert row_seq(agent) == 40


def _fail_agent_updates(on: bool) -> None:
    """A real database failure on the agent row's UPDATE (a trigger), not a mock."""
    table = TelemetryAgent._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            if on:
                cursor.execute("CREATE FUNCTION twin_test_fail() RETURNS trigger AS $$ BEGIN "
                               "RAISE EXCEPTION 'bookkeeping down'; END $$ LANGUAGE plpgsql")
                cursor.execute(f"CREATE TRIGGER twin_test_fail BEFORE UPDATE ON {table} "
                               "FOR EACH ROW EXECUTE FUNCTION twin_test_fail()")
            else:
                cursor.execute(f"DROP TRIGGER twin_test_fail ON {table}")
                cursor.execute("DROP FUNCTION twin_test_fail()")
        elif on:
            cursor.execute(f"CREATE TRIGGER twin_test_fail BEFORE UPDATE ON {table} "
                           "BEGIN SELECT RAISE(ABORT, 'bookkeeping down'); END")
        else:
            cursor.execute("DROP TRIGGER twin_test_fail")


def test_a_failed_row_update_keeps_the_batch_and_the_resend_repairs_the_row(agent):
    """The script queued the batch, then the row's UPDATE fails: the batch stays
    queued (nothing accepted is lost), the agent is told to resend; the resend is a
    duplicate (not queued twice) and brings the row up to Redis's number."""
    accepted(send(agent, 1))
    _fail_agent_updates(True)
    try:
        failed = send(agent, 2)
        assert failed.status_code == 503 and failed["Retry-After"] == "1"
        assert "resend" in failed.json()["detail"]
        assert stream_length() == 2 and redis_seq(agent) == 2
        assert row_seq(agent) == 1
    finally:
        _fail_agent_updates(False)
    duplicate(send(agent, 2))
    assert stream_length() == 2
    assert row_seq(agent) == 2 == redis_seq(agent)
