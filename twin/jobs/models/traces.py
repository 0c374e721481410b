"""An uploaded cluster trace, parsed once and stored for scheduling runs to replay.

The upload (``POST /api/jobs/traces/``) is parsed by ``simulation.scheduling``'s
streamed readers; what they return (a columnar node list and workload) is stored
here as zstd-compressed JSON (``to_dict()`` of each), with a SHA-256 of both so a
``scheduling`` scenario run can name the trace by id and know at run time that it
replays the very rows its inputs were validated against. A trace is never edited
(upload another one); deleting it leaves the runs that used it with their results.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

import cramjam
from django.conf import settings
from django.db import models
from django.db.models import Q

from twin.core.models import TimestampedModel
from twin.core.validators import printable, printable_constraint
from twin.jobs.choices import TraceFormatChoices

__all__ = ["Trace", "pack", "unpack"]


def pack(value: dict[str, Any] | None) -> bytes | None:
    """JSON, zstd-compressed (columnar lists compress about tenfold)."""
    if value is None:
        return None
    return bytes(cramjam.zstd.compress(json.dumps(value, separators=(",", ":")).encode()))


def unpack(blob: bytes | memoryview | None) -> dict[str, Any] | None:
    if blob is None:
        return None
    return json.loads(bytes(cramjam.zstd.decompress(bytes(blob))))


class Trace(TimestampedModel):
    """A parsed trace: its node list (optional: Helios and Philly have none) and jobs."""

    name = models.CharField(max_length=100, validators=[printable])
    format = models.CharField(max_length=20, choices=TraceFormatChoices.choices())
    nodes = models.BinaryField(null=True, blank=True, editable=False,
                               help_text="The node list (Nodes.to_dict()), compressed.")
    workload = models.BinaryField(editable=False,
                                  help_text="The jobs (Workload.to_dict()), compressed.")
    node_count = models.PositiveIntegerField(default=0)
    gpu_count = models.PositiveIntegerField(default=0, help_text="Cards in its node list.")
    job_count = models.PositiveIntegerField(default=0)
    size_bytes = models.PositiveBigIntegerField(default=0, help_text="Bytes uploaded.")
    sha256 = models.CharField(max_length=64, editable=False,
                              help_text="Of the stored node list and jobs.")
    uploaded_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                    null=True, blank=True, related_name="traces")

    class Meta:
        ordering = ["-id"]
        constraints = [
            printable_constraint("name", "trace_name_printable"),
            models.CheckConstraint(condition=Q(format__in=TraceFormatChoices.values()),
                                   name="trace_format_valid"),
        ]

    def __str__(self) -> str:
        return self.name

    @staticmethod
    def digest(nodes: bytes | None, workload: bytes) -> str:
        sha = hashlib.sha256()
        sha.update(nodes or b"")
        sha.update(b"\x00")
        sha.update(workload)
        return sha.hexdigest()

    def nodes_dict(self) -> dict[str, Any] | None:
        return unpack(self.nodes)

    def workload_dict(self) -> dict[str, Any]:
        return unpack(self.workload) or {}
