"""Benchmark: Prometheus remote write against the native columnar path, in one run.

Usage (SQLite + the embedded Redis unless ``DATABASE_URL`` / ``REDIS_URL`` say otherwise)::

    .venv/bin/python benchmarks/remote_write.py                  # 8,192 cards
    .venv/bin/python benchmarks/remote_write.py --cards 65536 --repeat 2

What a web process spends to turn one scrape of every card (``--cards`` H100s of a
``seed-512`` cluster, built once and kept as ``rw-bench``; ten DCGM fields per
card, dcgm-exporter's labels plus Prometheus' ``job``/``instance``) into batches on
the ingest stream. The workers' side is the same for every format (the same
``Batch`` goes on the stream), so this is where the formats differ:

1. **Parse** (in this process, no HTTP): bodies → validated ``Batch`` for

   * remote write: snappy + protobuf ``WriteRequest`` of 2,000 samples each (what
     Prometheus sends, ``queue_config.max_samples_per_send``), decoded by
     ``twin.telemetry.remote_write`` and mapped by the DCGM text path's code —
     *cold* (first request of a series: its labels decoded) and *warm* (a steady
     sender: the labels come from the cache);
   * native columnar msgpack (float32 columns over a slice of the layout,
     ``--chunk`` cards per batch): the **baseline**;
   * DCGM text (Prometheus exposition, one node's exporter output per 8 cards,
     pushed to ``…/metrics/``), for reference.

2. **Endpoint** (Django's test client in this process: authentication, body
   reading, parsing, the enqueue script on the real Redis; the stream is cleared
   between rounds, untimed): the same bodies through ``…/write``, ``…/batches/``
   and ``…/metrics/``.

Figures are CPU time of this process (the best of ``--repeat`` rounds; wall time
on a shared machine also counts other processes' turns), values per CPU second
(one card's one metric = one value) and the ratio of each path to the columnar
baseline measured in the same run. The endpoint rows leave out Redis's own CPU
(another process), which every format pays alike.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.seedcluster import ensure_cluster, setup  # noqa: E402

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.settings")
os.environ.setdefault("TWIN_ALLOW_INSECURE_KEY", "1")
os.environ["TWIN_TELEMETRY_PREFIX"] = f"twbench{uuid.uuid4().hex[:6]}"
CLUSTER = "rw-bench"
SAMPLES_PER_SEND = 2000

FIELDS = [  # DCGM field, metric key, value range in the exporter's unit
    ("DCGM_FI_DEV_GPU_UTIL", "gpu_util", 0, 100),
    ("DCGM_FI_DEV_POWER_USAGE", "power_w", 80, 700),
    ("DCGM_FI_DEV_GPU_TEMP", "gpu_temp_c", 30, 80),
    ("DCGM_FI_DEV_MEMORY_TEMP", "mem_temp_c", 30, 85),
    ("DCGM_FI_DEV_FB_USED", "hbm_used_gib", 0, 81920),
    ("DCGM_FI_DEV_FB_FREE", "hbm_free_gib", 0, 81920),
    ("DCGM_FI_DEV_SM_CLOCK", "sm_clock_mhz", 300, 1980),
    ("DCGM_FI_DEV_MEM_CLOCK", "mem_clock_mhz", 1000, 2619),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "tensor_active", 0, 1),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "dram_active", 0, 1),
]


def bodies(lay: Any, chunk: int) -> dict[str, list[bytes]]:
    """The same readings of every card in the three formats."""
    import msgpack
    import numpy as np

    from tests.telemetry import promwrite
    from twin.hardware.models import Card
    from twin.telemetry.metrics import DCGM_FIELDS

    rng = np.random.default_rng(1)
    n = lay.n
    raw = np.array([rng.uniform(lo, hi, n) for _, _, lo, hi in FIELDS])
    raw = np.round(raw, 1)
    cards = {c["id"]: c for c in Card.objects.filter(supernode__cluster_id=lay.cluster_id)
             .values("id", "uuid", "slot", "server__hostname")}
    info = [cards[int(cid)] for cid in lay.card_ids]
    now_ms = int(time.time() * 1000)
    series = []
    for k, c in enumerate(info):
        base = {"gpu": str(c["slot"]), "UUID": f"GPU-{c['uuid']}",
                "pci_bus_id": f"00000000:{0x18 + c['slot']:02X}:00.0",
                "device": f"nvidia{c['slot']}", "modelName": "NVIDIA H100 80GB HBM3",
                "Hostname": c["server__hostname"], "DCGM_FI_DRIVER_VERSION": "550.54.15",
                "job": "dcgm", "instance": f"{c['server__hostname']}:9400"}
        for m, (field, *_rest) in enumerate(FIELDS):
            series.append(({"__name__": field, **base}, [(float(raw[m, k]), now_ms)]))
    remote = [promwrite.snappy(promwrite.encode_request(series[i:i + SAMPLES_PER_SEND]))
              for i in range(0, len(series), SAMPLES_PER_SEND)]
    ours = np.array([raw[m] * DCGM_FIELDS[field][1] for m, (field, *_r) in enumerate(FIELDS)],
                    dtype="<f4")
    columnar = [msgpack.packb({
        "seq": 0, "cards": {"range": [s, min(chunk, n - s)], "layout": lay.version},
        "columns": {key: ours[m, s:s + chunk].tobytes()
                    for m, (_f, key, *_r) in enumerate(FIELDS)}})
        for s in range(0, n, chunk)]
    text = []
    for s in range(0, n, 8):  # one exporter (node) per 8 cards
        lines = []
        for m, (field, *_r) in enumerate(FIELDS):
            for k in range(s, min(s + 8, n)):
                labels = {kk: v for kk, v in series[k * len(FIELDS)][0].items()
                          if kk not in ("__name__", "job", "instance")}
                text_labels = ",".join(f'{kk}="{v}"' for kk, v in labels.items())
                lines.append(f"{field}{{{text_labels}}} {raw[m, k]:g}")
        text.append(("\n".join(lines) + "\n").encode())
    return {"remote": remote, "columnar": columnar, "text": text}


def parse_all(kind: str, items: list[bytes], lay: Any) -> int:
    """Bodies → batches in this process; returns the values accepted."""
    from twin.telemetry import ingest, prometheus, remote_write

    values = 0
    for body in items:
        if kind == "remote":
            samples, _, _ = remote_write.decode_samples(remote_write.decompress(body))
            batch = prometheus.batch_from_exposition(samples, lay, where="series")
        elif kind == "columnar":
            doc = ingest.decode_document(body, "application/msgpack")
            batch = ingest.parse_native(doc, lay)
        else:
            samples, _, _ = prometheus.parse_exposition(body.decode())
            batch = prometheus.batch_from_exposition(samples, lay)
        values += batch.accepted_values()
    return values


def timed(fn: Any, repeat: int) -> tuple[float, Any]:
    """(least CPU seconds of this process over ``repeat`` runs, the result). CPU time,
    not wall time: on a shared machine the wall clock also counts the time other
    processes held the cores."""
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.process_time()
        result = fn()
        best = min(best, time.process_time() - started)
    return best, result


def through_endpoint(kind: str, items: list[bytes], cid: int, token: str) -> int:
    from django.test import Client

    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    url, headers = {
        "remote": (f"/api/telemetry/clusters/{cid}/write",
                   {"content_type": "application/x-protobuf", "HTTP_CONTENT_ENCODING": "snappy"}),
        "columnar": (f"/api/telemetry/clusters/{cid}/batches/",
                     {"content_type": "application/msgpack"}),
        "text": (f"/api/telemetry/clusters/{cid}/metrics/", {"content_type": "text/plain"}),
    }[kind]
    values = 0
    for seq, body in enumerate(items, start=1):
        if kind == "columnar":  # a fresh seq per batch, as an agent sends
            import msgpack

            doc = msgpack.unpackb(body)
            doc["seq"] = int(time.time() * 1e6) + seq
            body = msgpack.packb(doc)
        response = client.post(url, body, **headers)
        if response.status_code not in (200, 202):
            sys.exit(f"{kind}: HTTP {response.status_code} {response.content[:300]!r}")
        values += response.json()["values"]
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cards", type=int, default=8192)
    parser.add_argument("--chunk", type=int, default=8192, help="cards per columnar batch")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; the best counts")
    args = parser.parse_args()
    setup()
    from django.conf import settings

    from twin.telemetry import keys, remote_write, state
    from twin.telemetry.models import TelemetryAgent

    settings.TELEMETRY_AUTO_DRAIN = False
    settings.TELEMETRY_MAX_BODY_BYTES = 64 * 1024 * 1024
    settings.TELEMETRY_MAX_BACKLOG = 1_000_000
    cluster = ensure_cluster(CLUSTER, args.cards)
    lay = state.layout(cluster.pk)
    lay.uuid_map()
    lay.host_map()
    print("encoding the bodies …", flush=True)
    data = bodies(lay, args.chunk)
    n_values = lay.n * len(FIELDS)
    sizes = {k: sum(map(len, v)) for k, v in data.items()}
    print(f"\n{lay.n:,} cards × {len(FIELDS)} DCGM fields = {n_values:,} values per scrape")
    for kind, label in (("remote", "remote write"), ("columnar", "columnar msgpack"),
                        ("text", "DCGM text")):
        print(f"  {label:17s} {len(data[kind]):6,} bodies, {sizes[kind] / 1e6:8.2f} MB")

    print("\n1. parse (bodies → batches, this process)")
    remote_write._label_cache.clear()
    cold, got = timed(lambda: parse_all("remote", data["remote"], lay), 1)
    assert got == n_values, (got, n_values)
    rows = [("remote write, cold", cold)]
    for kind, label in (("remote", "remote write, warm"), ("columnar", "columnar (baseline)"),
                        ("text", "DCGM text")):
        seconds, got = timed(lambda kind=kind: parse_all(kind, data[kind], lay), args.repeat)
        assert got == n_values, (kind, got, n_values)
        rows.append((label, seconds))
    base = dict(rows)["columnar (baseline)"]
    for label, seconds in rows:
        print(f"  {label:22s} {seconds * 1000:9.1f} ms CPU  {n_values / seconds:14,.0f} values/s"
              f"  {seconds / base:7.1f} × the columnar time")

    print("\n2. through the endpoint (auth, parse, enqueue on Redis; Django test client)")
    agent, token = TelemetryAgent.issue(cluster, f"bench-{uuid.uuid4().hex[:6]}")
    r = state.redis_client()
    ends = []
    try:
        for kind, label in (("remote", "remote write (warm)"), ("columnar", "columnar (baseline)"),
                            ("text", "DCGM text")):
            best = float("inf")
            for _ in range(args.repeat):
                r.delete(keys.stream(), keys.stream_bytes())
                started = time.process_time()
                got = through_endpoint(kind, data[kind], cluster.pk, token)
                best = min(best, time.process_time() - started)
                assert got == n_values, (kind, got, n_values)
            ends.append((label, best))
        base = dict(ends)["columnar (baseline)"]
        for label, seconds in ends:
            print(f"  {label:22s} {seconds * 1000:9.1f} ms CPU  {n_values / seconds:14,.0f} "
                  f"values/s  {seconds / base:7.1f} × the columnar time")
    finally:
        r.delete(keys.stream(), keys.stream_bytes())
        for key in r.scan_iter(match=f"{os.environ['TWIN_TELEMETRY_PREFIX']}:*", count=1000):
            r.unlink(key)
        agent.delete()


if __name__ == "__main__":
    main()
