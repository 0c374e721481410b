"""The Redis client's command packer: large values go to the socket uncopied
(``twin.telemetry.config.command_packer``)."""
from __future__ import annotations

import numpy as np

from twin.telemetry import keys
from twin.telemetry.config import BUFFER_CUTOFF, command_packer, redis_client


def test_a_large_value_is_handed_on_as_it_is_and_a_small_one_packed():
    packer = command_packer()
    big = bytes(range(256)) * 1024  # 256 KiB: one column of a 65,536-card batch
    view = memoryview(np.arange(65_536, dtype="<f4")).cast("B")
    small = b"x" * (BUFFER_CUTOFF // 2)
    for value in (big, view):
        chunks = packer.pack("SETRANGE", "k", 1024, value)
        assert any(chunk is value for chunk in chunks)  # not copied into a new string
        assert b"".join(bytes(c) for c in chunks).endswith(bytes(value) + b"\r\n")
    (packed,) = packer.pack("SETRANGE", "k", 8, small)
    assert packed == b"*4\r\n$8\r\nSETRANGE\r\n$1\r\nk\r\n$1\r\n8\r\n$%d\r\n%s\r\n" % (
        len(small), small)


def test_the_client_writes_memoryviews_byte_for_byte():
    r = redis_client()
    key = f"{keys.base(0)}:packer-test"
    values = np.random.default_rng(3).uniform(0, 700, 70_000).astype("<f4")
    try:
        r.set(key, bytes(4 * 100))
        pipe = r.pipeline(transaction=False)
        pipe.setrange(key, 400, memoryview(values[:40_000]).cast("B"))
        pipe.setrange(key, 400 + 4 * 40_000, memoryview(values[40_000:]).cast("B"))
        pipe.execute()
        got = np.frombuffer(r.get(key), "<f4")
        assert (got[:100] == 0).all()
        np.testing.assert_array_equal(got[100:], values)
    finally:
        r.delete(key)
