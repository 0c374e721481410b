"""Protocol efficiency: the fraction of a link's line rate a collective's data reaches.

A link's Gb/s is its signalling rate per direction. What a collective moves
is less: packet and flow-control headers, the collective library's own
protocol (NCCL's *Simple* protocol writes data plus flags; LL/LL128 trade
bandwidth for latency) and the copy engine or SMs that feed the link. The
twin keeps the link speeds as the hardware states them and applies one
documented efficiency per *fabric* — the scale-up fabric (NVLink, HCCS, a
torus) and the scale-out network (InfiniBand, RoCE) — to every bandwidth a
collective sees there (links and a card's injection limit alike). Results
report the efficiencies used; a run may override them.

The defaults are point-to-point measurements, not collective results, so
that the nccl-tests comparison in ``docs/simulation.md`` checks the model
instead of restating what it was fitted to:

``nvlink`` 0.84
    H100 GPU-to-GPU copies over NVLink 4 reach 371–380 GB/s of the 450 GB/s
    per direction (``p2pBandwidthLatencyTest`` on HGX H100, NVIDIA/nccl
    issue 1264: "unidirectional 380GB/s out of 450GB/s"): NVLink packet
    headers and flow control. (A100 over NVLink 3 measures 274 of 300 GB/s,
    0.91; one figure per technology is kept, the H100's.)
``nvlink5`` 0.86
    NVLink 5 through the GB200 NVL72's NVLink switch trays: ``nvbandwidth``
    GPU-to-GPU copies reach about 770 of the 900 GB/s per direction
    (Azure/AI-benchmarking-guide issue 7, ND GB200 v6).
``hccs`` 0.84
    No public measurement; taken equal to NVLink (a comparable SerDes fabric).
``pcie`` 0.86
    PCIe Gen5 ×16 copy-engine copies reach 55.4 GB/s of 64 GB/s (nvbandwidth
    on H200, stas00/ml-engineering ``network/README.md``): 128b/130b
    encoding, TLP headers and DLLPs.
``infiniband`` 0.98
    GPUDirect ``ib_send_bw`` on a ConnectX-7 NDR port reaches 393.7 Gb/s of
    400 (NVIDIA/nccl-tests issue 319): the IB headers (LRH, BTH, ICRC, VCRC,
    ~26 B per 4 KiB packet) and credits.
``roce`` 0.97
    The InfiniBand figure less RoCEv2's larger per-packet overhead (Ethernet
    + preamble/IFG, IPv4, UDP, BTH, ICRC: 82 B instead of 26 B per 4 KiB):
    0.98 × (4096/4178) / (4096/4122).
``generic`` 1.0
    an ideal link: with it every schedule reduces to its textbook closed form.

In-switch reduction (NVLS, NVLink SHARP) moves fewer bytes per card but
each multimem operation goes through the NVSwitch's reduction engine;
:data:`NVLS_EFFICIENCY` is the fraction of NVLink line rate those transfers
reach (see its docstring — the one constant here that is calibrated on a
collective figure, and how it is checked); NVLink 5's NVL72 domain has its
own (:data:`NVLS_EFFICIENCY_BY_TECHNOLOGY`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from simulation.topology.graph import Topology, TopologyError
from simulation.topology.spec import TECHNOLOGIES

__all__ = [
    "NVLS_EFFICIENCY",
    "NVLS_EFFICIENCY_BY_TECHNOLOGY",
    "PROTOCOL_EFFICIENCY",
    "Efficiency",
    "fabric_efficiency",
]

PROTOCOL_EFFICIENCY: Mapping[str, float] = {
    "generic": 1.0,
    "nvlink": 0.84,
    "nvlink5": 0.86,
    "hccs": 0.84,
    "pcie": 0.86,
    "infiniband": 0.98,
    "roce": 0.97,
}
"""Default fraction of line rate per link technology (module docstring)."""

NVLS_EFFICIENCY = 0.69
"""Fraction of NVLink line rate NVLS (multimem ld_reduce / st) transfers reach.

No point-to-point measurement of the NVSwitch reduction path is published,
so this one is calibrated: NVIDIA states ~480 GB/s busbw (algbw ~275 GB/s)
for NVLS all-reduce on 8 H100 (NVIDIA/nccl-tests issue 212). With the
model's S(1 + 1/p) bytes per card, 275 GB/s × 9/8 = 309 GB/s = 0.69 × 450.
The check is the shape, not that point: the same constant gives busbw
2(p−1)/(p+1) × 309 = 412, 441, 464 GB/s for 5, 6, 7 GPUs against the
420, 440, 460 measured (NVIDIA/nccl issue 1455), and below 5 GPUs the ring
wins, as NCCL's tuner finds. docs/simulation.md tabulates both.
"""

NVLS_EFFICIENCY_BY_TECHNOLOGY: Mapping[str, float] = {
    "nvlink": NVLS_EFFICIENCY,
    "nvlink5": 0.48,
}
"""NVLS transfer efficiency per NVLink generation (others: :data:`NVLS_EFFICIENCY`).

``nvlink5`` 0.48 — the GB200 NVL72's 72-GPU NVLink domain (NVLink 5, 18
NVLink switch chips in 9 trays), calibrated like the H100's on one nccl-tests
figure: a full NVL72 rack's all_reduce_perf reaches algbw 423 GB/s (busbw
835 GB/s) at 8 GiB (coreweave/nccl-tests pull request 43, "Add a GB200 NVL72
example"): 423 × 73/72 = 429 GB/s = 0.48 × 900. The H100's 0.69 would predict
busbw 1,208 GB/s there: across a rack the NVLS transfers reach a smaller share
of line rate than inside an 8-GPU board, and no public figure separates why
(switch-tray hops, NCCL's NVLS channel count). The checks are the rest of the
published curve (the 4 GiB point, 839 GB/s) and docs/simulation.md's table.
"""

assert set(PROTOCOL_EFFICIENCY) == set(TECHNOLOGIES)
assert set(NVLS_EFFICIENCY_BY_TECHNOLOGY) <= set(TECHNOLOGIES)


@dataclass(frozen=True)
class Efficiency:
    """Efficiencies in force for one collective, and where each came from."""

    scale_up: float
    scale_out: float
    scale_up_technology: str
    scale_out_technology: str
    nvls: float = NVLS_EFFICIENCY
    overridden: tuple[str, ...] = ()

    def describe(self) -> dict[str, Any]:
        """For results: each fraction with its technology (or "override")."""
        return {
            "scale_up": self.scale_up,
            "scale_up_from": "override"
            if "scale_up" in self.overridden
            else self.scale_up_technology,
            "scale_out": self.scale_out,
            "scale_out_from": "override"
            if "scale_out" in self.overridden
            else self.scale_out_technology,
            "nvls": self.nvls,
        }


def _check(value: float | None, name: str) -> None:
    if value is not None and not 0.0 < value <= 1.0:
        raise TopologyError(name, f"a fraction of line rate in (0, 1], got {value}")


def fabric_efficiency(
    topo: Topology, scale_up: float | None = None, scale_out: float | None = None
) -> Efficiency:
    """The efficiencies for ``topo``: its declared technologies' defaults,
    or the overrides given (each a fraction in (0, 1])."""
    _check(scale_up, "scale_up_efficiency")
    _check(scale_out, "scale_out_efficiency")
    up_tech = str(topo.params.get("scale_up_technology", "generic"))
    out_tech = str(topo.params.get("scale_out_technology", "generic"))
    overridden = tuple(
        name for name, v in (("scale_up", scale_up), ("scale_out", scale_out)) if v is not None
    )
    return Efficiency(
        scale_up=scale_up if scale_up is not None else PROTOCOL_EFFICIENCY.get(up_tech, 1.0),
        scale_out=scale_out if scale_out is not None else PROTOCOL_EFFICIENCY.get(out_tech, 1.0),
        scale_up_technology=up_tech,
        scale_out_technology=out_tech,
        nvls=NVLS_EFFICIENCY_BY_TECHNOLOGY.get(up_tech, NVLS_EFFICIENCY),
        overridden=overridden,
    )
