"""Build a cluster from a preset: every row at once, all or nothing, fast.

A million-card cluster is ~1 M cards, ~131 k servers, ~530 k devices and
~5 M links. Saving model instances would take hours, so the builder:

1. plans with ``twin.hardware.presets`` (counts and rack packing by
   ``simulation.power``: no rack exceeds its budget);
2. reserves an id range per table up front (PostgreSQL: the sequence is
   locked with ``ALTER SEQUENCE`` and advanced with ``setval`` in the build's
   transaction; SQLite: the write lock of the IMMEDIATE transaction covers
   ``max(id)``), so every foreign key is array arithmetic;
3. generates each table's rows as numpy column arrays per batch of
   supernodes (torus neighbours by index arithmetic, names as fixed-width
   byte strings), so memory stays bounded;
4. writes them with ``COPY … FROM STDIN (FORMAT BINARY)`` on PostgreSQL —
   each batch packed into one numpy structured array whose bytes *are* the
   COPY rows — and ``executemany`` on SQLite;
5. checks foreign keys set-wise on PostgreSQL where the role may turn the
   row-by-row RI triggers off (see ``PostgresWriter``): one anti-join per
   table instead of ~20 M single-row lookups;
6. does all of it in one transaction: a failure leaves nothing, and
   ``replace`` deletes the old cluster in that same transaction.

``docs/benchmarks.md`` (build_cluster) has the figures: ``million`` in about
a minute, at 1.0–1.2× a raw COPY of the same rows, ~240 MiB peak RSS.

Rows are valid under the models' ``clean()``: link ends follow
``COMPATIBLE_ENDPOINTS``, torus dimensions multiply to the card count, card
(supernode, index) and (server, slot) are unique, serials embed the cluster
id and UUIDs are random (version 4).
"""
from __future__ import annotations

import datetime as dt
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.conf import settings
from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone
from django.utils.text import slugify

from simulation.power import RackBudgetError
from twin.hardware.choices import CardStatusChoices, LinkStatusChoices
from twin.hardware.choices import LinkKindChoices as L
from twin.hardware.presets import PRESETS, ClusterPlan, Preset

__all__ = [
    "BuildError",
    "Progress",
    "build_cluster",
    "check_build",
    "check_foreign_keys",
    "delete_cluster",
    "plan_build",
]

Progress = Callable[[float, str], None]

# Rows per COPY/executemany chunk: big enough to amortise per-chunk work,
# small enough that a chunk stays a few tens of MB.
CHUNK_ROWS = 200_000


class BuildError(Exception):
    """A build that cannot run: ``field`` names the bad input, ``message`` says
    why and what to do instead (one line, for a CLI or an API error body)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message

    def __str__(self) -> str:
        return self.message


# --------------------------------------------------------------------------
# validation and planning
# --------------------------------------------------------------------------

def _preset(name: str) -> Preset:
    preset = PRESETS.get(name) if isinstance(name, str) else None
    if preset is None:
        raise BuildError("preset", f"Unknown preset {name!r}; choose one of: "
                                   f"{', '.join(sorted(PRESETS))}.")
    return preset


def _catalogue_tdp(preset: Preset) -> tuple[int, int]:
    """(accelerator id, TDP W) from the catalogue: the figure rack power uses."""
    from twin.hardware.models import AcceleratorType

    row = (AcceleratorType.objects.filter(slug=preset.supernode.accelerator)
           .values_list("pk", "tdp_w").first())
    if row is None:
        raise BuildError("preset", f"The catalogue has no accelerator "
                                   f"{preset.supernode.accelerator!r} that preset "
                                   f"{preset.name!r} uses; run 'python manage.py migrate' "
                                   f"(it loads the catalogue).")
    return int(row[0]), int(row[1])


def plan_build(
    preset: str,
    *,
    supernodes: int | None = None,
    rack_budget_w: int | None = None,
    card_tdp_w: int | None = None,
) -> ClusterPlan:
    """The plan of a build (counts, rack packing), computed without the database.

    ``card_tdp_w`` defaults to the preset's planning TDP; ``build_cluster``
    passes the catalogue's, which is what rack power is summed from. Raises
    ``BuildError`` for bad input, with the field to blame.
    """
    spec = _preset(preset)
    if supernodes is not None and (isinstance(supernodes, bool)
                                   or not isinstance(supernodes, int) or supernodes < 1):
        raise BuildError("supernodes", f"Supernodes must be a whole number ≥ 1, not "
                                       f"{supernodes!r}.")
    if rack_budget_w is not None:
        if isinstance(rack_budget_w, bool) or not isinstance(rack_budget_w, int):
            raise BuildError("rack_budget_w", f"The rack budget must be a whole number of "
                                              f"watts, not {rack_budget_w!r}.")
        if rack_budget_w <= 0:
            server_w = spec.supernode.server_draw(card_tdp_w).total_w
            raise BuildError("rack_budget_w", f"The rack budget must be positive, not "
                                              f"{rack_budget_w:,} W; one {spec.name} server "
                                              f"needs {server_w:,} W (default budget "
                                              f"{spec.rack_budget_w:,} W).")
    try:
        return spec.plan(supernodes, rack_budget_w, card_tdp_w)
    except RackBudgetError as exc:
        raise BuildError("rack_budget_w", f"Preset {spec.name!r} does not fit the rack "
                                          f"budget: {exc.message}") from exc
    except ValueError as exc:
        raise BuildError("supernodes", f"{exc} (asked for {supernodes} supernodes).") from exc


def _resolve(preset: str, name: str | None, supernodes: int | None,
             rack_budget_w: int | None, replace: bool) -> tuple[ClusterPlan, str, int]:
    spec = _preset(preset)
    accelerator_id, tdp = _catalogue_tdp(spec)
    plan = plan_build(preset, supernodes=supernodes, rack_budget_w=rack_budget_w,
                      card_tdp_w=tdp)
    cluster_name = (spec.default_name or spec.name) if name is None else name
    if not isinstance(cluster_name, str) or not cluster_name.strip():
        raise BuildError("name", "The cluster name must not be empty.")
    if len(cluster_name) > 100:
        raise BuildError("name", f"The cluster name is {len(cluster_name)} characters long; "
                                 f"keep it to 100.")
    from twin.hardware.models import Cluster

    if not replace and Cluster.objects.filter(name=cluster_name).exists():
        raise BuildError("name", f"A cluster named {cluster_name!r} exists; choose another "
                                 f"name, or pass --replace (API: \"replace\": true) to "
                                 f"rebuild it.")
    return plan, cluster_name, accelerator_id


def check_build(
    preset: str,
    *,
    name: str | None = None,
    supernodes: int | None = None,
    rack_budget_w: int | None = None,
    replace: bool = False,
) -> None:
    """Validate a build without writing anything; raises ``BuildError``."""
    _resolve(preset, name, supernodes, rack_budget_w, replace)


# --------------------------------------------------------------------------
# column values: numpy arrays or constants, per table column
# --------------------------------------------------------------------------

Values = dict[str, Any]


def digits(values: np.ndarray | int, width: int) -> int:
    """Width needed to print ``values`` zero-padded to at least ``width``."""
    top = int(np.max(values)) if np.size(values) else 0
    return max(width, len(str(top)))


def compose(n: int, *parts: bytes | tuple[np.ndarray, int]) -> np.ndarray:
    """Fixed-width byte strings built without a Python loop over rows.

    ``parts`` are constant byte strings or ``(integers, width)`` printed
    zero-padded: ``compose(3, b"sn", (np.arange(3), 4))`` →
    ``[b"sn0000", b"sn0001", b"sn0002"]``.
    """
    width = sum(len(p) if isinstance(p, bytes) else p[1] for p in parts)
    buf = np.empty((n, width), dtype=np.uint8)
    col = 0
    for part in parts:
        if isinstance(part, bytes):
            buf[:, col:col + len(part)] = np.frombuffer(part, dtype=np.uint8)
            col += len(part)
            continue
        numbers, w = part
        rest = np.asarray(numbers, dtype=np.int64).copy()
        for k in range(w - 1, -1, -1):
            buf[:, col + k] = 48 + rest % 10
            rest //= 10
        col += w
    return buf.reshape(-1).view(f"S{width}") if n else np.empty(0, dtype=f"S{width}")


def ordered_uuids(counter: np.ndarray, unix_ms: int) -> np.ndarray:
    """Version-7 UUIDs (RFC 9562) as 16-byte strings, in ``counter`` order.

    48-bit Unix milliseconds, then a 30-bit counter (the card's position in
    the build: RFC 9562's "fixed bit-length dedicated counter") in rand_a and
    the top of rand_b, then 44 random bits. Unique across builds (time and
    random bits) and sorted within one, so the unique index on ``uuid`` is
    appended to instead of written at random pages (v4 UUIDs made the card
    COPY markedly slower at a million rows).
    """
    n = len(counter)
    c = np.asarray(counter, dtype=np.uint64)
    if n and int(c.max()) >= 1 << 30:
        raise ValueError("UUID counter exceeds 30 bits")
    raw = np.frombuffer(os.urandom(16 * n), dtype=np.uint8).reshape(n, 16).copy()
    for i in range(6):
        raw[:, i] = (unix_ms >> (8 * (5 - i))) & 0xFF
    raw[:, 6] = 0x70 | ((c >> 26) & 0x0F).astype(np.uint8)
    raw[:, 7] = ((c >> 18) & 0xFF).astype(np.uint8)
    raw[:, 8] = 0x80 | ((c >> 12) & 0x3F).astype(np.uint8)
    raw[:, 9] = ((c >> 4) & 0xFF).astype(np.uint8)
    raw[:, 10] = (((c & 0x0F) << 4).astype(np.uint8)) | (raw[:, 10] & 0x0F)
    return raw.reshape(-1).view("S16")


_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def uuid_hex(values: np.ndarray) -> np.ndarray:
    """16-byte UUIDs as 32-character hex strings (Django's SQLite storage).

    Not ``bytes.hex()`` per item: numpy drops trailing NUL bytes of ``S16``
    items, which would shorten a UUID ending in ``00``.
    """
    raw = values.view(np.uint8).reshape(-1, 16)
    out = np.empty((len(raw), 32), dtype=np.uint8)
    out[:, 0::2] = _HEX[raw >> 4]
    out[:, 1::2] = _HEX[raw & 15]
    return out.reshape(-1).view("S32")


@dataclass
class Block:
    """Rows of one table with column values; every text column of a block has
    one width (the binary packer relies on it)."""

    table: str
    n: int
    values: Values


# --------------------------------------------------------------------------
# the row generator
# --------------------------------------------------------------------------

@dataclass
class IdBases:
    supernode: int
    rack: int
    server: int
    card: int
    device: int
    link: int


class Generator:
    """Generates every row of a plan as numpy blocks, batch by batch."""

    def __init__(self, plan: ClusterPlan, cluster_id: int, cluster_name: str,
                 accelerator_id: int, ids: IdBases, now: dt.datetime) -> None:
        self.plan = plan
        self.sn = plan.sn
        self.net = plan.preset.network
        self.fabric = plan.fabric
        self.cluster_id = cluster_id
        self.accelerator_id = accelerator_id
        self.ids = ids
        self.now = now
        self.unix_ms = int(now.timestamp() * 1000)
        self.N = plan.supernodes
        self.R = plan.racks_per_supernode
        self.per_rack = plan.compute.per_rack
        self.S = self.sn.servers
        self.C = self.sn.cards
        self.D = self.sn.devices_per_server
        self.w_sn = digits(self.N - 1, 4)
        self.w_srv = digits(self.S - 1, 3)
        self.w_card = digits(self.C - 1, 3)
        self.w_rack = digits(self.R - 1, 2)
        self.host_prefix = (slugify(cluster_name)[:60] or "cluster").encode() + b"-"
        self.serial_prefix = f"C{cluster_id}-".encode()
        self._templates()

    # -- per-supernode templates (local indices) ---------------------------
    def _templates(self) -> None:
        sn = self.sn
        c = np.arange(self.C, dtype=np.int64)
        self.card_server = c // sn.cards_per_server
        self.card_slot = c % sn.cards_per_server
        dx, dy, dz = sn.dims
        self.torus = sn.fabric in ("torus3d", "torus2d", "ring")
        self.cx, self.cy, self.cz = c % dx, (c // dx) % dy, c // (dx * dy)
        # scale-up pairs (local card indices)
        if sn.scale_up == "server_mesh":
            k = sn.cards_per_server
            ia, ib = np.triu_indices(k, 1)
            base = (np.arange(self.S, dtype=np.int64) * k)[:, None]
            self.su_a = (base + ia[None, :]).ravel()
            self.su_b = (base + ib[None, :]).ravel()
        else:
            pa, pb = [], []
            coords = [self.cx, self.cy, self.cz]
            for axis, size in enumerate(sn.dims):
                if size < 2:
                    continue
                nxt = [a.copy() for a in coords]
                nxt[axis] = (coords[axis] + 1) % size
                b = nxt[0] + dx * (nxt[1] + dy * nxt[2])
                keep = coords[axis] < size - 1 if size == 2 else np.ones(self.C, bool)
                pa.append(c[keep])
                pb.append(b[keep])
            self.su_a = np.concatenate(pa) if pa else np.empty(0, np.int64)
            self.su_b = np.concatenate(pb) if pb else np.empty(0, np.int64)
        # card → access device (local device index within the supernode)
        nsw, nnic = sn.pcie_switches_per_server, sn.nics_per_server
        if nsw:
            dev = self.card_slot * nsw // sn.cards_per_server
        else:
            dev = nsw + self.card_slot * nnic // sn.cards_per_server
        self.card_dev = self.card_server * self.D + dev
        self.card_dev_kind = L.PCIE
        # PCIe switch → NIC
        s = np.arange(self.S, dtype=np.int64)
        if nsw:
            k = np.arange(nsw, dtype=np.int64)
            self.sw_a = (s[:, None] * self.D + k[None, :]).ravel()
            self.sw_b = (s[:, None] * self.D + nsw + (k * nnic // nsw)[None, :]).ravel()
        else:
            self.sw_a = self.sw_b = np.empty(0, np.int64)
        # NIC endpoints in rail-major order: rail r of every server, then r + 1
        r = np.arange(nnic, dtype=np.int64)
        self.nic_local = (s[None, :] * self.D + nsw + r[:, None]).ravel()

    # -- id helpers --------------------------------------------------------
    def switch_base(self) -> int:
        return self.ids.device + self.N * self.S * self.D

    def _stamp(self) -> Values:
        return {"created": self.now, "last_updated": self.now}

    def _batches(self, rows_per_sn: int) -> Iterator[np.ndarray]:
        step = max(1, CHUNK_ROWS // max(rows_per_sn, 1))
        for start in range(0, self.N, step):
            yield np.arange(start, min(self.N, start + step), dtype=np.int64)

    # -- tables ------------------------------------------------------------
    def supernodes(self) -> Iterator[Block]:
        n = np.arange(self.N, dtype=np.int64)
        sn = self.sn
        yield Block("supernode", self.N, {
            **self._stamp(), "id": self.ids.supernode + n, "cluster_id": self.cluster_id,
            "name": compose(self.N, b"sn", (n, self.w_sn)), "index": n,
            "fabric": sn.fabric, "card_count": sn.cards, "dim_x": sn.dims[0],
            "dim_y": sn.dims[1], "dim_z": sn.dims[2], "link_gbps": sn.scale_up_gbps,
            "link_latency_ns": sn.scale_up_latency_ns,
            "switch_latency_ns": sn.switch_latency_ns,
            "in_switch_reduction": sn.in_switch_reduction,
        })

    def racks(self) -> Iterator[Block]:
        preset = self.plan.preset
        common = {**self._stamp(), "cluster_id": self.cluster_id,
                  "power_budget_w": self.plan.rack_budget_w, "cooling": preset.cooling,
                  "pue": preset.pue}
        for batch in self._batches(self.R):
            n = np.repeat(batch, self.R)
            r = np.tile(np.arange(self.R, dtype=np.int64), len(batch))
            yield Block("rack", len(n), {
                **common, "id": self.ids.rack + n * self.R + r,
                "supernode_id": self.ids.supernode + n,
                "name": compose(len(n), b"sn", (n, self.w_sn), b"-r", (r, self.w_rack)),
                "row": n, "slot": r,
            })
        m = self.plan.network_racks
        if m:
            j = np.arange(m, dtype=np.int64)
            row_len = 32
            yield Block("rack", m, {
                **common, "id": self.ids.rack + self.N * self.R + j, "supernode_id": None,
                "name": compose(m, b"net", (j, digits(m - 1, 4))),
                "row": self.N + j // row_len, "slot": j % row_len,
            })

    def servers(self) -> Iterator[Block]:
        sn = self.sn
        s = np.arange(self.S, dtype=np.int64)
        for batch in self._batches(self.S):
            n = np.repeat(batch, self.S)
            ss = np.tile(s, len(batch))
            name = compose(len(n), b"sn", (n, self.w_sn), b"-s", (ss, self.w_srv))
            host = compose(len(n), self.host_prefix + b"sn", (n, self.w_sn), b"-s",
                           (ss, self.w_srv))
            yield Block("server", len(n), {
                **self._stamp(), "id": self.ids.server + n * self.S + ss,
                "rack_id": self.ids.rack + n * self.R + ss // self.per_rack,
                "supernode_id": self.ids.supernode + n, "name": name,
                "position": ss % self.per_rack, "hostname": host,
                "cards_per_server": sn.cards_per_server, "overhead_w": sn.server_overhead_w,
                "nic_count": sn.nics_per_server, "nic_gbps": sn.nic.port_gbps,
            })

    def cards(self) -> Iterator[Block]:
        C = self.C
        for batch in self._batches(C):
            n = np.repeat(batch, C)
            tile = len(batch)
            idx = np.tile(np.arange(C, dtype=np.int64), tile)
            srv = np.tile(self.card_server, tile)
            values: Values = {
                **self._stamp(), "id": self.ids.card + n * C + idx,
                "supernode_id": self.ids.supernode + n,
                "server_id": self.ids.server + n * self.S + srv,
                "accelerator_id": self.accelerator_id, "index": idx,
                "slot": np.tile(self.card_slot, tile),
                "serial": compose(len(n), self.serial_prefix + b"sn", (n, self.w_sn), b"-g",
                                  (idx, self.w_card)),
                "uuid": ordered_uuids(n * C + idx, self.unix_ms),
                "status": CardStatusChoices.OK,
            }
            if self.torus:
                values.update(x=np.tile(self.cx, tile), y=np.tile(self.cy, tile),
                              z=np.tile(self.cz, tile))
            else:
                values.update(x=None, y=None, z=None)
            yield Block("card", len(n), values)

    def _device_common(self, spec: Any) -> Values:
        return {**self._stamp(), "cluster_id": self.cluster_id, "kind": spec.kind,
                "model": spec.model, "ports": spec.ports, "port_gbps": spec.port_gbps,
                "latency_ns": spec.latency_ns, "power_w": spec.power_w}

    def devices(self) -> Iterator[Block]:
        sn = self.sn
        kinds: list[tuple[Any, int, bytes]] = []
        if sn.pcie_switch is not None:
            kinds += [(sn.pcie_switch, k, b"-pcie") for k in range(sn.pcie_switches_per_server)]
        kinds += [(sn.nic, sn.pcie_switches_per_server + k, b"-nic")
                  for k in range(sn.nics_per_server)]
        s = np.arange(self.S, dtype=np.int64)
        for batch in self._batches(self.S * self.D):
            n = np.repeat(batch, self.S)
            ss = np.tile(s, len(batch))
            server = n * self.S + ss
            for spec, d, label in kinds:
                k = d if label == b"-pcie" else d - sn.pcie_switches_per_server
                yield Block("device", len(n), {
                    **self._device_common(spec), "id": self.ids.device + server * self.D + d,
                    "rack_id": self.ids.rack + n * self.R + ss // self.per_rack,
                    "server_id": self.ids.server + server,
                    "name": compose(len(n), b"sn", (n, self.w_sn), b"-s", (ss, self.w_srv),
                                    label + str(k).encode()),
                })
        # switches of the scale-out fabric, in network racks
        f = self.fabric
        base = self.switch_base()
        rack0 = self.ids.rack + self.N * self.R
        offset = 0
        for spec, count, label in ((self.net.leaf, f.leaves, b"leaf"),
                                   (self.net.spine, f.spines, b"spine"),
                                   (self.net.core, f.cores, b"core")):
            if not count:
                continue
            i = np.arange(count, dtype=np.int64)
            g = offset + i
            yield Block("device", count, {
                **self._device_common(spec), "id": base + g,
                "rack_id": rack0 + g // self.plan.network.per_rack, "server_id": None,
                "name": compose(count, label, (i, digits(count - 1, 5))),
            })
            offset += count

    def _link(self, n: int, kind: str, gbps: float, latency: float,
              a_card: Any = None, a_device: Any = None, b_card: Any = None,
              b_device: Any = None) -> Block:
        return Block("link", n, {
            **self._stamp(), "cluster_id": self.cluster_id, "a_card_id": a_card,
            "a_device_id": a_device, "b_card_id": b_card, "b_device_id": b_device,
            "kind": kind, "bandwidth_gbps": gbps, "latency_ns": latency,
            "status": LinkStatusChoices.UP,
        })

    def links(self) -> Iterator[Block]:
        """Every link, ids assigned in order from ``ids.link``."""
        next_id = self.ids.link
        for block in self._link_blocks():
            block.values["id"] = np.arange(next_id, next_id + block.n, dtype=np.int64)
            next_id += block.n
            yield block

    def _link_blocks(self) -> Iterator[Block]:
        sn, net, f = self.sn, self.net, self.fabric
        per_sn = len(self.su_a) + self.C + len(self.sw_a) + len(self.nic_local)
        half = f.half
        e_sn = len(self.nic_local)
        leaf0 = self.switch_base()
        for batch in self._batches(per_sn):
            t = len(batch)
            card0 = (self.ids.card + batch * self.C)[:, None]
            dev0 = (self.ids.device + batch * self.S * self.D)[:, None]
            if len(self.su_a):
                yield self._link(t * len(self.su_a), L.SCALE_UP, sn.scale_up_gbps,
                                 sn.scale_up_latency_ns,
                                 a_card=(card0 + self.su_a[None, :]).ravel(),
                                 b_card=(card0 + self.su_b[None, :]).ravel())
            yield self._link(t * self.C, self.card_dev_kind, sn.pcie_gbps, sn.pcie_latency_ns,
                             a_card=(card0 + np.arange(self.C)[None, :]).ravel(),
                             b_device=(dev0 + self.card_dev[None, :]).ravel())
            if len(self.sw_a):
                yield self._link(t * len(self.sw_a), L.PCIE, sn.pcie_gbps, sn.pcie_latency_ns,
                                 a_device=(dev0 + self.sw_a[None, :]).ravel(),
                                 b_device=(dev0 + self.sw_b[None, :]).ravel())
            endpoint = (batch * e_sn)[:, None] + np.arange(e_sn)[None, :]
            yield self._link(t * e_sn, net.link_kind, net.link_gbps, net.nic_leaf_latency_ns,
                             a_device=(dev0 + self.nic_local[None, :]).ravel(),
                             b_device=(leaf0 + endpoint // half).ravel())
        spine0 = leaf0 + f.leaves
        core0 = spine0 + f.spines
        if f.tiers == 2:
            leaf = np.arange(f.leaves, dtype=np.int64)
            spine = np.arange(f.spines, dtype=np.int64)
            a = np.repeat(leaf, f.spines * f.leaf_spine_parallel)
            b = np.tile(np.repeat(spine, f.leaf_spine_parallel), f.leaves)
            yield from self._chunked(L_kind=net.link_kind, gbps=net.link_gbps,
                                     latency=net.leaf_spine_latency_ns, a=leaf0 + a,
                                     b=spine0 + b)
        elif f.tiers == 3:
            leaf = np.arange(f.leaves, dtype=np.int64)
            pod = leaf // half
            a = np.repeat(leaf, half)
            b = (np.repeat(pod, half) * half) + np.tile(np.arange(half), f.leaves)
            yield from self._chunked(L_kind=net.link_kind, gbps=net.link_gbps,
                                     latency=net.leaf_spine_latency_ns, a=leaf0 + a,
                                     b=spine0 + b)
            spine = np.arange(f.spines, dtype=np.int64)
            group = spine % half
            per = f.cores_per_group * f.spine_core_parallel
            a = np.repeat(spine, per)
            t_ = np.tile(np.repeat(np.arange(f.cores_per_group), f.spine_core_parallel),
                         f.spines)
            b = np.repeat(group, per) * f.cores_per_group + t_
            yield from self._chunked(L_kind=net.link_kind, gbps=net.link_gbps,
                                     latency=net.spine_core_latency_ns, a=spine0 + a,
                                     b=core0 + b)

    def _chunked(self, *, L_kind: str, gbps: float, latency: float, a: np.ndarray,
                 b: np.ndarray) -> Iterator[Block]:
        for start in range(0, len(a), CHUNK_ROWS):
            end = min(len(a), start + CHUNK_ROWS)
            yield self._link(end - start, L_kind, gbps, latency, a_device=a[start:end],
                             b_device=b[start:end])

    def tables(self) -> list[tuple[str, Callable[[], Iterator[Block]], int]]:
        """(table, block generator, row count) in the order they are written."""
        p = self.plan
        return [
            ("supernode", self.supernodes, p.supernodes),
            ("rack", self.racks, p.racks),
            ("server", self.servers, p.servers),
            ("card", self.cards, p.cards),
            ("device", self.devices, p.devices),
            ("link", self.links, p.links),
        ]


# --------------------------------------------------------------------------
# writers
# --------------------------------------------------------------------------

def table_models() -> dict[str, type[models.Model]]:
    from twin.hardware.models import Card, Link, NetworkDevice, Rack, Server, SuperNode

    return {"supernode": SuperNode, "rack": Rack, "server": Server, "card": Card,
            "device": NetworkDevice, "link": Link}


def _columns(model: type[models.Model]) -> list[models.Field]:
    return list(model._meta.concrete_fields)


def _fill_defaults(model: type[models.Model], values: Values) -> Values:
    """Columns the generator does not set (e.g. added later) take their default."""
    out = dict(values)
    for f in _columns(model):
        if f.column not in out and f.attname not in out:
            if f.has_default():
                out[f.column] = f.get_default()
            elif f.null:
                out[f.column] = None
            else:
                raise RuntimeError(f"builder sets no value for {model.__name__}.{f.name}")
        elif f.column not in out:
            out[f.column] = out.pop(f.attname)
    return out


PG_EPOCH = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


def _pg_kind(db_type: str) -> str:
    t = db_type.lower()
    if t in ("bigint", "bigserial"):
        return "i8"
    if t in ("integer", "serial"):
        return "i4"
    if t == "smallint":
        return "i2"
    if t == "double precision":
        return "f8"
    if t == "real":
        return "f4"
    if t.startswith("timestamp"):
        return "ts"
    if t == "uuid":
        return "uuid"
    if t == "boolean":
        return "bool"
    if t == "jsonb":
        return "jsonb"
    if t.startswith("varchar") or t == "text" or t.startswith("char"):
        return "text"
    raise RuntimeError(f"no binary COPY encoder for column type {db_type!r}")


def _text_array(value: Any) -> np.ndarray | bytes:
    if isinstance(value, np.ndarray):
        return value
    return str(value).encode()


def pack_binary(kinds: list[tuple[str, str]], block: Block) -> bytes:
    """One block as PostgreSQL binary COPY rows (no header/trailer).

    Each row is ``int16 field count`` then per field ``int32 length`` and the
    big-endian value (length −1 and no bytes for NULL). Fixed-width text makes
    every row of a block the same layout, so a numpy structured array holds
    the block and ``tobytes()`` is the wire format.
    """
    n, values = block.n, block.values
    fields: list[tuple[str, str]] = [("nf", ">i2")]
    assign: list[tuple[str, int, Any]] = []
    for i, (column, kind) in enumerate(kinds):
        value = values[column]
        if value is None:
            fields.append((f"l{i}", ">i4"))
            assign.append((f"l{i}", -1, None))
            continue
        if kind == "ts":
            value = np.int64((value - PG_EPOCH) // dt.timedelta(microseconds=1))
            dtype, size = ">i8", 8
        elif kind == "uuid":
            if isinstance(value, uuid.UUID):
                value = value.bytes
            dtype, size = "S16", 16
        elif kind == "bool":
            dtype, size = "u1", 1
        elif kind == "jsonb":
            value = b"\x01" + json.dumps(value).encode()
            dtype, size = f"S{len(value)}", len(value)
        elif kind == "text":
            value = _text_array(value)
            size = value.dtype.itemsize if isinstance(value, np.ndarray) else len(value)
            dtype = f"S{size}"
        else:
            dtype, size = f">{kind}", int(kind[1])
        fields.append((f"l{i}", ">i4"))
        fields.append((f"v{i}", dtype))
        assign.append((f"l{i}", size, None))
        assign.append((f"v{i}", 0, value))
    rows = np.empty(n, dtype=np.dtype(fields))
    rows["nf"] = len(kinds)
    for name, length, value in assign:
        rows[name] = length if name[0] == "l" else value
    return rows.tobytes()


PG_HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"
PG_TRAILER = b"\xff\xff"


class Writer:
    """Writes blocks of one table at a time."""

    fk_mode = "triggers"
    """How foreign keys get checked: ``"triggers"`` (the database, row by row
    at commit) or ``"set-based"`` (``check_foreign_keys``, PostgreSQL)."""

    def __init__(self, progress: Callable[[int, str], None]) -> None:
        self.progress = progress

    def start(self) -> None:
        """Called once inside the transaction, before the first table."""

    def finish(self, ranges: dict[str, tuple[int, int]]) -> None:
        """Called after the last table with each table's (first id, count)."""

    def reserve(self, table: str, count: int) -> int:
        raise NotImplementedError

    def write(self, table: str, blocks: Iterator[Block]) -> int:
        raise NotImplementedError


class PostgresWriter(Writer):
    """``COPY … FROM STDIN (FORMAT BINARY)``, one statement per table.

    Foreign keys: PostgreSQL checks each one row by row (an RI trigger runs
    a ``SELECT … FOR KEY SHARE`` per row and key): ~20 M checks, ~5 µs each,
    for a million-card cluster, more than the COPY itself. Where the role may
    (a superuser, or PostgreSQL ≥ 15 with ``GRANT SET ON PARAMETER
    session_replication_role``), the writer turns those triggers off for the
    COPY with ``SET LOCAL session_replication_role = replica`` and checks
    every foreign key of the new rows *set-wise* instead (one anti-join per
    table, ``finish``) in the same transaction, having locked the rows
    outside the build that they point at (the accelerator type) ``FOR KEY
    SHARE`` as the triggers would. A violation raises and rolls everything
    back. Unique and check constraints are indexes and CHECKs, enforced
    either way. Without the privilege the triggers run as usual.
    """

    def __init__(self, progress: Callable[[int, str], None],
                 set_based_fk: bool = True) -> None:
        super().__init__(progress)
        self.set_based_fk = set_based_fk
        self.fk_mode = "triggers"

    def start(self) -> None:
        if not self.set_based_fk:
            return
        from django.db import DatabaseError

        try:
            with transaction.atomic(), connection.cursor() as cur:
                cur.execute("SET LOCAL session_replication_role = replica")
        except DatabaseError:
            self.fk_mode = "triggers"   # not allowed: the RI triggers check each row
        else:
            self.fk_mode = "set-based"

    def finish(self, ranges: dict[str, tuple[int, int]]) -> None:
        if self.fk_mode != "set-based":
            return
        from twin.hardware.models import Cluster

        written = {table_models()[t] for t in ranges} | {Cluster}
        with connection.cursor() as cur:
            cur.execute("SET LOCAL session_replication_role = origin")
            cur.execute("SET LOCAL work_mem = '256MB'")
            for table, (first, count) in ranges.items():
                if count:
                    check_foreign_keys(table_models()[table], first, first + count - 1,
                                       lock_outside=written)

    def reserve(self, table: str, count: int) -> int:
        """First id of ``count`` consecutive ids no one else will get.

        ``ALTER SEQUENCE`` takes a lock that blocks other sessions' ``nextval``
        until this transaction ends, so reading ``last_value`` and moving it
        on with ``setval`` cannot race; ids of a rolled-back build are skipped,
        as sequences always do.
        """
        model = table_models()[table]
        db_table = model._meta.db_table
        with connection.cursor() as cur:
            cur.execute("SELECT pg_get_serial_sequence(%s, %s)", [db_table, "id"])
            seq = cur.fetchone()[0]
            cur.execute(f"ALTER SEQUENCE {seq} INCREMENT BY 1")
            cur.execute(f"SELECT last_value, is_called FROM {seq}")
            last, called = cur.fetchone()
            first = last + 1 if called else last
            if count:
                cur.execute("SELECT setval(%s, %s, true)", [seq, first + count - 1])
        return int(first)

    def write(self, table: str, blocks: Iterator[Block]) -> int:
        model = table_models()[table]
        fields = _columns(model)
        kinds = [(f.column, _pg_kind(f.db_type(connection))) for f in fields]
        cols = ", ".join(connection.ops.quote_name(f.column) for f in fields)
        sql = f"COPY {connection.ops.quote_name(model._meta.db_table)} ({cols}) " \
              f"FROM STDIN (FORMAT BINARY)"
        written = 0
        with connection.cursor() as cur:
            raw = cur.cursor
            with raw.copy(sql) as copy:
                copy.write(PG_HEADER)
                for block in blocks:
                    data = pack_binary(kinds, Block(table, block.n,
                                                    _fill_defaults(model, block.values)))
                    copy.write(data)
                    written += block.n
                    self.progress(block.n, table)
                copy.write(PG_TRAILER)
        return written


def check_foreign_keys(model: type[models.Model], lo: int, hi: int, *,
                       lock_outside: set[type[models.Model]] | None = None) -> None:
    """Check every foreign key of ``model`` rows ``lo``–``hi`` in one query.

    One pass with a LEFT JOIN per key counts values that point nowhere;
    any such row raises ``IntegrityError``. With ``lock_outside`` (the
    models written by this transaction), referenced rows of *other* tables
    are first locked ``FOR KEY SHARE``, as PostgreSQL's RI triggers do, so
    no one can delete them before this transaction commits.
    """
    q = connection.ops.quote_name
    table = q(model._meta.db_table)
    fks = [f for f in _columns(model) if isinstance(f, models.ForeignKey)]
    if not fks:
        return
    joins, counts = [], []
    with connection.cursor() as cur:
        for i, f in enumerate(fks):
            ref = q(f.related_model._meta.db_table)
            col, key = q(f.column), q(f.target_field.column)
            if lock_outside is not None and f.related_model not in lock_outside:
                cur.execute(f"SELECT 1 FROM {ref} WHERE {key} IN (SELECT DISTINCT {col} "
                            f"FROM {table} WHERE id BETWEEN %s AND %s) FOR KEY SHARE",
                            [lo, hi])
            joins.append(f"LEFT JOIN {ref} r{i} ON r{i}.{key} = t.{col}")
            counts.append(f"count(*) FILTER (WHERE t.{col} IS NOT NULL AND r{i}.{key} IS NULL)")
        cur.execute(f"SELECT {', '.join(counts)} FROM {table} t {' '.join(joins)} "
                    f"WHERE t.id BETWEEN %s AND %s", [lo, hi])
        missing = cur.fetchone()
    bad = [f"{f.name}: {n:,}" for f, n in zip(fks, missing, strict=True) if n]
    if bad:
        raise IntegrityError(f"{model.__name__} rows {lo}–{hi} point at missing rows "
                             f"({', '.join(bad)})")


class SqliteWriter(Writer):
    """``executemany`` in chunks inside the IMMEDIATE transaction."""

    def reserve(self, table: str, count: int) -> int:
        model = table_models()[table]
        db_table = model._meta.db_table
        with connection.cursor() as cur:
            cur.execute(f'SELECT COALESCE(MAX(id), 0) FROM "{db_table}"')
            top = cur.fetchone()[0]
            cur.execute("SELECT seq FROM sqlite_sequence WHERE name = %s", [db_table])
            row = cur.fetchone()
        return int(max(top, row[0] if row else 0)) + 1

    def _column(self, field: models.Field, value: Any, n: int) -> list[Any]:
        if isinstance(value, np.ndarray):
            if value.dtype.kind == "S":
                if field.get_internal_type() == "UUIDField":
                    return [v.decode() for v in uuid_hex(value).tolist()]
                return [v.decode() for v in value.tolist()]
            return value.tolist()
        value = field.get_db_prep_save(value, connection)
        return [value] * n

    def write(self, table: str, blocks: Iterator[Block]) -> int:
        model = table_models()[table]
        fields = _columns(model)
        cols = ", ".join(connection.ops.quote_name(f.column) for f in fields)
        sql = (f"INSERT INTO {connection.ops.quote_name(model._meta.db_table)} ({cols}) "
               f"VALUES ({', '.join(['%s'] * len(fields))})")
        written = 0
        with connection.cursor() as cur:
            for block in blocks:
                values = _fill_defaults(model, block.values)
                columns = [self._column(f, values[f.column], block.n) for f in fields]
                cur.executemany(sql, list(zip(*columns, strict=True)))
                written += block.n
                self.progress(block.n, table)
        return written


# --------------------------------------------------------------------------
# delete, build
# --------------------------------------------------------------------------

def delete_cluster(cluster_id: int) -> None:
    """Delete a cluster and everything in it with set-based SQL.

    ``Cluster.delete()`` would load every card into Python to cascade; at a
    million cards that takes minutes and gigabytes. Rows of other apps that
    point at this cluster's hardware are handled first through the ORM, per
    their ``on_delete``.
    """
    from twin.hardware.models import Card, Cluster, Link, NetworkDevice, Rack, Server, SuperNode

    scopes: list[tuple[type[models.Model], models.QuerySet]] = [
        (Link, Link.objects.filter(cluster_id=cluster_id)),
        (Card, Card.objects.filter(supernode__cluster_id=cluster_id)),
        (NetworkDevice, NetworkDevice.objects.filter(cluster_id=cluster_id)),
        (Server, Server.objects.filter(rack__cluster_id=cluster_id)),
        (Rack, Rack.objects.filter(cluster_id=cluster_id)),
        (SuperNode, SuperNode.objects.filter(cluster_id=cluster_id)),
    ]
    ours = {m for m, _ in scopes} | {Cluster}
    for model, qs in scopes:
        for rel in model._meta.related_objects:
            if rel.related_model in ours or not rel.field.concrete:
                continue
            related = rel.related_model._base_manager.filter(
                **{f"{rel.field.name}__in": qs.values("pk")})
            if rel.on_delete is models.SET_NULL:
                related.update(**{rel.field.name: None})
            elif rel.on_delete is models.PROTECT:
                if related.exists():
                    raise BuildError("name", f"{rel.related_model._meta.verbose_name_plural} "
                                             f"still refer to this cluster's "
                                             f"{model._meta.verbose_name_plural}; remove "
                                             f"them before replacing it.")
            elif rel.on_delete is not models.DO_NOTHING:
                related.delete()
    for _model, qs in scopes:
        qs._raw_delete(qs.db)
    Cluster.objects.filter(pk=cluster_id).delete()


def build_cluster(
    preset: str,
    *,
    name: str | None = None,
    supernodes: int | None = None,
    rack_budget_w: int | None = None,
    replace: bool = False,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Build ``preset`` into the database in one transaction; see the module doc.

    ``progress(fraction, message)`` is called per chunk. Returns the summary
    (counts, power, racks per supernode, seconds). Raises ``BuildError``.
    """
    from twin.hardware.models import Cluster

    started = time.perf_counter()
    report = progress or (lambda fraction, message: None)
    plan, cluster_name, accelerator_id = _resolve(preset, name, supernodes, rack_budget_w,
                                                  replace)
    total = plan.rows
    done = 0

    def advance(rows: int, table: str) -> None:
        nonlocal done
        done += rows
        report(min(0.95, 0.95 * done / total), f"{table}s: {done:,} of {total:,} rows")

    postgres = connection.vendor == "postgresql"
    writer: Writer = (
        PostgresWriter(advance, getattr(settings, "TWIN_BUILDER_SET_BASED_FK", True))
        if postgres else SqliteWriter(advance))
    report(0.0, f"planning {plan.cards:,} cards in {plan.racks:,} racks")
    with transaction.atomic():
        if replace:
            old = (Cluster.objects.select_for_update().filter(name=cluster_name)
                   .values_list("pk", flat=True).first())
            if old is not None:
                report(0.0, f"deleting the old cluster {cluster_name!r}")
                delete_cluster(old)
        try:
            with transaction.atomic():
                cluster = Cluster.objects.create(
                    name=cluster_name, preset=plan.preset.name,
                    description=plan.preset.description)
        except IntegrityError as exc:
            raise BuildError("name", f"A cluster named {cluster_name!r} was created "
                                     f"meanwhile; pass --replace to rebuild it.") from exc
        ids = IdBases(**{table: writer.reserve(table, count)
                         for table, count in (("supernode", plan.supernodes),
                                              ("rack", plan.racks),
                                              ("server", plan.servers),
                                              ("card", plan.cards),
                                              ("device", plan.devices),
                                              ("link", plan.links))})
        gen = Generator(plan, cluster.pk, cluster_name, accelerator_id, ids,
                        timezone.now())
        writer.start()
        ranges: dict[str, tuple[int, int]] = {}
        for table, blocks, count in gen.tables():
            written = writer.write(table, blocks())
            if written != count:  # the plan and the generator must agree
                raise RuntimeError(f"wrote {written} {table} rows, planned {count}")
            ranges[table] = (getattr(ids, table), count)
        report(0.96, "checking constraints")
        writer.finish(ranges)
        if postgres and writer.fk_mode == "triggers":
            # Run the queued row-by-row checks now, inside the build (its error,
            # its progress), then give the caller's transaction back its
            # deferred constraints (Django declares them INITIALLY DEFERRED).
            with connection.cursor() as cur:
                cur.execute("SET CONSTRAINTS ALL IMMEDIATE")
                cur.execute("SET CONSTRAINTS ALL DEFERRED")
        report(0.99, "committing")
    if postgres:
        # A bulk load leaves the planner with no statistics until autovacuum
        # comes round (minutes): the dashboard's floor query took 5.9 s instead
        # of 1.4 s on a fresh million-card cluster. ANALYZE samples a fixed
        # number of rows per table, so this costs about a second at any size.
        report(0.995, "updating planner statistics")
        from twin.hardware.models import Card, Link, NetworkDevice, Rack, Server, SuperNode

        with connection.cursor() as cur:
            for model in (SuperNode, Rack, Server, Card, NetworkDevice, Link):
                cur.execute(f"ANALYZE {connection.ops.quote_name(model._meta.db_table)}")
    seconds = time.perf_counter() - started
    report(1.0, f"built {cluster_name!r} in {seconds:.1f} s")
    summary = plan.summary()
    return {
        "cluster_id": cluster.pk,
        "name": cluster_name,
        **summary,
        "seconds": round(seconds, 3),
        "rows": total + 1,
        "fk_checks": writer.fk_mode,
    }
