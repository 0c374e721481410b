"""Readers of public cluster traces, streamed row by row, with per-row errors.

* Alibaba GPU trace v2023 (``alibaba/clusterdata``, ``cluster-trace-gpu-v2023``;
  Weng et al., ATC'23): node list ``sn,cpu_milli,memory_mib,gpu,model`` and pod
  list ``name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
  creation_time,deletion_time,scheduled_time`` (times in seconds; ``gpu_spec``
  empty or ``"|"``-separated models; ``scheduled_time`` empty for pods never
  scheduled). A pod arrives at ``creation_time`` and runs until
  ``deletion_time``.
* Helios ``cluster_log.csv`` (``S-Lab-System-Group/HeliosData``; Hu et al.,
  SC'21): ``job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,
  start_time,end_time,duration,queue``, times ``YYYY-MM-DD HH:MM:SS``,
  duration in seconds.
* Philly ``cluster_job_log`` (``msr-fiddle/philly-traces``; Jeon et al.,
  ATC'19): a JSON list of jobs ``{jobid, vc, user, status, submitted_time,
  attempts: [{start_time, end_time, detail: [{ip, gpus: [...]}]}]}``; the
  cards are those of the first attempt, the duration that of the last; a job
  with no attempt or no times is skipped (the trace's README says logging
  lost some).

Every reader takes a text stream and never holds the file: rows become
columns as they come. A bad row is recorded as a :class:`TraceError` (1-based
line, field) and skipped; after ``max_errors`` the reader stops; if any row
was bad it raises one TraceError carrying them all (``.errors``), so a bad
file yields nothing.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import IO, Any

import numpy as np

from .cluster import DEFAULT_VF_LIMIT, Nodes
from .errors import TraceError
from .workload import Workload

__all__ = [
    "ALIBABA_NODE_COLUMNS",
    "ALIBABA_POD_COLUMNS",
    "ALIBABA_POD_REQUIRED",
    "HELIOS_COLUMNS",
    "QOS_PRIORITY",
    "read_alibaba_nodes",
    "read_alibaba_pods",
    "read_helios",
    "read_philly",
]

ALIBABA_NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
ALIBABA_POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec",
                       "qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time")
ALIBABA_POD_REQUIRED = ALIBABA_POD_COLUMNS[:5]
"""The columns every openb pod list has: ``openb_pod_list_multigpu*.csv`` have only these
(no times: the pods arrive in file order)."""
HELIOS_COLUMNS = ("job_id", "gpu_num", "submit_time")
QOS_PRIORITY = {"Guaranteed": 3, "LS": 2, "Burstable": 1, "BE": 0}
"""Queue priority of the trace's QoS classes (Kubernetes QoS; LS = latency-sensitive)."""

_NULL = {"", "nan", "NaN", "None", "null"}


class _Errors:
    def __init__(self, max_errors: int) -> None:
        self.max = max(1, max_errors)
        self.items: list[TraceError] = []

    def add(self, line: int, field: str | None, message: str) -> None:
        self.items.append(TraceError(message, line=line, field=field))

    @property
    def full(self) -> bool:
        return len(self.items) >= self.max

    def raise_if_any(self, what: str) -> None:
        if self.items:
            first = self.items[0]
            more = f" (+{len(self.items) - 1} more)" if len(self.items) > 1 else ""
            stopped = f"; stopped after {self.max} errors" if self.full else ""
            raise TraceError(f"bad {what}: {first}{more}{stopped}", line=first.line,
                             field=first.field, errors=list(self.items))


def _rows(
    stream: IO[str], required: tuple[str, ...], what: str
) -> Iterator[tuple[int, dict[str, str]]]:
    reader = csv.DictReader(stream)
    header = reader.fieldnames
    if not header:
        raise TraceError(f"empty {what}: expected a header with {', '.join(required)}", line=1)
    header = [h.strip() for h in header]
    reader.fieldnames = header
    missing = [c for c in required if c not in header]
    if missing:
        raise TraceError(
            f"the header of the {what} lacks {', '.join(missing)} (has {', '.join(header)})",
            line=1, field=missing[0])
    for row in reader:
        yield reader.line_num, row


def _int(
    row: Mapping[str, str | None], key: str, *, lo: int = 0, default: int | None = None
) -> int:
    raw = (row.get(key) or "").strip()
    if raw in _NULL:
        if default is not None:
            return default
        raise ValueError("is empty")
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{raw!r} is not a number") from None
    if value != int(value):
        raise ValueError(f"{raw!r} is not an integer")
    if value < lo:
        raise ValueError(f"{raw} is below {lo}")
    return int(value)


def read_alibaba_nodes(stream: IO[str], *, max_errors: int = 20,
                       vf_limit: int = DEFAULT_VF_LIMIT, servers_per_rack: int = 4) -> Nodes:
    """Nodes from an Alibaba v2023 node list (``openb_node_list_*.csv``).

    Racks are formed of ``servers_per_rack`` consecutive rows, one supernode; the
    trace gives no location.
    """
    errors = _Errors(max_errors)
    records: list[dict[str, Any]] = []
    for line, row in _rows(stream, ALIBABA_NODE_COLUMNS, "node list"):
        rec: dict[str, Any] = {"name": (row.get("sn") or "").strip()}
        ok = True
        for key, out in (("cpu_milli", "cpu_milli"), ("memory_mib", "memory_mib"),
                         ("gpu", "gpus")):
            try:
                rec[out] = _int(row, key)
            except ValueError as exc:
                errors.add(line, key, str(exc))
                ok = False
        if not rec["name"]:
            errors.add(line, "sn", "is empty")
            ok = False
        model = (row.get("model") or "").strip()
        rec["gpu_model"] = "" if model in _NULL else model
        if ok and rec["gpus"] > 0 and not rec["gpu_model"]:
            errors.add(line, "model", "is empty for a node with GPUs")
            ok = False
        if ok:
            n = len(records)
            rec.update(server=n, rack=n // max(1, servers_per_rack), supernode=0,
                       vf_limit=vf_limit)
            records.append(rec)
        if errors.full:
            break
    errors.raise_if_any("node list")
    if not records:
        raise TraceError("the node list has no nodes", line=2)
    return Nodes.from_records(records)


class _Columns:
    def __init__(self) -> None:
        self.cols: dict[str, list[Any]] = {k: [] for k in (
            "name", "tenant", "arrival_s", "duration_s", "num_gpu", "gpu_milli", "cpu_milli",
            "memory_mib", "gpu_model", "priority", "gang")}

    def add(self, **kw: Any) -> None:
        for k, v in kw.items():
            self.cols[k].append(v)

    def workload(self, rebase: bool) -> Workload:
        arr = np.asarray(self.cols["arrival_s"], np.float64)
        if rebase and arr.size:
            arr = arr - arr.min()
        cols: dict[str, Any] = dict(self.cols)
        cols["arrival_s"] = arr
        return Workload(**cols)


def read_alibaba_pods(stream: IO[str], *, max_errors: int = 20) -> Workload:
    """Tasks from an Alibaba v2023 pod list (``openb_pod_list_*.csv``).

    Only :data:`ALIBABA_POD_REQUIRED` must be present; without ``creation_time`` a pod
    arrives at its 0-based row index (seconds), keeping the file order.
    """
    errors = _Errors(max_errors)
    out = _Columns()
    for line, row in _rows(stream, ALIBABA_POD_REQUIRED, "pod list"):
        vals: dict[str, int] = {}
        bad = False
        for key in ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli"):
            try:
                vals[key] = _int(row, key)
            except ValueError as exc:
                errors.add(line, key, str(exc))
                bad = True
        try:
            vals["creation_time"] = (_int(row, "creation_time") if "creation_time" in row
                                     else len(out.cols["name"]))
        except ValueError as exc:
            errors.add(line, "creation_time", str(exc))
            bad = True
        for key in ("deletion_time", "scheduled_time"):
            try:
                vals[key] = _int(row, key, default=-1)
            except ValueError as exc:
                errors.add(line, key, str(exc))
                bad = True
        if not bad:
            k, m = vals["num_gpu"], vals["gpu_milli"]
            if k == 0 and m != 0:
                errors.add(line, "gpu_milli", f"is {m} for a pod without GPUs (expected 0)")
                bad = True
            elif k == 1 and not 1 <= m <= 1000:
                errors.add(line, "gpu_milli", f"is {m}; one GPU takes 1..1000")
                bad = True
            elif k > 1 and m != 1000:
                errors.add(line, "gpu_milli", f"is {m}; a pod of {k} GPUs takes whole ones (1000)")
                bad = True
        if not bad:
            start = vals["creation_time"]
            end = vals["deletion_time"]
            if end >= 0 and end < start:
                errors.add(line, "deletion_time", f"{end} is before creation_time {start}")
                bad = True
        if not bad:
            spec = (row.get("gpu_spec") or "").strip()
            qos = (row.get("qos") or "").strip()
            out.add(
                name=(row.get("name") or f"pod-{line}").strip(), tenant=qos,
                arrival_s=float(vals["creation_time"]),
                duration_s=float(max(vals["deletion_time"] - vals["creation_time"], 0)
                                 if vals["deletion_time"] >= 0 else 0),
                num_gpu=vals["num_gpu"], gpu_milli=vals["gpu_milli"],
                cpu_milli=vals["cpu_milli"], memory_mib=vals["memory_mib"],
                gpu_model="" if spec in _NULL else spec,
                priority=QOS_PRIORITY.get(qos, 0), gang=vals["num_gpu"] > 0)
        if errors.full:
            break
    errors.raise_if_any("pod list")
    return out.workload(rebase=False)


def _time(raw: str | None) -> float:
    text = (raw or "").strip()
    if text in _NULL:
        raise ValueError("is empty")
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a time (YYYY-MM-DD HH:MM:SS)") from None


def read_helios(stream: IO[str], *, max_errors: int = 20, gpus_per_node: int = 8) -> Workload:
    """Jobs from a Helios ``cluster_log.csv`` (arrivals relative to the first submission).

    Duration: the ``duration`` column, else ``end_time − start_time``. ``node_num``
    is kept only as a check: more cards than ``node_num × gpus_per_node`` is an error.
    """
    errors = _Errors(max_errors)
    out = _Columns()
    for line, row in _rows(stream, HELIOS_COLUMNS, "Helios log"):
        try:
            gpus = _int(row, "gpu_num")
            cpus = _int(row, "cpu_num", default=0) if "cpu_num" in row else 0
            field = "submit_time"
            submit = _time(row.get("submit_time"))
            field = "duration"
            if (row.get("duration") or "").strip() not in _NULL:
                duration = float(_int(row, "duration"))
            else:
                field = "end_time"
                duration = _time(row.get("end_time")) - _time(row.get("start_time"))
                if duration < 0:
                    raise ValueError("is before start_time")
            field = "node_num"
            nodes_n = _int(row, "node_num", default=1) if "node_num" in row else 1
            if gpus > max(nodes_n, 1) * gpus_per_node:
                raise ValueError(f"{nodes_n} nodes cannot hold gpu_num {gpus}")
        except ValueError as exc:
            key = str(exc)
            fld = field
            if "gpu_num" not in row or key.startswith("is empty") and not row.get("gpu_num"):
                fld = "gpu_num"
            errors.add(line, _which(row, exc, fld), key)
        else:
            out.add(name=(row.get("job_id") or f"job-{line}").strip(),
                    tenant=(row.get("vc") or row.get("user") or "").strip(),
                    arrival_s=submit, duration_s=duration, num_gpu=gpus,
                    gpu_milli=1000 if gpus else 0, cpu_milli=cpus * 1000, memory_mib=0,
                    gpu_model="", priority=0, gang=gpus > 0)
        if errors.full:
            break
    errors.raise_if_any("Helios log")
    return out.workload(rebase=True)


def _which(row: Mapping[str, str | None], exc: ValueError, guess: str) -> str:
    """The column an integer-parse error came from (gpu_num/cpu_num are parsed first)."""
    for key in ("gpu_num", "cpu_num"):
        try:
            _int(row, key, default=0 if key == "cpu_num" else None)
        except ValueError:
            return key
    return guess


def _json_records(stream: IO[str], chunk: int = 1 << 16) -> Iterator[tuple[int, Any]]:
    """Items of a top-level JSON list, decoded incrementally: (1-based line of the item, item)."""
    decoder = json.JSONDecoder()
    buf = ""
    line = 1
    pos = 0
    started = False
    eof = False

    def fill() -> bool:
        nonlocal buf, eof
        more = stream.read(chunk)
        if not more:
            eof = True
            return False
        buf += more
        return True

    while True:
        # skip whitespace and separators
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n,[]":
                ch = buf[pos]
                if ch == "\n":
                    line += 1
                if ch == "[":
                    if started:
                        raise TraceError("nested list where a job was expected", line=line)
                    started = True
                elif ch == "]":
                    return
                elif ch == "," and not started:
                    raise TraceError("expected a JSON list of jobs", line=line)
                pos += 1
            if pos < len(buf) or not fill():
                break
        if pos >= len(buf):
            if not started:
                raise TraceError("empty file: expected a JSON list of jobs", line=line)
            raise TraceError("the JSON list is not closed", line=line)
        if not started:
            raise TraceError("expected a JSON list of jobs ('[')", line=line)
        while True:
            try:
                item, end = decoder.raw_decode(buf, pos)
                break
            except json.JSONDecodeError as exc:
                if eof or not fill():
                    raise TraceError(f"invalid JSON: {exc.msg}", line=line + buf.count(
                        "\n", pos, exc.pos)) from None
        yield line, item
        line += buf.count("\n", pos, end)
        buf = buf[end:]
        pos = 0


def _philly_time(value: Any) -> float:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("is missing")
    return _time(value)


def read_philly(stream: IO[str], *, max_errors: int = 20) -> Workload:
    """Jobs from a Philly ``cluster_job_log`` (a JSON list; streamed).

    ``line`` in errors is the line where the job's record starts.
    """
    errors = _Errors(max_errors)
    out = _Columns()
    skipped = 0
    for line, job in _json_records(stream):
        if not isinstance(job, dict):
            errors.add(line, None, "a job must be a JSON object")
        else:
            attempts = job.get("attempts")
            field = "attempts"
            try:
                if not isinstance(attempts, list):
                    raise ValueError("must be a list")
                field = "submitted_time"
                submit = _philly_time(job.get("submitted_time"))
                if not attempts or not attempts[0].get("start_time") or not attempts[-1].get(
                        "end_time"):
                    skipped += 1
                    continue
                field = "attempts[0].detail"
                detail = attempts[0].get("detail")
                if not isinstance(detail, list):
                    raise ValueError("must be a list of {ip, gpus}")
                gpus = 0
                for d in detail:
                    if not isinstance(d, dict) or not isinstance(d.get("gpus"), list):
                        raise ValueError("each entry needs a gpus list")
                    gpus += len(d["gpus"])
                field = "attempts[-1].end_time"
                duration = _philly_time(attempts[-1]["end_time"]) - _philly_time(
                    attempts[-1]["start_time"])
                if duration < 0:
                    raise ValueError("is before its start_time")
            except (ValueError, AttributeError) as exc:
                errors.add(line, field, str(exc))
            else:
                out.add(name=str(job.get("jobid", f"job-{line}")), tenant=str(job.get("vc", "")),
                        arrival_s=submit, duration_s=duration, num_gpu=gpus,
                        gpu_milli=1000 if gpus else 0, cpu_milli=0, memory_mib=0, gpu_model="",
                        priority=0, gang=gpus > 0)
        if errors.full:
            break
    errors.raise_if_any("Philly job log")
    return out.workload(rebase=True)
