"""Renderers beyond DRF's defaults."""
from __future__ import annotations

from typing import Any

from rest_framework.renderers import JSONRenderer

from twin.core.collector import collector_paused

__all__ = ["LargeJSONRenderer"]


class LargeJSONRenderer(JSONRenderer):
    """DRF's JSON renderer with the cyclic collector paused while it renders.

    For endpoints that answer thousands of rows in one page (the 24 h history:
    1,440 rows of 2 × 26 values). Encoding them allocates no cycles, yet enough
    containers to set off a full collection of the process's heap: the history
    endpoint's p99 was 140–310 ms where ``query_history`` alone (collector paused)
    was under 100 (docs/benchmarks.md, history)."""

    def render(self, data: Any, accepted_media_type: str | None = None,
               renderer_context: dict[str, Any] | None = None) -> bytes:
        with collector_paused():
            return super().render(data, accepted_media_type, renderer_context)
