"""Enqueue a parsed batch on the telemetry stream, once, in order, within limits.

One Lua script per batch, atomic in Redis: a repeated sequence number of the
agent is a duplicate (nothing stored), a jump is counted as a gap, 0 or 1 after
a higher number as a restart; a stream over its backlog (batches or bytes) is
"busy" without consuming the number, so the agent retries the same batch; else
the batch is appended and one idle drain slot is claimed for the caller to
start. The views and the scraper call :func:`enqueue` after :mod:`.ingest` has
parsed the batch.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from twin.telemetry import keys, state
from twin.telemetry.ingest import Batch

__all__ = ["KICK_TTL_MS", "EnqueueResult", "drainers", "enqueue"]

def drainers() -> int:
    return int(getattr(settings, "TELEMETRY_DRAINERS", 2))


KICK_TTL_MS = 60_000

_ENQUEUE = """
local gap, restart = 0, 0
if ARGV[1] ~= '' then
  local seq = tonumber(ARGV[1])
  local last = redis.call('GET', KEYS[2])
  if not last then
    if ARGV[2] == '?' then return {3, 0, -1, 0} end
    if ARGV[2] ~= '' then last = ARGV[2] end
  end
  if last then
    last = tonumber(last)
    if seq <= last then
      if seq <= 1 and last > 1 then restart = 1 else return {1, 0, -1, 0} end
    elseif seq > last + 1 then
      gap = seq - last - 1
    end
  end
end
if ARGV[6] == '1' then
  local queued = tonumber(redis.call('GET', KEYS[3]) or '0')
  if redis.call('XLEN', KEYS[1]) >= tonumber(ARGV[3]) or queued >= tonumber(ARGV[7]) then
    return {2, 0, -1, 0}
  end
end
if ARGV[1] ~= '' then redis.call('SET', KEYS[2], ARGV[1], 'EX', 2592000) end
local kick = -1
if ARGV[6] == '1' then
  redis.call('XADD', KEYS[1], '*', 'p', ARGV[4])
  redis.call('INCRBY', KEYS[3], string.len(ARGV[4]))
  for i = 4, #KEYS do
    if redis.call('SET', KEYS[i], '1', 'NX', 'PX', ARGV[5]) then
      kick = i - 4
      break
    end
  end
end
return {0, gap, kick, restart}
"""


@dataclass
class EnqueueResult:
    status: str  # "queued", "duplicate", "busy", "empty"
    gap: int = 0
    restart: bool = False
    kicked: int = -1


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
    """
    r = state.redis_client()
    has_data = batch.accepted_values() > 0
    seq_key = keys.agent_seq(agent_id) if (agent_id is not None and seq is not None) else "-"
    script = _enqueue_script(r)
    payload = batch.payload(agent_id) if has_data else b""
    known = "?" if callable(last_known_seq) else (
        "" if last_known_seq is None else str(last_known_seq))

    def run(known: str) -> tuple[int, ...]:
        res = script(
            keys=[keys.stream(), seq_key, keys.stream_bytes(),
                  *[keys.drain_kick(i) for i in range(drainers())]],
            args=["" if seq is None else str(seq), known,
                  int(getattr(settings, "TELEMETRY_MAX_BACKLOG", 2000)),
                  payload, KICK_TTL_MS, "1" if has_data else "0",
                  int(getattr(settings, "TELEMETRY_MAX_BACKLOG_BYTES", 512 * 1024 * 1024))],
        )
        return tuple(int(x) for x in res)

    code, gap, kick, restart = run(known)
    if code == 3:  # Redis has no sequence for this agent: ask the database once
        value = last_known_seq() if callable(last_known_seq) else None
        code, gap, kick, restart = run("" if value is None else str(value))
    if code == 1:
        return EnqueueResult("duplicate")
    if code == 2:
        return EnqueueResult("busy")
    if has_data:
        r.sadd(keys.clusters(), batch.cluster_id)
    return EnqueueResult("queued" if has_data else "empty", gap=gap, restart=bool(restart),
                         kicked=kick)
