"""Checkpoints: their size from the model and its sharding, and their time on each storage tier.

Size. Mixed-precision Adam keeps, per parameter, the BF16 weights (2 bytes) and
the optimizer state: an FP32 master copy and the two FP32 moments (4 + 4 + 4),
so a full checkpoint is ``14 × P`` bytes (Rajbhandari et al., "ZeRO", SC'20,
§3.1: 2 + 2 + 12 bytes per parameter in memory, the 2 bytes of gradients are not
saved). A rank of a ``tp × pp × dp`` job holds ``1/(tp·pp)`` of the model; ZeRO
stage ≥ 1 (or Megatron's distributed optimizer) shards the optimizer state over
``dp`` too, stage 3 the weights as well. Written with deduplication (torch
distributed checkpoint, Megatron ``dist_checkpointing``) each rank writes
``14·P / (tp·pp·dp)`` bytes; to restore, each rank reads back what it holds.

Time. A tier has a per-server bandwidth and, when shared (a parallel file
system), an aggregate one; ``S`` servers writing ``b`` bytes each take

    t = max(b / bw_server, S·b / bw_aggregate)

(whichever saturates first). A file system reads faster than it writes (a DDN
AI400X2: ~90 GB/s read, ~65 GB/s write), so a tier may give its aggregate read
bandwidth apart (``aggregate_read_gbps``; 0 = the same as for writes). Restoring
reads the deduplicated share back and sends each shard to its data-parallel peers
over the network (``state / bw_network``); the first tier (local DRAM) holds each
server's whole state and is read as is. A checkpoint travels HBM → host DRAM → local
NVMe → PFS, one hop after the other. Synchronous checkpointing blocks training until
the last tier of its chain holds the data (Σ of the hops); asynchronous
checkpointing (CheckFreq, Mohan et al., FAST'21: snapshot, then persist in the
background) blocks only for the copy into the first tier — but one persist at a
time: if the previous one is still running when the next snapshot is due, training
waits for it (CheckFreq's pipelining rule), so the stall per checkpoint is

    δ_first + max(0, durable − δ_first − τ).

In-memory replication to peers (Gemini, Wang et al., SOSP'23) sends each server's
shard to ``r − 1`` other servers' DRAM over the training network:
``(r−1)·b / bw_network``; a single failed server is restored from a peer's memory
at network speed.

Example (Llama 3 405B on 16,384 cards, tp 8 pp 16 dp 128, ZeRO-1):

    >>> size = checkpoint_size(405e9, tp=8, pp=16, dp=128, zero=1)
    >>> round(size.total_bytes / 1e12, 2), round(size.write_bytes_per_rank / 1e6)
    (5.67, 346)
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "ADAM_MIXED_BYTES",
    "DGX_H100_TIERS",
    "CheckpointSize",
    "CheckpointTimes",
    "StorageTier",
    "checkpoint_size",
    "checkpoint_times",
    "claim_check",
    "tier_time_s",
]

ADAM_MIXED_BYTES = {"weights": 2, "optimizer": 12}
"""Bytes per parameter saved: BF16 weights; FP32 master + Adam m and v (ZeRO, SC'20)."""


@dataclass(frozen=True)
class StorageTier:
    """One level a checkpoint can be written to."""

    name: str
    write_gbps: float  #: GB/s per server (bytes)
    read_gbps: float  #: GB/s per server
    aggregate_gbps: float = 0.0  #: GB/s shared by all servers (0: none, local to each server)
    capacity_gb: float = 0.0  #: per server (local tiers) or total (shared), 0 = not checked
    survives_host_loss: bool = False  #: still readable when the server that wrote it is gone
    source: str = ""
    aggregate_read_gbps: float = 0.0  #: GB/s shared when reading back (0: aggregate_gbps)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


DGX_H100_TIERS: tuple[StorageTier, ...] = (
    StorageTier("host_dram", 200.0, 200.0, capacity_gb=2048.0,
                source="DGX H100: 2 TB DDR5; 8 GPUs on PCIe Gen5 x16 (64 GB/s each) — "
                       "~25 GB/s per card of pinned D2H copies sharing the host (estimate)"),
    StorageTier("local_nvme", 25.0, 50.0, capacity_gb=30_720.0,
                source="DGX H100 user guide: 8 × 3.84 TB U.2 NVMe data drives (30 TB) in RAID 0"),
    StorageTier("pfs", 50.0, 50.0, aggregate_gbps=200.0, capacity_gb=0.0,
                survives_host_loss=True,
                source="DGX SuperPOD storage: 2 × 200 Gb/s storage NICs per node (50 GB/s); "
                       "a DDN/Lustre system of 100–200 GB/s aggregate"),
)
"""Default tiers of an 8-card H100 server (sources per tier)."""


@dataclass(frozen=True)
class CheckpointSize:
    """Bytes of one checkpoint."""

    params: float
    total_bytes: float  #: unique bytes of the whole checkpoint
    write_bytes_per_rank: float  #: deduplicated share each rank writes
    state_bytes_per_rank: float  #: what a rank holds and reads back on restore

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def checkpoint_size(params: float, *, tp: int = 1, pp: int = 1, dp: int = 1, zero: int = 1,
                    bytes_per_param: Mapping[str, int] = ADAM_MIXED_BYTES) -> CheckpointSize:
    """Size of a mixed-precision Adam checkpoint (ZeRO, SC'20; see the module docstring).

    ``zero``: 0 replicates everything over ``dp``; ≥ 1 shards the optimizer state
    over ``dp``; 3 shards the weights too.
    """
    w, o = bytes_per_param["weights"], bytes_per_param["optimizer"]
    shard = params / (tp * pp)
    weights = w * shard / (dp if zero >= 3 else 1)
    optimizer = o * shard / (dp if zero >= 1 else 1)
    total = (w + o) * params
    return CheckpointSize(params, total, total / (tp * pp * dp), weights + optimizer)


def tier_time_s(bytes_per_server: float, servers: int, tier: StorageTier, *,
                read: bool = False) -> float:
    """``max(b / bw_server, S·b / bw_aggregate)`` in seconds (module docstring)."""
    bw = (tier.read_gbps if read else tier.write_gbps) * 1e9
    t = bytes_per_server / bw
    shared = tier.aggregate_read_gbps if read and tier.aggregate_read_gbps > 0 \
        else tier.aggregate_gbps
    if shared > 0:
        t = max(t, servers * bytes_per_server / (shared * 1e9))
    return t


@dataclass(frozen=True)
class CheckpointTimes:
    """Save and restore times of one checkpoint on a chain of tiers."""

    per_server_bytes: float
    save_s: dict[str, float]  #: each hop's time, by tier
    reach_s: dict[str, float]  #: from the snapshot to the data being in that tier
    restore_s: dict[str, float]  #: every server reading back its state, by tier
    restore_one_s: dict[str, float]  #: one replaced server reading its state, by tier
    blocking_s: float  #: training stalls this long per checkpoint
    durable_s: float  #: until the last tier holds it
    replication_s: float  #: sending copies to peers' DRAM (0 without replication)
    peer_restore_s: float  #: one server restored from a peer's memory
    mode: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _local(tier: StorageTier) -> bool:
    """A tier inside each server (no shared aggregate bandwidth, lost with the server)."""
    return tier.aggregate_gbps <= 0 and not tier.survives_host_loss


def checkpoint_times(size: CheckpointSize, *, cards: int, cards_per_server: int = 8,
                     tiers: Sequence[StorageTier] = DGX_H100_TIERS, mode: str = "async",
                     replicas: int = 1, network_gbps_per_server: float = 400.0
                     ) -> CheckpointTimes:
    """Save and restore times on ``tiers`` (in order), sync or async, with replication.

    ``network_gbps_per_server`` is the scale-out bandwidth in GB/s (8 × 400 Gb/s NICs
    = 400 GB/s) that Gemini-style replication uses.
    """
    servers = max(1, -(-cards // cards_per_server))
    ranks = min(cards, cards_per_server)
    write_b = size.write_bytes_per_rank * ranks
    state_b = size.state_bytes_per_rank * ranks
    save: dict[str, float] = {}
    reach: dict[str, float] = {}
    elapsed = 0.0
    for tier in tiers:
        # the first hop into a server's own memory copies each rank's whole state out
        # of HBM; a shared tier (and every later hop) gets the deduplicated share
        b = state_b if not save and _local(tier) else write_b
        save[tier.name] = tier_time_s(b, servers, tier)
        elapsed += save[tier.name]
        reach[tier.name] = elapsed
    net = network_gbps_per_server * 1e9
    # The first tier holds each server's full state; later tiers the deduplicated
    # share, read once and sent to the data-parallel peers over the network.
    restore: dict[str, float] = {}
    restore_one: dict[str, float] = {}
    for i, t in enumerate(tiers):
        if i == 0 and _local(t):
            restore[t.name] = tier_time_s(state_b, servers, t, read=True)
            restore_one[t.name] = tier_time_s(state_b, 1, t, read=True)
        else:
            spread = state_b / net
            restore[t.name] = tier_time_s(write_b, servers, t, read=True) + spread
            restore_one[t.name] = tier_time_s(write_b, 1, t, read=True) + spread
    replication = (replicas - 1) * state_b / net if replicas > 1 else 0.0
    peer = state_b / net if replicas > 1 else 0.0
    durable = max(elapsed, replication)
    first = next(iter(save.values()), 0.0)
    blocking = durable if mode == "sync" else first
    return CheckpointTimes(write_b, save, reach, restore, restore_one, blocking, durable,
                           replication, peer, mode)


def claim_check(times: CheckpointTimes, claim_s: float = 15.0) -> dict[str, Any]:
    """Does "a checkpoint in ≤ claim_s seconds" hold? Judged on the time training stalls
    (blocking) and on the time until the checkpoint is durable (survives a host loss)."""
    blocking_ok = times.blocking_s <= claim_s
    durable_ok = times.durable_s <= claim_s
    why = (f"training stalls {times.blocking_s:.1f} s per checkpoint ({times.mode}); "
           f"it is durable after {times.durable_s:.1f} s "
           f"({' → '.join(f'{k} {v:.1f} s' for k, v in times.save_s.items())}).")
    return {"claim_s": claim_s, "blocking_s": times.blocking_s, "durable_s": times.durable_s,
            "holds_for_blocking": blocking_ok, "holds_for_durable": durable_ok, "why": why}
