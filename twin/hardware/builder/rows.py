"""The row generator: every row of a plan as numpy blocks, batch by batch.

Ids are the reserved range of each table plus array arithmetic (``IdBases``),
so foreign keys need no lookup; torus neighbours, rails and fat-tree wiring
are index arithmetic over per-supernode templates. Batches hold whole
supernodes, about ``CHUNK_ROWS`` rows each, so memory stays bounded.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.utils.text import slugify

from twin.hardware.builder.columns import Block, Values, compose, digits, ordered_uuids
from twin.hardware.choices import CardStatusChoices, LinkStatusChoices
from twin.hardware.choices import LinkKindChoices as L
from twin.hardware.presets import ClusterPlan

__all__ = ["CHUNK_ROWS", "Generator", "IdBases"]

# Rows per COPY/executemany chunk: big enough to amortise per-chunk work,
# small enough that a chunk stays a few tens of MB.
CHUNK_ROWS = 200_000


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
        elif sn.scale_up == "full_mesh":  # one switch domain over every card (NVL72)
            self.su_a, self.su_b = (a.astype(np.int64) for a in np.triu_indices(self.C, 1))
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
        row_len = 32
        if m:
            j = np.arange(m, dtype=np.int64)
            yield Block("rack", m, {
                **common, "id": self.ids.rack + self.N * self.R + j, "supernode_id": None,
                "name": compose(m, b"net", (j, digits(m - 1, 4))),
                "row": self.N + j // row_len, "slot": j % row_len,
            })
        k = self.plan.storage_racks
        if k:  # the file system's racks, in the rows after the network's
            j = np.arange(k, dtype=np.int64)
            yield Block("rack", k, {
                **common, "id": self.storage_rack0() + j, "supernode_id": None,
                "name": compose(k, b"stor", (j, digits(k - 1, 4))),
                "row": self.N + -(-m // row_len) + j // row_len, "slot": j % row_len,
            })

    def storage_rack0(self) -> int:
        return self.ids.rack + self.N * self.R + self.plan.network_racks

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
                **self._server_storage(),
            })

    def _server_storage(self) -> Values:
        """Host memory and local NVMe: one constant per column, whatever the batch size."""
        nvme = self.sn.nvme
        return {"memory_gib": self.sn.memory_gib, "nvme_tb": nvme.tb if nvme else 0.0,
                "nvme_read_gb_per_s": nvme.read_gb_per_s if nvme else 0.0,
                "nvme_write_gb_per_s": nvme.write_gb_per_s if nvme else 0.0}

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
                "latency_ns": spec.latency_ns, "power_w": spec.power_w,
                "capacity_tb": None, "read_gb_per_s": None, "write_gb_per_s": None}

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
        yield from self._appliances(base + offset)

    def _appliances(self, first_id: int) -> Iterator[Block]:
        """The parallel file system's appliances, after the switches, in storage racks."""
        pfs, count = self.plan.preset.pfs, self.plan.pfs_appliances
        if pfs is None or not count:
            return
        i = np.arange(count, dtype=np.int64)
        per_rack = self.plan.storage.per_rack if self.plan.storage else count
        yield Block("device", count, {
            **self._device_common(pfs.device), "id": first_id + i,
            "rack_id": self.storage_rack0() + i // per_rack, "server_id": None,
            "name": compose(count, b"pfs", (i, digits(count - 1, 3))),
            "capacity_tb": pfs.capacity_tb, "read_gb_per_s": pfs.read_gb_per_s,
            "write_gb_per_s": pfs.write_gb_per_s,
        })

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
