"""Realistic, correlated card telemetry for the simulated agent (vectorised numpy).

The model, per card, each step of ``dt`` seconds:

* **Work**: each server alternates between a training job (busy) and idle, a
  Markov chain with mean dwell times of 2 h busy and 5 min idle. Busy
  cards sit near 90–97 % utilization, idle ones near 0–3 %; utilization moves
  toward its target with a short time constant plus noise.
* **Power** = idle + (TDP − idle) × utilization, from the catalogue's figures
  (H100 SXM5: 70 W idle, 700 W TDP), ± 2 % noise.
* **Temperature** follows power with a thermal lag: the target is the coolant
  inlet + a thermal resistance × power (so a card at TDP settles near 45 K over
  its coolant), approached with a 20 s time constant. HBM runs a few degrees
  hotter. The inlet is 30 °C (liquid cooling) until the agent reads its rack's
  coolant from the live plant (``inlet_c``, per card: ``twin.facility.live``).
* The rest follows utilization: SM/tensor/DRAM activity, NVLink and PCIe
  traffic, HBM use, clocks (throttled above 85 °C), CPU, storage, checkpoint
  time (8–12 s), link latency (150–180 ns on the seed fabric), RDMA (1.2–1.8 µs).
* **Faults** (rate ``fault_rate`` per card per second, lasting 20–120 s):
  overheating, XID 79 (fallen off the bus: no work, idle power), a double-bit
  ECC error (XID 48), a link-latency excursion past 200 or 500 ns, an RDMA
  latency spike past 2 µs, a job crash (sudden utilization drop), a card that
  goes silent, and a whole server drawing 15 % over TDP (which can push its
  rack over 40 kW).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twin.telemetry.metrics import METRIC_INDEX, N_METRICS

__all__ = ["FAULTS", "Simulator"]

FAULTS = ("overheat", "xid79", "ecc", "link_slow", "link_broken", "rdma_slow", "job_crash",
          "silent", "power_excursion")
INLET_C = 30.0
THERMAL_TAU_S = 20.0


@dataclass
class _Fault:
    kind: np.ndarray  # int8, −1: none
    left: np.ndarray  # seconds remaining


class Simulator:
    def __init__(self, tdp_w: np.ndarray, idle_w: np.ndarray, hbm_gib: np.ndarray,
                 server_of: np.ndarray, *, seed: int = 0, fault_rate: float = 2e-5) -> None:
        self.n = len(tdp_w)
        self.rng = np.random.default_rng(seed)
        self.tdp = tdp_w.astype(np.float64)
        self.idle = idle_w.astype(np.float64)
        self.hbm = hbm_gib.astype(np.float64)
        _, self.server = np.unique(server_of, return_inverse=True)
        self.n_servers = int(self.server.max()) + 1 if self.n else 0
        self.busy = self.rng.random(self.n_servers) < 0.95
        self.util = np.where(self.busy[self.server], 90.0, 2.0) + self.rng.normal(0, 2, self.n)
        self.util = np.clip(self.util, 0, 100)
        self.inlet_c = np.full(self.n, INLET_C)
        """Coolant (or inlet air) temperature per card (°C): the live plant's, when read."""
        self.caps_w: np.ndarray | None = None
        """Power cap per card (W) from live capping (GET …/caps/), None: uncapped."""
        self.temp = INLET_C + self._r_th() * self._power(self.util)
        self.energy_kj = self.rng.uniform(1e5, 1e6, self.n)
        self.replays = np.zeros(self.n)
        self.ecc = np.zeros(self.n)
        self.fault_rate = fault_rate
        self.fault = _Fault(np.full(self.n, -1, np.int8), np.zeros(self.n))

    def _r_th(self) -> np.ndarray:
        # °C per W such that a card at TDP settles near 75 °C.
        return (75.0 - INLET_C) / self.tdp

    def _power(self, util: np.ndarray) -> np.ndarray:
        return self.idle + (self.tdp - self.idle) * util / 100.0

    def inject(self, kind: str, cards: np.ndarray, seconds: float = 60.0) -> None:
        """Start a fault on some cards now (tests and demos use it directly)."""
        k = FAULTS.index(kind)
        self.fault.kind[cards] = k
        self.fault.left[cards] = seconds
        if kind == "ecc":
            self.ecc[cards] += 1

    def _random_faults(self, dt: float) -> None:
        if self.fault_rate <= 0 or not self.n:
            return
        hit = (self.rng.random(self.n) < self.fault_rate * dt) & (self.fault.kind < 0)
        for card in np.flatnonzero(hit):
            kind = FAULTS[self.rng.integers(len(FAULTS))]
            seconds = float(self.rng.uniform(20, 120))
            if kind == "power_excursion":
                self.inject(kind, np.flatnonzero(self.server == self.server[card]), seconds)
            else:
                self.inject(kind, np.array([card]), seconds)

    def step(self, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """Advance ``dt`` seconds; returns (values (N_METRICS, n) float32 with NaN
        for silent cards, reporting mask)."""
        rng, n = self.rng, self.n
        self._random_faults(dt)
        flip_to_idle = self.busy & (rng.random(self.n_servers) < dt / 7200.0)
        flip_to_busy = ~self.busy & (rng.random(self.n_servers) < dt / 300.0)
        self.busy = (self.busy & ~flip_to_idle) | flip_to_busy
        kind = self.fault.kind
        target = np.where(self.busy[self.server], rng.uniform(90, 97, n), rng.uniform(0, 3, n))
        dead = (kind == FAULTS.index("xid79")) | (kind == FAULTS.index("job_crash"))
        target = np.where(dead, 0.0, target)
        a = 1.0 - np.exp(-dt / 3.0)
        self.util = np.clip(self.util + (target - self.util) * a + rng.normal(0, 1.0, n), 0, 100)
        util = np.where(dead, 0.0, self.util)
        power = self._power(util) * rng.normal(1.0, 0.02, n)
        power = np.where(kind == FAULTS.index("power_excursion"), self.tdp * 1.15, power)
        if self.caps_w is not None:  # live capping: the card's firmware holds its cap
            power = np.minimum(power, self.caps_w)
        r_th = self._r_th()
        target_temp = self.inlet_c + r_th * power
        target_temp = np.where(kind == FAULTS.index("overheat"), target_temp + 25.0,
                               target_temp)
        self.temp += (target_temp - self.temp) * (1.0 - np.exp(-dt / THERMAL_TAU_S))
        self.energy_kj += power * dt / 1000.0
        self.replays += rng.random(n) < 1e-4 * dt
        throttle = np.clip((self.temp - 85.0) / 15.0, 0, 0.5)
        frac = util / 100.0

        v = np.full((N_METRICS, n), np.nan)

        def put(key: str, values: np.ndarray) -> None:
            v[METRIC_INDEX[key]] = values

        put("gpu_util", util)
        put("flops_util", util * rng.uniform(0.80, 0.90, n))
        put("tensor_active", util * rng.uniform(0.55, 0.70, n))
        put("gr_engine_active", util * 0.97)
        put("dram_active", util * rng.uniform(0.40, 0.55, n))
        put("power_w", power)
        put("gpu_temp_c", self.temp)
        put("mem_temp_c", self.temp + 4.0 + rng.normal(0, 0.5, n))
        used = self.hbm * np.where(self.busy[self.server] & ~dead, 0.85, 0.02)
        put("hbm_used_gib", used)
        put("hbm_free_gib", self.hbm - used)
        put("sm_clock_mhz", 1980.0 * (1.0 - throttle) * np.where(frac > 0.05, 1.0, 0.175))
        put("mem_clock_mhz", np.full(n, 2619.0))
        put("xid_errors", np.select([kind == FAULTS.index("xid79"), kind == FAULTS.index("ecc")],
                                    [79.0, 48.0], 0.0))
        put("ecc_errors", self.ecc.copy())
        put("nvlink_gbps", frac * rng.uniform(250, 400, n))
        put("pcie_tx_gbps", frac * rng.uniform(5, 20, n))
        put("pcie_rx_gbps", frac * rng.uniform(5, 20, n))
        put("pcie_replay", self.replays.copy())
        put("allreduce_latency_us", np.where(frac > 0.05, rng.uniform(180, 320, n), np.nan))
        put("p2p_gbps", np.where(frac > 0.05, rng.uniform(330, 380, n), np.nan))
        put("cpu_util", np.clip(10 + frac * 40 + rng.normal(0, 3, n), 0, 100))
        put("storage_gbps", frac * rng.uniform(0.5, 4.0, n))
        put("checkpoint_write_s", rng.uniform(8, 12, n))
        latency = rng.uniform(150, 180, n)
        latency = np.where(kind == FAULTS.index("link_slow"), rng.uniform(260, 400, n), latency)
        latency = np.where(kind == FAULTS.index("link_broken"), rng.uniform(600, 900, n),
                           latency)
        put("link_latency_ns", latency)
        rdma = rng.uniform(1.2, 1.8, n)
        put("rdma_latency_us", np.where(kind == FAULTS.index("rdma_slow"),
                                        rng.uniform(2.5, 4.0, n), rdma))
        put("energy_kj", self.energy_kj.copy())

        reporting = kind != FAULTS.index("silent")
        v[:, ~reporting] = np.nan
        self.fault.left -= dt
        ended = self.fault.left <= 0
        # The card is reset when its fault ends: volatile ECC counters go back to 0.
        self.ecc[ended & (self.fault.kind == FAULTS.index("ecc"))] = 0
        self.fault.kind[ended] = -1
        self.fault.left[ended] = 0
        return v.astype(np.float32), reporting
