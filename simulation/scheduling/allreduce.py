"""The AllReduce time a placement gives a job, priced by :mod:`simulation.collectives`.

The system is the common AI server: 8 cards on an NVLink switch (NVSwitch),
one 400 Gb/s NIC per card, the NICs of local card *i* of every server on rail
*i* (a rail-optimised network, NVIDIA DGX SuperPOD reference architecture).
NCCL runs one ring channel per rail across servers, so a job with ``c_i``
cards on server ``i`` gets ``c = min_i c_i`` channels, each carrying ``S/c``
through one NIC per server; inside one server it runs over NVLink:

* one server: ring AllReduce over ``p`` cards at the NVLink rate,
  ``2(p−1)α + 2(p−1)/p · S / B_nvlink`` (Patarasuk & Yuan, JPDC 2009;
  :func:`simulation.collectives.costs.ring_allreduce`);
* several servers: the same ring over ``p`` cards, each of the ``c`` channels
  limited by a NIC: ``2(p−1)α_net + 2(p−1)/p · S / (c · B_nic)``, and a
  placement whose servers do not use the same local card indices (not
  rail-aligned) crosses the spine: its per-hop latency doubles and the
  channels that leave their rail share the spine links with the others,
  which the model prices as the rail count of the aligned subset;
* across supernodes (a different spine block) each step adds the extra
  switch hops' latency.

The bandwidths are line rate × the protocol efficiencies of
:mod:`simulation.collectives.efficiency` (NVLink 0.84, InfiniBand 0.98).
This is why placement matters: an 8-card job on one server all-reduces over
NVLink (≈ 378 GB/s per card); the same job on 3 + 3 + 2 cards of three
servers gets 2 channels of 400 Gb/s (≈ 98 GB/s) — about 3.9× slower for 1 GiB.

Example:
    >>> from simulation.scheduling.cluster import Nodes
    >>> price = default_allreduce(size_bytes=1 << 30)
    >>> nodes = Nodes.uniform(4)
    >>> one = price(nodes, [(0, g, 1000) for g in range(8)])
    >>> two = price(nodes, [(0, g, 1000) for g in range(4)] + [(1, g, 1000) for g in range(4)])
    >>> round(one * 1e3, 2), round(two / one, 2)
    (4.99, 1.93)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise

import numpy as np
import numpy.typing as npt

from simulation.collectives import costs
from simulation.collectives.efficiency import PROTOCOL_EFFICIENCY

from .cluster import Nodes

__all__ = ["AllReducePrice", "default_allreduce", "torus_allreduce"]

AllReducePrice = Callable[[Nodes, Sequence[tuple[int, int, int]]], float]
"""(nodes, placement) → seconds of one AllReduce of the job's gradient buffer."""


def default_allreduce(
    size_bytes: float = float(1 << 30),
    *,
    nvlink_gbps: float = 3600.0,
    nic_gbps: float = 400.0,
    nvlink_alpha_s: float = 1e-6,
    nic_alpha_s: float = 2e-6,
    spine_alpha_s: float = 1e-6,
) -> AllReducePrice:
    """A pricing function for 8-card NVLink servers with one NIC per card (module doc).

    Defaults: NVLink 4 at 450 GB/s = 3,600 Gb/s per card and direction (NVIDIA
    H100 datasheet), 400 Gb/s NDR NICs, α of 1 µs per NVLink step and 2 µs per
    RDMA step (the seeds' "< 2 µs" RDMA latency), 1 µs per extra spine hop.
    """
    b_nvl = nvlink_gbps * 1e9 / 8 * PROTOCOL_EFFICIENCY["nvlink"]
    b_nic = nic_gbps * 1e9 / 8 * PROTOCOL_EFFICIENCY["infiniband"]

    def price(nodes: Nodes, placement: Sequence[tuple[int, int, int]]) -> float:
        pieces = [(n, g) for n, g, m in placement if g >= 0 and m >= 1000]
        p = len(pieces)
        if p <= 1:
            return 0.0
        arr = np.asarray(pieces, np.int64)
        servers, counts = np.unique(nodes.server[arr[:, 0]], return_counts=True)
        if len(servers) == 1:
            return costs.ring_allreduce(p, size_bytes, nvlink_alpha_s, 1.0 / b_nvl)
        # rail alignment: the local card indices common to every server
        per_server = [set(arr[nodes.server[arr[:, 0]] == s, 1].tolist()) for s in servers]
        common = set.intersection(*per_server)
        channels = int(counts.min())
        alpha = nic_alpha_s
        if len(common) < channels:  # some channels leave their rail
            channels = max(1, len(common))
            alpha += spine_alpha_s
        if len(np.unique(nodes.supernode[arr[:, 0]])) > 1:
            alpha += 2 * spine_alpha_s
        return costs.ring_allreduce(p, size_bytes, alpha, 1.0 / (channels * b_nic))

    return price


def _torus_positions(nodes: Nodes, cards_per_node: int) -> npt.NDArray[np.int64]:
    """Each node's first card index inside its supernode: servers in id order, 8 cards each
    (a server is one line of the torus' last dimension when it has as many cards)."""
    order = np.lexsort((nodes.server, nodes.supernode))
    sn_sorted = nodes.supernode[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sn_sorted)) + 1]
    rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    pos = np.empty(len(order), np.int64)
    pos[order] = rank * cards_per_node
    return pos


def torus_allreduce(
    dims: Sequence[int] = (8, 8, 8),
    size_bytes: float = float(1 << 30),
    *,
    link_gbps: float = 400.0,
    hop_alpha_s: float = 1e-6,
    nic_gbps: float = 400.0,
    nic_alpha_s: float = 2e-6,
    cards_per_node: int = 8,
) -> AllReducePrice:
    """A pricing function for supernodes that are tori of cards (the seeds' 8×8×8, 512 cards).

    A card's place: its server's rank in the supernode (servers in id order) × 8 + its
    local index, row-major over ``dims`` (last dimension fastest, so an 8-card server is
    one line of the last dimension and consecutive servers are neighbouring lines).
    The job's cards form one ring in boustrophedon order of their coordinates (a
    Hamiltonian cycle when they fill a box); each ring hop is routed dimension by
    dimension along the shorter way round. A ring AllReduce has 2(p−1) steps of S/p per
    rank (Patarasuk & Yuan, JPDC 2009); a step lasts as long as its slowest hop: the
    longest hop's latency (hops × α) and the most loaded directed link's share
    (L_max ring hops through one link, each moving S/p): ``2(p−1)(α·d_max + L_max·S/(p·B))``.
    Across supernodes the hops between them go through one NIC each (``nic_gbps``,
    ``nic_alpha_s``). One direction of the ring only (no bidirectional split).

    Example (a compact 2 × 8 block — two whole neighbouring servers — has d_max = L_max = 1):
        >>> from simulation.scheduling.cluster import Nodes
        >>> price = torus_allreduce(size_bytes=16e6, hop_alpha_s=0)
        >>> nodes = Nodes.uniform(64, 8)
        >>> t = price(nodes, [(n, g, 1000) for n in (0, 1) for g in range(8)])
        >>> round(t * 1e3, 4) == round(2 * 15 * (16e6 / 16) / (400e9 / 8) * 1e3, 4)
        True
    """
    dims_t = tuple(int(k) for k in dims)
    b_link = link_gbps * 1e9 / 8
    b_nic = nic_gbps * 1e9 / 8
    cache: dict[int, npt.NDArray[np.int64]] = {}

    def coords(lin: int) -> tuple[int, ...]:
        out = []
        for k in reversed(dims_t):
            out.append(lin % k)
            lin //= k
        return tuple(reversed(out))

    def snake(c: tuple[int, ...]) -> tuple[int, ...]:
        key, flip = [], False
        for i, (x, k) in enumerate(zip(c, dims_t, strict=True)):
            v = k - 1 - x if flip else x
            key.append(v)
            flip = (sum(key[: i + 1]) % 2) == 1
        return tuple(key)

    def price(nodes: Nodes, placement: Sequence[tuple[int, int, int]]) -> float:
        pieces = [(n, g) for n, g, m in placement if g >= 0 and m >= 1000]
        p = len(pieces)
        if p <= 1:
            return 0.0
        pos = cache.get(id(nodes))
        if pos is None:
            pos = cache[id(nodes)] = _torus_positions(nodes, cards_per_node)
        cards = sorted(((int(nodes.supernode[n]), snake(coords(int(pos[n]) + g)), coords(
            int(pos[n]) + g)) for n, g in pieces))
        load: dict[tuple[int, int, tuple[int, ...]], int] = {}
        d_max, nic_hops = 0, 0
        for (sa, _, a), (sb, _, b) in pairwise([*cards, cards[0]]):
            if sa != sb:
                nic_hops += 1
                continue
            here, d = list(a), 0
            for dim, k in enumerate(dims_t):
                step = (b[dim] - here[dim]) % k
                sign = 1 if step <= k - step else -1
                for _ in range(min(step, k - step)):
                    key = (sa, dim * 2 + (sign > 0), tuple(here))
                    load[key] = load.get(key, 0) + 1
                    here[dim] = (here[dim] + sign) % k
                    d += 1
            d_max = max(d_max, d)
        chunk = float(size_bytes) / p
        step_t = hop_alpha_s * d_max + max(load.values(), default=0) * chunk / b_link
        if nic_hops:
            step_t = max(step_t, nic_alpha_s + chunk / b_nic)
        return 2 * (p - 1) * step_t

    return price
