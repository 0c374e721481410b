"""A small HTTP client for agents: one keep-alive connection, the agent's token.

Used by ``manage.py telemetry_agent`` and ``benchmarks/ingest.py``; any other
agent just needs ``Authorization: Bearer <token>`` and the formats in
``twin.telemetry.ingest``.

What an agent should do with each answer (issue 22, item 5): a 5xx, a 429 and a
connection error are passing (the server, its Redis or its database starting or
restarting; the workers behind): try again after a :class:`Backoff` (honouring
``Retry-After``). A 4xx other than 429 is the request's own fault and retrying it
unchanged cannot help — except a 401 after a token rotation, when the agent should
re-read its token (:class:`TokenSource`) and send again.
"""
from __future__ import annotations

import http.client
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgpack

__all__ = ["AgentClient", "Answer", "Backoff", "TokenSource", "is_transient"]


def is_transient(status: int) -> bool:
    """A status worth retrying unchanged: 5xx (server, Redis or database away) and 429."""
    return status >= 500 or status == 429


class Backoff:
    """Exponential backoff: ``min_s``, doubling up to ``max_s``; :meth:`reset` after a
    success. A server's ``Retry-After`` is honoured when it asks for longer."""

    def __init__(self, min_s: float = 0.5, max_s: float = 30.0) -> None:
        self.min_s, self.max_s = min_s, max_s
        self.delay = min_s

    def next(self, retry_after: float | None = None) -> float:
        """The pause to take now; the following one doubles."""
        pause = min(max(self.delay, retry_after or 0.0), self.max_s)
        self.delay = min(self.delay * 2, self.max_s)
        return pause

    def reset(self) -> None:
        self.delay = self.min_s


class TokenSource:
    """Where an agent's token comes from, so that it can be read again after a 401.

    ``--token`` (fixed), a file (``--token-file`` or ``TWIN_AGENT_TOKEN_FILE``: re-read
    on every :meth:`refresh`, so an operator who rotates the token writes the new one
    there and the running agent takes it up), or ``TWIN_AGENT_TOKEN``. ``reissue``, if
    given, is called when the file holds nothing new: the demo's agent re-keys itself
    through the database that way (it owns its agent row).
    """

    def __init__(self, token: str = "", path: str | Path | None = None,
                 reissue: Callable[[], str] | None = None) -> None:
        self.path = Path(path) if path else None
        self.reissue = reissue
        self.token = token or self._read() or os.environ.get("TWIN_AGENT_TOKEN", "")

    def _read(self) -> str:
        if self.path is None:
            return ""
        try:
            return self.path.read_text().strip()
        except OSError:
            return ""

    def refresh(self) -> bool:
        """Read the token again; True if it changed (then try the request again)."""
        fresh = self._read()
        if (not fresh or fresh == self.token) and self.reissue is not None:
            fresh = self.reissue()
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.path.write_text(fresh + "\n")
                self.path.chmod(0o600)
        if fresh and fresh != self.token:
            self.token = fresh
            return True
        return False



@dataclass
class Answer:
    status: int
    body: dict[str, Any]
    retry_after: float | None = None


class AgentClient:
    def __init__(self, base_url: str, token: str | TokenSource, timeout: float = 30.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"--url must be http:// or https://, not {base_url!r}")
        self.scheme, self.host = parts.scheme, parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.tokens = token if isinstance(token, TokenSource) else TokenSource(token)
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
        all_headers = {"Authorization": f"Bearer {self.tokens.token}", **(headers or {})}
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

    def caps(self, cluster_id: int) -> Answer:
        """Each card's power cap from live capping (null unless applied)."""
        return self.request("GET", f"/api/telemetry/clusters/{cluster_id}/caps/")

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

    @property
    def token(self) -> str:
        return self.tokens.token

    def send_with_retry(self, send: Callable[[], Answer], attempts: int = 5) -> Answer:
        """Call ``send()`` again (same batch, same seq) while the answer is passing (5xx,
        429: :func:`is_transient`), with a backoff; once after re-reading the token on a
        401. Returns the last answer; a connection error on the last attempt is raised."""
        backoff = Backoff(0.5, 8.0)
        retries, reread = 0, False
        while True:
            try:
                answer = send()
            except OSError:
                if retries >= attempts:
                    raise
                retries += 1
                time.sleep(backoff.next())
                continue
            if answer.status == 401 and not reread and self.tokens.refresh():
                reread = True
                continue
            if not is_transient(answer.status) or retries >= attempts:
                return answer
            retries += 1
            time.sleep(backoff.next(answer.retry_after))
