"""Progress of one scenario run over a websocket: ``ws/scenarios/<id>/``.

Logged-in users only (the session cookie through ``AuthMiddlewareStack``, or an
API token: ``twin.core.ws_auth``): the socket is accepted and closed with **4401**
for an anonymous client and **4404** for a run that does not exist or whose
cluster the user may not see (``twin.core.access``), and with **4503** whenever Redis (the
channel layer) or the database is away: reconnect with backoff (the codes of
``ws/clusters/<id>/``).

server → client::

    {"type": "snapshot", "run": {id, kind, status, progress, message, error,
     error_field, cached, cluster, created, started, finished, result?}}
        at once on connect (``result`` once the run has finished);
    {"type": "progress", "id", "status": "running", "progress": 0.42, "message"}
        while it runs (at most every 0.25 s, from the worker);
    {"type": "finished", "run": {... as in snapshot, with result ...}}
        once, when it succeeds, fails or is cancelled.

client → server: ``{"action": "ping"}`` → ``{"type": "pong"}``.

The consumer joins the group ``scenario.<id>`` *before* reading the snapshot,
so no event between the two is missed; the worker sends ``scenario.update``
events there (:func:`twin.scenarios.runner.publish`) and a final one makes the
consumer read the run once more and send it whole.
"""
from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from twin.core import nesting
from twin.core.access import access_for
from twin.core.choices import JobStatusChoices
from twin.core.consumers import CloseWhenUnavailable
from twin.core.unavailable import CLOSE_UNAVAILABLE
from twin.scenarios.models import ScenarioRun, group_name

__all__ = ["CLOSE_NOT_FOUND", "CLOSE_UNAUTHENTICATED", "CLOSE_UNAVAILABLE", "ScenarioConsumer",
           "run_state"]

CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404


def _iso(value: Any) -> str | None:
    return value.isoformat() if value else None


def run_state(run: ScenarioRun) -> dict[str, Any]:
    """What a watcher sees of a run (``result`` only once it is final)."""
    state: dict[str, Any] = {
        "id": run.pk, "kind": run.kind, "status": run.status, "progress": run.progress,
        "message": run.message, "error": run.error, "error_field": run.error_field,
        "cached": run.cached_from_id is not None, "cluster": run.cluster_id,
        "created": _iso(run.created), "started": _iso(run.started),
        "finished": _iso(run.finished),
    }
    if run.is_final:
        state["result"] = run.result
    return state


@database_sync_to_async
def _state(run_id: int) -> dict[str, Any] | None:
    run = ScenarioRun.objects.filter(pk=run_id).first()
    return run_state(run) if run is not None else None


@database_sync_to_async
def _exists(run_id: int, user: Any) -> bool:
    """The run exists and its cluster is one the user may see (``twin.core.access``)."""
    return access_for(user).filter(ScenarioRun.objects.filter(pk=run_id), "cluster").exists()


class ScenarioConsumer(CloseWhenUnavailable, AsyncJsonWebsocketConsumer):
    """One client following one run (see the module docstring)."""

    run_id: int
    group: str | None = None
    final_sent: bool = False

    async def connect(self) -> None:
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        if not await _exists(self.run_id, user):
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.group = group_name(self.run_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        state = await _state(self.run_id)
        if state is None:  # deleted in between
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.final_sent = state["status"] in JobStatusChoices.FINAL
        await self.send_json({"type": "snapshot", "run": state})

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)
            self.group = None

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None,
                      **kwargs: Any) -> None:
        try:  # nesting limited: 4 KB of "[" was a RecursionError that ended the socket
            message = nesting.loads(text_data or "", max_depth=8)
        except ValueError:
            message = None
        if isinstance(message, dict) and message.get("action") == "ping":
            await self.send_json({"type": "pong"})
            return
        await self.send_json({"type": "error", "code": "bad_message",
                              "message": 'this socket only streams; send {"action": "ping"} '
                                         "to check it is alive"})

    async def scenario_update(self, event: dict[str, Any]) -> None:
        """A ``scenario.update`` from the worker (or a cancel)."""
        if self.final_sent:
            return
        if event.get("status") in JobStatusChoices.FINAL:
            state = await _state(self.run_id)
            if state is None:
                return
            self.final_sent = True
            await self.send_json({"type": "finished", "run": state})
            return
        await self.send_json({"type": "progress", "id": event.get("id"),
                              "status": event.get("status"),
                              "progress": event.get("progress"),
                              "message": event.get("message", "")})
