"""Who sends to whom in a collective step: ring orders, trees and step patterns.

A collective algorithm is a sequence of steps; in each step every rank sends
to a partner given by a *pattern*: ring neighbours (every channel's order, both
ways), the XOR partner at distance d, a cyclic shift by d, the fold pairs of
non-power-of-two recursive halving, the edges of NCCL's double binary tree, or
all pairs. The orders here say which ring channels run: a Hamiltonian snake on
a torus, one order per NIC rail across servers (NCCL's channels).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = [
    "I64",
    "binary_tree_edges",
    "double_tree_edges",
    "pattern_pairs",
    "rail_orders",
    "snake_order",
]

I64 = npt.NDArray[np.int64]


def snake_order(dims: tuple[int, ...]) -> I64:
    """Row-major ids in boustrophedon (reflected mixed-radix Gray) order.

    Consecutive ids differ by one step in one dimension; if the first
    dimension is even the last id is also adjacent to the first (through
    that dimension's wrap link), so on a torus the order is a Hamiltonian
    cycle and a ring over it uses only nearest-neighbour links. Dimensions
    are re-ordered to put an even one first when there is one.
    """
    dims_l = list(dims)
    even = [i for i, k in enumerate(dims_l) if k % 2 == 0]
    perm = (
        ([even[0]] + [i for i in range(len(dims_l)) if i != even[0]])
        if even
        else list(range(len(dims_l)))
    )
    pdims = [dims_l[i] for i in perm]
    coords = np.zeros((1, 0), dtype=np.int64)
    for k in reversed(pdims):
        m = coords.shape[0]
        blocks = []
        for x in range(k):
            sub = coords if x % 2 == 0 else coords[::-1]
            blocks.append(np.column_stack([np.full(m, x, dtype=np.int64), sub]))
        coords = np.vstack(blocks)
    # coords columns follow pdims; map back to the original dimension order
    full = np.zeros_like(coords)
    for j, axis in enumerate(perm):
        full[:, axis] = coords[:, j]
    ids = np.zeros(coords.shape[0], dtype=np.int64)
    for axis, k in enumerate(dims_l):
        ids = ids * k + full[:, axis]
    return ids


def rail_orders(p: int, server_cards: int, rails: int) -> list[I64]:
    """One ring order per NIC rail, as NCCL builds its channels across servers.

    Ranks are consecutive servers of ``server_cards`` cards. Channel c
    visits each server's cards starting at slot ``c·server_cards/rails``
    (rotated), so it leaves a server from the card just before that slot and
    enters the next one at it: successive channels cross between servers on
    successive rails, and together they use every rail (NCCL's rings on a
    rail-optimised DGX; ``NCCL_CROSS_NIC=0``). The crossing hop itself is
    routed like any flow (NVLink to the rail's card, then its NIC — NCCL's
    PXN — or the other way round).
    """
    servers = p // server_cards
    base = (np.arange(servers, dtype=np.int64) * server_cards)[:, None]
    out = []
    step = max(server_cards // max(rails, 1), 1)
    for c in range(min(rails, server_cards)):
        local = (np.arange(server_cards, dtype=np.int64) + c * step) % server_cards
        out.append((base + local[None, :]).ravel())
    return out


def binary_tree_edges(p: int) -> tuple[I64, I64, int]:
    """(parent, child) rank arrays and depth of NCCL's binary tree on p ranks.

    As ``ncclGetBtree`` (NCCL ``src/graph/trees.cc``): rank r > 0 with lowest
    set bit b has parent (r ^ b) | 2b, or r ^ b if that is ≥ p; rank 0 is the
    root with one child. Every odd rank is a leaf; the depth is ⌈log₂ p⌉.
    """
    r = np.arange(1, p, dtype=np.int64)
    bit = r & -r
    up = (r ^ bit) | (bit << 1)
    up = np.where(up >= p, r ^ bit, up)
    parent = np.full(p, -1, dtype=np.int64)
    parent[1:] = up
    depth = np.zeros(p, dtype=np.int64)
    anc = parent.copy()
    while (anc >= 0).any():  # pointer walk, at most ⌈log₂ p⌉ rounds
        live = anc >= 0
        depth[live] += 1
        anc[live] = parent[anc[live]]
    return up, r, int(depth.max()) if p > 1 else 0


def double_tree_edges(p: int) -> tuple[I64, I64, int]:
    """Edges of NCCL's double binary tree (``ncclGetDtree``).

    The second tree is the first mirrored (r ↦ p−1−r) when p is even and
    shifted by one when p is odd, so that no rank is interior in both
    (Sanders, Speck & Träff 2009): each rank forwards at most one tree's data.
    """
    par, ch, depth = binary_tree_edges(p)
    if p % 2 == 0:
        par2, ch2 = p - 1 - par, p - 1 - ch
    else:
        par2, ch2 = (par + 1) % p, (ch + 1) % p
    return np.concatenate([par, par2]), np.concatenate([ch, ch2]), depth


def pattern_pairs(kind: str, arg: int, p: int, orders: list[I64] | None) -> tuple[I64, I64]:
    """Sender and receiver ranks of a pattern on p ranks.

    ``ring``: every order's ring in both directions, one flow per rank and
    directed ring — with p = 2 the two directions of one order are two flows
    on the same pair, as they are on the wire.
    """
    r = np.arange(p, dtype=np.int64)
    if kind == "ring":
        srcs, dsts = [], []
        for o in orders if orders else [r]:
            nxt = np.roll(o, -1)
            srcs += [o, nxt]
            dsts += [nxt, o]
        return np.concatenate(srcs), np.concatenate(dsts)
    if kind == "xor":
        q = 1 << (p.bit_length() - 1)
        s = r[r < q]
        return s, s ^ arg
    if kind == "shift":
        return r, (r + arg) % p
    if kind == "pair":  # TRG's fold: ranks 2i ↔ 2i+1 for i < arg
        even = 2 * np.arange(min(arg, p // 2), dtype=np.int64)
        return np.concatenate([even, even + 1]), np.concatenate([even + 1, even])
    if kind == "tree":
        par, ch, _ = double_tree_edges(p)
        return np.concatenate([par, ch]), np.concatenate([ch, par])
    if kind == "uniform":
        src = np.repeat(r, p)
        dst = np.tile(r, p)
        keep = src != dst
        return src[keep], dst[keep]
    raise ValueError(f"unknown pattern {kind!r}")
