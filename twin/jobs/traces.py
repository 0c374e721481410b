"""Trace upload: parse with the library's streamed readers, store, or store nothing.

``store_trace`` reads the uploaded files as text streams (never whole into
memory as one string) through ``simulation.scheduling``'s readers, which collect
per-row errors (line, column, message) and raise one ``TraceError`` holding them;
those become the 400 body ``{"jobs": ["line 7, num_gpu: …", …]}`` keyed by the
file at fault. Only a file that parses completely is stored, in one transaction.
"""
from __future__ import annotations

import io
from typing import IO, Any

from django.db import transaction

from twin.jobs.choices import TraceFormatChoices
from twin.jobs.models import Trace
from twin.jobs.models.traces import pack

__all__ = ["MAX_REPORTED_ERRORS", "TraceUploadError", "store_trace"]

MAX_REPORTED_ERRORS = 50


class TraceUploadError(Exception):
    """Per-file errors: ``errors`` maps ``jobs`` / ``nodes`` to messages with line numbers."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items()))
        self.errors = errors


def _messages(exc: Exception) -> list[str]:
    from simulation.scheduling import TraceError

    if isinstance(exc, TraceError):
        items = exc.errors or [exc]
        return [str(e) for e in items[:MAX_REPORTED_ERRORS]]
    return [str(exc)]


def _text(upload: Any) -> IO[str]:
    """A text stream over an uploaded file (UTF-8; a BOM is skipped)."""
    upload.seek(0)
    return io.TextIOWrapper(upload.file if hasattr(upload, "file") else upload,
                            encoding="utf-8-sig", errors="strict", newline="")


def parse(fmt: str, jobs: Any, nodes: Any | None) -> tuple[Any | None, Any]:
    """(Nodes or None, Workload) of the uploaded files; raises TraceUploadError."""
    from simulation.scheduling import (
        SchedulingInputError,
        TraceError,
        read_alibaba_nodes,
        read_alibaba_pods,
        read_helios,
        read_philly,
    )

    readers = {TraceFormatChoices.ALIBABA: read_alibaba_pods,
               TraceFormatChoices.HELIOS: read_helios,
               TraceFormatChoices.PHILLY: read_philly}
    errors: dict[str, list[str]] = {}
    parsed_nodes = None
    if nodes is not None:
        if fmt != TraceFormatChoices.ALIBABA:
            errors["nodes"] = [f"a node list goes with the {TraceFormatChoices.ALIBABA} format "
                               f"only ({TraceFormatChoices.label(fmt)} has none)"]
        else:
            try:
                parsed_nodes = read_alibaba_nodes(_text(nodes))
            except (TraceError, SchedulingInputError, UnicodeDecodeError) as exc:
                errors["nodes"] = _messages(exc)
    workload = None
    try:
        workload = readers[fmt](_text(jobs))
    except (TraceError, SchedulingInputError, UnicodeDecodeError) as exc:
        errors["jobs"] = _messages(exc)
    if errors:
        raise TraceUploadError(errors)
    if not len(workload):
        raise TraceUploadError({"jobs": ["the file holds no jobs"]})
    return parsed_nodes, workload


def store_trace(name: str, fmt: str, jobs: Any, nodes: Any | None, user: Any,
                size_bytes: int) -> Trace:
    """Parse and store a trace (nothing is stored if any row is bad)."""
    parsed_nodes, workload = parse(fmt, jobs, nodes)
    nodes_blob = pack(parsed_nodes.to_dict()) if parsed_nodes is not None else None
    workload_blob = pack(workload.to_dict())
    assert workload_blob is not None
    with transaction.atomic():
        return Trace.objects.create(
            name=name, format=fmt, nodes=nodes_blob, workload=workload_blob,
            node_count=len(parsed_nodes) if parsed_nodes is not None else 0,
            gpu_count=parsed_nodes.total_gpus if parsed_nodes is not None else 0,
            job_count=len(workload), size_bytes=size_bytes,
            sha256=Trace.digest(nodes_blob, workload_blob),
            uploaded_by=user if getattr(user, "is_authenticated", False) else None)
