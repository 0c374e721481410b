"""A small HTTP client for agents: one keep-alive connection, the agent's token.

Used by ``manage.py telemetry_agent`` and ``benchmarks/ingest.py``; any other
agent just needs ``Authorization: Bearer <token>`` and the formats in
``twin.telemetry.ingest``.
"""
from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import msgpack

__all__ = ["AgentClient", "Answer"]


@dataclass
class Answer:
    status: int
    body: dict[str, Any]
    retry_after: float | None = None


class AgentClient:
    def __init__(self, base_url: str, token: str, timeout: float = 30.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"--url must be http:// or https://, not {base_url!r}")
        self.scheme, self.host = parts.scheme, parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._conn: http.client.HTTPConnection | None = None

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = (http.client.HTTPSConnection if self.scheme == "https"
                   else http.client.HTTPConnection)
            self._conn = cls(self.host, self.port, timeout=self.timeout)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def request(self, method: str, path: str, body: bytes | None = None,
                content_type: str | None = None,
                headers: dict[str, str] | None = None) -> Answer:
        """One request; reconnects once if the kept-alive connection was closed."""
        all_headers = {"Authorization": f"Bearer {self.token}", **(headers or {})}
        if content_type:
            all_headers["Content-Type"] = content_type
        for attempt in (0, 1):
            conn = self._connection()
            try:
                conn.request(method, self.prefix + path, body=body, headers=all_headers)
                response = conn.getresponse()
                raw = response.read()
                break
            except (http.client.HTTPException, ConnectionError, OSError):
                self.close()
                if attempt:
                    raise
        try:
            parsed = json.loads(raw) if raw else {}
        except ValueError:
            parsed = {"detail": raw[:500].decode("utf-8", "replace")}
        retry = response.getheader("Retry-After")
        return Answer(response.status, parsed if isinstance(parsed, dict) else {"data": parsed},
                      float(retry) if retry else None)

    # --- endpoints ---------------------------------------------------------
    def whoami(self) -> Answer:
        return self.request("GET", "/api/telemetry/whoami/")

    def layout(self, cluster_id: int) -> Answer:
        return self.request("GET", f"/api/telemetry/clusters/{cluster_id}/layout/")

    def coolant(self, cluster_id: int) -> Answer:
        """Each card's coolant (or inlet-air) temperature in the live plant."""
        return self.request("GET", f"/api/telemetry/clusters/{cluster_id}/coolant/")

    def post_batch(self, cluster_id: int, doc: dict[str, Any], fmt: str = "msgpack") -> Answer:
        if fmt == "json":
            return self.request("POST", f"/api/telemetry/clusters/{cluster_id}/batches/",
                                json.dumps(doc).encode(), "application/json")
        return self.request("POST", f"/api/telemetry/clusters/{cluster_id}/batches/",
                            msgpack.packb(doc), "application/msgpack")

    def post_raw_batch(self, cluster_id: int, body: bytes) -> Answer:
        return self.request("POST", f"/api/telemetry/clusters/{cluster_id}/batches/", body,
                            "application/msgpack")

    def post_exposition(self, cluster_id: int, text: str, seq: int | None = None) -> Answer:
        headers = {"X-Telemetry-Seq": str(seq)} if seq is not None else {}
        return self.request("POST", f"/api/telemetry/clusters/{cluster_id}/metrics/",
                            text.encode(), "text/plain; version=0.0.4", headers)

    def send_with_retry(self, send: Any, attempts: int = 5) -> Answer:
        """Call ``send()`` again (same batch, same seq) while the twin answers 503."""
        answer = send()
        for _ in range(attempts):
            if answer.status != 503:
                break
            time.sleep(answer.retry_after or 1.0)
            answer = send()
        return answer
