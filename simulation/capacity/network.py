"""Switches and cables of a non-blocking scale-out fat tree, in closed form.

A fat tree of radix-``k`` switches (Leiserson 1985; Al-Fares, Loukissas and Vahdat,
"A scalable, commodity data center network architecture", SIGCOMM 2008, §3.2)
gives every endpoint full bisection bandwidth when each switch below the top
spends half its ports down and half up:

* ``N ≤ k``: one switch, ``N`` links.
* ``N ≤ k²/2`` (two tiers, leaf–spine): ``L = ⌈N / (k/2)⌉`` leaves,
  ``S = ⌈L/2⌉`` spines (each leaf's ``k/2`` uplinks land on spines of ``k``
  ports); links ``N + L·k/2``. Full size: ``k`` leaves, ``k/2`` spines.
* ``N ≤ k³/4`` (three tiers): ``L`` leaves, as many aggregation switches, and
  ``⌈L/2⌉`` cores; links ``N + 2·L·k/2``. Full size (Al-Fares §3.2): ``k``
  pods of ``k/2`` + ``k/2`` switches and ``(k/2)²`` cores, ``5k²/4`` switches
  for ``k³/4`` hosts.

A rail-optimised fabric (NVIDIA DGX SuperPOD reference architecture: the ``i``-th
NIC of every server on leaf rail ``i``) has the same counts: it only chooses
which leaf each NIC cables to. Every link has two ends; a transceiver design
needs an optic at each end, a cable with its ends built in (AOC, DAC) counts once
per link (``optics.py`` prices both).

>>> fat_tree(128, 64)
(2, 6, 4, 256)
>>> fat_tree(65_536, 64)   # k³/4 hosts: 5k²/4 switches
(3, 5120, 2048, 196608)
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["MAX_TIERS", "fat_tree", "fat_tree_arrays"]

I64 = npt.NDArray[np.int64]
MAX_TIERS = 3
"""Deepest tree counted: beyond ``k³/4`` endpoints the design is refused."""


def fat_tree_arrays(endpoints: I64, radix: I64) -> tuple[I64, I64, I64, I64]:
    """(tiers, switches, leaves, links) for each (endpoints, radix) pair;
    tiers 0 where a three-tier tree of that radix cannot hold the endpoints
    (switches and links then 0). Vectorised over candidates."""
    n = np.asarray(endpoints, dtype=np.int64)
    k = np.asarray(radix, dtype=np.int64)
    half = k // 2
    leaves = -(-n // half)
    spines = -(-leaves // 2)
    one = n <= k
    two = ~one & (n <= k * k // 2)
    three = ~one & ~two & (n <= k * k * k // 4)
    tiers = np.where(one, 1, np.where(two, 2, np.where(three, 3, 0))).astype(np.int64)
    switches = np.where(one, 1, np.where(two, leaves + spines,
                                         np.where(three, 2 * leaves + spines, 0)))
    links = np.where(one, n, np.where(two, n + leaves * half,
                                      np.where(three, n + 2 * leaves * half, 0)))
    leaves_out = np.where(one, 1, np.where(tiers > 0, leaves, 0))
    return tiers, switches.astype(np.int64), leaves_out.astype(np.int64), links.astype(np.int64)


def fat_tree(endpoints: int, radix: int) -> tuple[int, int, int, int]:
    """(tiers, switches, leaves, links) of one non-blocking fat tree (see the module)."""
    t, s, leaf, link = fat_tree_arrays(np.array([endpoints]), np.array([radix]))
    return int(t[0]), int(s[0]), int(leaf[0]), int(link[0])
