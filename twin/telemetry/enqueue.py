"""Enqueue a parsed batch on the telemetry stream, once, in order, within limits.

One Lua script per batch, atomic in Redis: a repeated sequence number of the
agent is a duplicate (nothing stored), a jump is counted as a gap, 0 or 1 after
a higher number as a restart; a stream over its backlog (batches or bytes) is
"busy" without consuming the number, so the agent retries the same batch (and
the first refusal of the episode is noted, ``keys.ingest_refused``: the ticks do
not call a card silent whose readings we refused); else the batch is appended
and one idle drain slot is claimed for the caller to start. The views and the
scraper call :func:`enqueue` after :mod:`.ingest` has parsed the batch. With
``TELEMETRY_APPLY_ON_INGEST`` the script only takes the sequence number and the
batch is written into the state by the calling process (see :func:`enqueue`).

Sequence numbers are signed 64-bit (0 … 2^63 − 1, ``ingest.MAX_SEQ``), checked
by the parser before this runs. Redis Lua numbers are doubles, exact only to
2^53: the script never converts a sequence number to a number. It compares the
decimal strings (a longer one is larger; equal lengths as two exact halves)
and reports the stored number back as text, so the gap is computed in Python.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from twin.telemetry import keys, state
from twin.telemetry.config import conf
from twin.telemetry.ingest import MAX_SEQ, Batch

__all__ = ["KICK_TTL_MS", "EnqueueResult", "apply_on_ingest", "drainers", "enqueue"]

log = logging.getLogger(__name__)


def apply_on_ingest() -> bool:
    """``TELEMETRY_APPLY_ON_INGEST`` (``TWIN_TELEMETRY_APPLY_ON_INGEST``): whether the
    process that parsed a batch writes it into the live state itself instead of
    putting it on the stream for a worker (see :func:`enqueue`)."""
    return bool(getattr(settings, "TELEMETRY_APPLY_ON_INGEST", False))


def drainers() -> int:
    """Drain slots (``TELEMETRY_DRAINERS``, ``TWIN_TELEMETRY_DRAINERS``): how many drain
    tasks may run at once; more keep a million cards' stream drained, each takes a
    worker process while it runs."""
    return int(getattr(settings, "TELEMETRY_DRAINERS", 2))


KICK_TTL_MS = 60_000

_ENQUEUE = """
-- Sequence numbers are canonical decimal strings, 0 <= n <= 2^63 - 1. Lua numbers
-- are doubles (exact only up to 2^53), so they are never converted whole: a longer
-- string is larger; equal lengths compare as two halves of at most 10 and 9
-- digits, each exact in a double. String '<' is not used (it follows the locale).
local function cmp(a, b)
  if #a ~= #b then return #a < #b and -1 or 1 end
  local split = math.max(#a - 9, 0)
  local ah, bh = tonumber(string.sub(a, 1, split)) or 0, tonumber(string.sub(b, 1, split)) or 0
  if ah ~= bh then return ah < bh and -1 or 1 end
  local al, bl = tonumber(string.sub(a, split + 1)), tonumber(string.sub(b, split + 1))
  if al ~= bl then return al < bl and -1 or 1 end
  return 0
end
local function valid(s)
  return s ~= nil and #s <= 19 and (s == '0' or string.match(s, '^[1-9]%d*$') ~= nil)
         and cmp(s, '9223372036854775807') <= 0
end
local restart, last = 0, ''
if ARGV[1] ~= '' then
  local seq = ARGV[1]
  local stored = redis.call('GET', KEYS[2])
  -- A value no valid batch could have left (an older version stored 2^63) is no value.
  if not stored or not valid(stored) then
    stored = nil
    if ARGV[2] == '?' then return {3, '', -1, 0} end
    if ARGV[2] ~= '' then stored = ARGV[2] end
  end
  if stored then
    last = stored
    if cmp(seq, stored) <= 0 then
      if (seq == '0' or seq == '1') and cmp(stored, '1') > 0 then
        restart = 1
      else
        return {1, stored, -1, 0}
      end
    end
  end
end
if ARGV[6] == '1' then
  local queued = tonumber(redis.call('GET', KEYS[3]) or '0')
  if redis.call('XLEN', KEYS[1]) >= tonumber(ARGV[3]) or queued >= tonumber(ARGV[7]) then
    local now = redis.call('TIME')
    redis.call('SET', KEYS[4], now[1] * 1000 + math.floor(now[2] / 1000), 'NX')
    redis.call('PEXPIRE', KEYS[4], ARGV[8])
    return {2, last, -1, 0}
  end
end
if ARGV[1] ~= '' then redis.call('SET', KEYS[2], ARGV[1], 'EX', 2592000) end
local kick = -1
if ARGV[6] == '1' then
  redis.call('XADD', KEYS[1], '*', 'p', ARGV[4])
  redis.call('INCRBY', KEYS[3], string.len(ARGV[4]))
  for i = 5, #KEYS do
    if redis.call('SET', KEYS[i], '1', 'NX', 'PX', ARGV[5]) then
      kick = i - 5
      break
    end
  end
end
return {0, last, kick, restart}
"""


@dataclass
class EnqueueResult:
    status: str  # "queued", "applied", "duplicate", "busy", "empty"
    gap: int = 0
    restart: bool = False
    kicked: int = -1
    current: int | None = None
    """The agent's sequence number in Redis after the script (None: it has none):
    the value the agent row follows (see ``ingest_views``)."""


_scripts: dict[int, Any] = {}


def _enqueue_script(r: Any) -> Any:
    script = _scripts.get(id(r))
    if script is None:
        script = _scripts[id(r)] = r.register_script(_ENQUEUE)
    return script


def enqueue(batch: Batch, *, agent_id: int | None, seq: int | None,
            last_known_seq: int | None | Callable[[], int | None] = None) -> EnqueueResult:
    """Check the sequence number and put the batch on the stream, atomically.

    One Lua script: a repeated ``seq`` (≤ the last one) is a duplicate and
    nothing happens; a jump is a gap of that many batches; 0 or 1 after a
    higher number is an agent restart. A full stream (the workers are behind)
    answers "busy" without consuming the sequence number, so the agent can
    retry the same batch. When a drain slot is free the caller must start a
    drain task for it (``kicked``).

    ``last_known_seq`` is the agent's last sequence number from the database,
    used when Redis has none (it restarted); pass a callable to read it only
    in that case (the script asks, and is run again with the answer).

    With ``apply_on_ingest()`` the script only checks and takes the sequence
    number, and the batch is written into the live state here ("applied"; the
    caller must see that a tick follows: ``processing.schedule_trailing_tick``).
    A 65,536-card batch then costs ≈ 18 ms of CPU (this process and Redis)
    instead of ≈ 51 through the stream (its 6.8 MB copied into the script, the
    stream, a worker and back: ``benchmarks/ingest_paths.py``), at the price
    of the stream's buffer: no backpressure ("busy") and no queue while workers
    are away (the state is written without them; only ticks wait). Should the
    write fail, the sequence number is given back, so the agent's retry of the
    same batch is not taken for a duplicate.
    """
    if seq is not None and not 0 <= seq <= MAX_SEQ:
        raise ValueError(f"sequence number {seq} is outside 0 … 2^63 − 1 (parse it with "
                         f"ingest.check_seq)")
    r = state.redis_client()
    has_data = batch.accepted_values() > 0
    direct = has_data and apply_on_ingest()
    queued = has_data and not direct
    seq_key = keys.agent_seq(agent_id) if (agent_id is not None and seq is not None) else "-"
    script = _enqueue_script(r)
    payload = batch.payload(agent_id) if queued else b""
    known = "?" if callable(last_known_seq) else _known(last_known_seq)

    def run(known: str) -> tuple[int, bytes | str, int, int]:
        res = script(
            keys=[keys.stream(), seq_key, keys.stream_bytes(), keys.ingest_refused(),
                  *[keys.drain_kick(i) for i in range(drainers())]],
            args=["" if seq is None else str(seq), known,
                  int(getattr(settings, "TELEMETRY_MAX_BACKLOG", 2000)),
                  payload, KICK_TTL_MS, "1" if queued else "0",
                  int(getattr(settings, "TELEMETRY_MAX_BACKLOG_BYTES", 512 * 1024 * 1024)),
                  # the refusal episode ends when no batch was refused for this long
                  int(1000 * conf().stale_after_s)],
        )
        code, last, kick, restart = res
        if isinstance(last, bytes):
            last = last.decode()
        return int(code), last, int(kick), int(restart)

    code, last, kick, restart = run(known)
    if code == 3:  # Redis has no sequence for this agent: ask the database once
        value = last_known_seq() if callable(last_known_seq) else None
        code, last, kick, restart = run(_known(value))
    previous = int(last) if last else None
    if code == 1:
        return EnqueueResult("duplicate", current=previous)
    if code == 2:
        return EnqueueResult("busy", current=previous)
    if direct:
        _apply_or_give_back(r, batch, seq_key, seq, last)
    elif queued:
        r.sadd(keys.clusters(), batch.cluster_id)
    gap = 0
    if seq is not None and previous is not None and not restart and seq > previous + 1:
        gap = seq - previous - 1  # in Python: exact for any 64-bit pair
    status = "applied" if direct else "queued" if queued else "empty"
    return EnqueueResult(status, gap=gap, restart=bool(restart), kicked=kick,
                         current=seq if seq is not None else None)


def _apply_or_give_back(r: Any, batch: Batch, seq_key: str, seq: int | None,
                        last: str) -> None:
    from twin.telemetry.processing.apply import apply_batch

    try:
        apply_batch(batch)
    except Exception:
        if seq is not None and seq_key != "-":
            try:  # (the script set it to seq; put back what it was, unless it moved on)
                r.eval(_GIVE_BACK, 1, seq_key, str(seq), last)
            except Exception:  # noqa: BLE001 - Redis away: the original error says why
                log.warning("could not give back sequence %s of %s", seq, seq_key)
        raise


_GIVE_BACK = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then return redis.call('DEL', KEYS[1]) end
redis.call('SET', KEYS[1], ARGV[2], 'EX', 2592000)
return 1
"""


def _known(value: int | None) -> str:
    """A sequence number from the database for the script ('' when there is none or
    it is not one the script accepts, e.g. a negative number set by hand)."""
    if value is None or not 0 <= int(value) <= MAX_SEQ:
        return ""
    return str(int(value))
