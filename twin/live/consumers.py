"""Live state of one cluster over a websocket: ``ws/clusters/<id>/``.

Who may connect
    Logged-in users only: the session cookie (``AuthMiddlewareStack``) or an API
    token (``Authorization: Token <key>`` or ``?token=<key>``, ``twin.core.ws_auth``).
    The socket is accepted and then closed with **4401** for an anonymous
    client and **4404** for a cluster that does not exist or that the user's
    cluster grants do not show (``twin.core.access``) — a close before
    accepting would reach the browser as a bare HTTP 403 with no reason.
    Whenever Redis (the channel layer) or the database is away — on connect or
    later — it is closed with **4503**: reconnect with backoff
    (``twin.core.consumers.CloseWhenUnavailable``).

Protocol (JSON text frames; see ``twin.live.protocol`` for validation)
    server → client on connect::

        {"type": "hello", "cluster": 7, "views": [...], "metrics": [{key, label, unit,
         aggregate}], "default_metric": {...}, "max_hz": 2, "health_names": [...]}

    client → server::

        {"action": "subscribe", "view": "cluster" | "supernode" | "rack",
         "id": <supernode/rack id; not for cluster>, "metric": "<metric key>"}
        {"action": "unsubscribe", ["view": ..., "id": ..., "metric": ...]}
        {"action": "ping"}

    server → client:

    * ``snapshot`` at once on subscribe (and again if the cluster's layout
      changes): ``{"type": "snapshot", "view", "id", "metric", "seq", "ts",
      "layout", "keys": [...], "values": [...], "unit", "aggregate"}`` plus
      ``names`` and (power) ``budget_w`` for the cluster view and ``health``
      (codes into ``health_names``) for card views. ``keys`` are rack ids
      (cluster view) or card ids (supernode/rack view); ``values[k]`` belongs
      to ``keys[k]``; ``null`` = no reading. ``seq`` and ``ts`` are the number
      and Unix time of the telemetry tick the values reflect; ``layout`` is the
      version of the cluster's card order (a new one brings a new snapshot).
    * ``frame`` after telemetry ticks, at most ``MAX_FRAME_HZ`` (2) per
      subscription: the same fields minus the keys. ``seq`` is the telemetry
      tick it reflects and only grows; every frame is a whole state, so a
      dropped frame or a reconnect heals itself (reconnect → new snapshot).
    * ``alerts``: ``{"type": "alerts", "events": [{"event": "opened" |
      "closed" | "acknowledged", "alert": {...}}], "dropped": n}`` — alert
      changes of the cluster, batched at the same ≤ 2 Hz (a storm of a
      thousand stale cards is one message, not a thousand).
    * ``remediation``: ``{"type": "remediation", "event": "proposed" |
      "applied" | "rejected" | "failed", "remediation": {...}}`` — a self-healing
      decision on a failed card (``twin.jobs.healing``), sent as it happens.
    * ``subscribed`` (``"already": true``) for a subscribe to a view the
      connection already follows: no snapshot is resent (see
      ``twin.live.protocol``).
    * ``unsubscribed`` (what was removed, what is still followed), ``pong``, and
      ``error`` (``{"type": "error", "code", "message", "field"?}``) for a
      message we refuse (or one that failed: ``internal_error``); the
      connection stays open.

Flow
    The consumer joins the Channels group ``state.group_name(cluster)``, to
    which the telemetry workers send ``telemetry.tick`` after processing
    (already ≤ 2 Hz per cluster) and ``alert.event``. A tick only marks
    subscriptions dirty and wakes one background *pump* task per connection.
    The pump takes each due frame from the process-wide ``frames.frame_cache``:
    on the event loop when another connection already read it for this tick,
    else in one thread hop that refreshes every view followed in this process
    (one Redis round trip and one JSON encoding per view and tick, however many
    clients watch). Each subscription gets at most one frame per
    ``1 / MAX_FRAME_HZ`` seconds: the first tick after a quiet period goes out
    at once, later ones are coalesced into one trailing frame, which always
    carries the newest state. The pump is cancelled, and the followed views
    and group membership dropped, on disconnect and whenever the consumer
    itself ends, so nothing outlives its socket.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from twin.core.access import access_for
from twin.core.consumers import CloseWhenUnavailable
from twin.live import clients, frames
from twin.live.protocol import (
    CLOSE_NOT_FOUND,
    CLOSE_UNAUTHENTICATED,
    MAX_SUBSCRIPTIONS,
    ActionChoices,
    ProtocolError,
    Request,
    SubscriptionKey,
    parse_message,
)
from twin.telemetry import state

__all__ = ["MAX_ALERTS_PER_MESSAGE", "MAX_FRAME_HZ", "ClusterConsumer"]

logger = logging.getLogger(__name__)

MAX_FRAME_HZ = 2.0
"""Frames per second per subscription, at most (and alert batches per connection)."""
MAX_ALERTS_PER_MESSAGE = 500
"""Alert events kept between two alert messages; older ones are counted as dropped."""


@database_sync_to_async
def _cluster_visible(cluster_id: int, user: Any) -> bool:
    """The cluster exists and the user may see it (``twin.core.access``): another
    tenant's cluster is closed with the same 4404 as one that does not exist."""
    from twin.hardware.models import Cluster

    return access_for(user).can_see(cluster_id) and \
        Cluster.objects.filter(pk=cluster_id).exists()


@database_sync_to_async
def _snapshot(cluster_id: int, key: SubscriptionKey) -> frames.Built:
    """A fresh read of one view, its snapshot encoded off the event loop."""
    built = frames.frame_cache.get(cluster_id, key, -1)
    built.snapshot_text  # noqa: B018 - encode here, not on the event loop
    return built


@database_sync_to_async
def _get_views(cluster_id: int, keys: list[SubscriptionKey], min_seq: int,
               layout: str | None) -> dict[SubscriptionKey, frames.Built | Exception]:
    views = frames.frame_cache.get_many(cluster_id, keys, min_seq, layout)
    for built in views.values():
        if isinstance(built, frames.Built) and layout and built.layout != layout:
            built.snapshot_text  # noqa: B018 - a layout change resends the snapshot
    return views


@dataclass
class Subscription:
    key: SubscriptionKey
    seq: int
    layout: str
    sent_at: float
    dirty: bool = False


class ClusterConsumer(CloseWhenUnavailable, AsyncWebsocketConsumer):
    """One browser tab watching one cluster (see the module docstring)."""

    min_interval = 1.0 / MAX_FRAME_HZ

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        # Whatever ends the consumer (disconnect, server shutdown, a crash), its
        # pump, its followed views and its group membership must not outlive it.
        try:
            await super().__call__(scope, receive, send)
        finally:
            if getattr(self, "counted", False):  # ended without a disconnect message
                self.counted = False
                await clients.disconnected()
            await self._stop_pump()
            self._forget_subscriptions()
            if getattr(self, "group", None):  # ended without a disconnect message
                with contextlib.suppress(Exception):
                    await self.channel_layer.group_discard(self.group, self.channel_name)
                self.group = None

    # -- connection --------------------------------------------------------
    async def connect(self) -> None:
        self.cluster_id = int(self.scope["url_route"]["kwargs"]["cluster_id"])
        self.subs: dict[SubscriptionKey, Subscription] = {}
        self.group: str | None = None
        self.pump: asyncio.Task[None] | None = None
        self.wake = asyncio.Event()
        self.send_lock = asyncio.Lock()
        self.tick_seq = 0
        self.tick_layout: str | None = None
        self.alerts: list[dict[str, Any]] = []
        self.alerts_dropped = 0
        self.alerts_sent_at = 0.0
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if not await _cluster_visible(self.cluster_id, user):
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.group = state.group_name(self.cluster_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        self.counted = True
        await clients.connected()
        self.pump = asyncio.create_task(self._run_pump(), name=f"live-pump-{self.channel_name}")
        await self._send(frames.hello_message(self.cluster_id, MAX_FRAME_HZ))

    async def disconnect(self, code: int) -> None:
        if getattr(self, "counted", False):
            self.counted = False
            await clients.disconnected()
        await self._stop_pump()
        self._forget_subscriptions()
        if getattr(self, "group", None):
            await self.channel_layer.group_discard(self.group, self.channel_name)
            self.group = None

    async def _stop_pump(self) -> None:
        pump = getattr(self, "pump", None)
        if pump is None:
            return
        self.pump = None
        pump.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pump

    def _forget_subscriptions(self) -> None:
        for key in getattr(self, "subs", {}):
            frames.frame_cache.unwant(self.cluster_id, key)
        self.subs = {}

    async def _send(self, message: dict[str, Any]) -> None:
        async with self.send_lock:
            await self.send(text_data=json.dumps(message, separators=(",", ":")))

    # -- client messages ----------------------------------------------------
    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.group is None:  # refused connection: ignore whatever still arrives
            return
        data: Any = None
        try:
            data, request = parse_message(text_data, frames.view_metrics(),
                                          frames.DEFAULT_METRIC)
            if request.action == ActionChoices.SUBSCRIBE:
                await self._subscribe(request)
            elif request.action == ActionChoices.UNSUBSCRIBE:
                await self._unsubscribe(request)
            else:
                await self._send({"type": "pong", "seq": self.tick_seq})
        except ProtocolError as error:
            await self._send(error.as_message(data))
        except Exception:  # noqa: BLE001 - no client message may end the connection
            logger.exception("live message %r on cluster %s failed", (text_data or "")[:200],
                             self.cluster_id)
            await self._send({"type": "error", "code": "internal_error",
                              "message": "The server could not handle this message; the "
                                         "connection stays open."})

    async def _subscribe(self, request: Request) -> None:
        key = request.key
        assert key is not None
        followed = self.subs.get(key)
        if followed is not None:
            # Already followed: the client holds the snapshot and gets every frame, so
            # a repeat only confirms (a full snapshot each time was megabytes a second).
            await self._send({"type": "subscribed", **key.as_dict(), "seq": followed.seq,
                              "layout": followed.layout, "already": True})
            return
        if len(self.subs) >= MAX_SUBSCRIPTIONS:
            raise ProtocolError("too_many_subscriptions",
                                f"A connection follows at most {MAX_SUBSCRIPTIONS} views; "
                                "unsubscribe from one first.")
        try:
            built = await _snapshot(self.cluster_id, key)
        except frames.UnknownObject as exc:
            raise ProtocolError("unknown_id", f"{exc}.", "id") from None
        async with self.send_lock:
            # Under the lock, so the pump cannot slip a frame in before the snapshot.
            await self.send(text_data=built.snapshot_text)
            if key not in self.subs:
                frames.frame_cache.want(self.cluster_id, key)
            self.subs[key] = Subscription(key, built.seq, built.layout, time.monotonic(),
                                          dirty=self.tick_seq > built.seq)
        if self.subs[key].dirty:
            self.wake.set()

    async def _unsubscribe(self, request: Request) -> None:
        gone = [key for key in self.subs
                if (request.view is None or key.view == request.view)
                and (request.id is None or key.id == request.id)
                and (request.metric is None or key.metric == request.metric)]
        for key in gone:
            del self.subs[key]
            frames.frame_cache.unwant(self.cluster_id, key)
        await self._send({"type": "unsubscribed", "removed": [k.as_dict() for k in gone],
                          "active": [k.as_dict() for k in self.subs]})

    # -- channel-layer events (from the telemetry workers) -------------------
    async def telemetry_tick(self, event: dict[str, Any]) -> None:
        seq = int(event.get("seq") or 0)
        if seq <= self.tick_seq:
            return  # a late or repeated tick: the state it announces was already read
        self.tick_seq = seq
        self.tick_layout = event.get("layout") or None
        for sub in self.subs.values():
            if seq > sub.seq or (self.tick_layout and self.tick_layout != sub.layout):
                sub.dirty = True
        self.wake.set()

    async def remediation_event(self, event: dict[str, Any]) -> None:
        """Self-healing's decisions are rare (one per failed card): sent at once."""
        await self._send({"type": "remediation", "event": event.get("event"),
                          "remediation": event.get("remediation")})

    async def alert_event(self, event: dict[str, Any]) -> None:
        self.alerts.append({"event": event.get("event"), "alert": event.get("alert")})
        overflow = len(self.alerts) - MAX_ALERTS_PER_MESSAGE
        if overflow > 0:
            del self.alerts[:overflow]
            self.alerts_dropped += overflow
        self.wake.set()

    # -- the pump ---------------------------------------------------------------
    async def _run_pump(self) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            while True:
                next_due = await self._pump_once()
                if next_due is None:
                    break
                delay = next_due - time.monotonic()
                if delay > 0:
                    # Sleep until the earliest trailing frame, but wake for new work.
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.wake.wait(), delay)
                    self.wake.clear()

    async def _pump_once(self) -> float | None:
        """Send what is due; return when the next held-back send is due (None: nothing)."""
        now = time.monotonic()
        waiting: list[float] = []
        due: list[Subscription] = []
        for sub in self.subs.values():
            if not sub.dirty:
                continue
            at = sub.sent_at + self.min_interval
            if at > now:
                waiting.append(at)
            else:
                due.append(sub)
        if due:
            await self._send_frames(due)
        if self.alerts:
            at = self.alerts_sent_at + self.min_interval
            if at > now:
                waiting.append(at)
            else:
                events, dropped = self.alerts, self.alerts_dropped
                self.alerts, self.alerts_dropped = [], 0
                self.alerts_sent_at = now
                await self._send({"type": "alerts", "events": events, "dropped": dropped})
        return min(waiting) if waiting else None

    async def _send_frames(self, due: list[Subscription]) -> None:
        """Frames for the due subscriptions: from the process's cache when another
        connection already built them for this tick (no thread hop), the rest built
        in one trip to the worker thread."""
        seq, layout = self.tick_seq, self.tick_layout
        views: dict[SubscriptionKey, frames.Built | Exception] = {}
        missing = []
        for sub in due:
            sub.dirty = False
            cached = frames.frame_cache.peek(self.cluster_id, sub.key, seq, layout)
            if cached is not None and cached.layout == sub.layout:
                views[sub.key] = cached
            else:
                missing.append(sub.key)
        if missing:
            try:
                views.update(await _get_views(self.cluster_id, missing, seq, layout))
            except Exception as exc:  # noqa: BLE001 - the worker thread itself failed
                views.update(dict.fromkeys(missing, exc))
        for sub in due:
            await self._send_view(sub, views[sub.key])

    async def _send_view(self, sub: Subscription, built: frames.Built | Exception) -> None:
        if isinstance(built, frames.UnknownObject):
            # The rack or supernode went away with a layout change.
            if self.subs.pop(sub.key, None) is not None:
                frames.frame_cache.unwant(self.cluster_id, sub.key)
            await self._send({"type": "error", "code": "unknown_id", "field": "id",
                              "message": f"{built}; subscription ended.", **sub.key.as_dict()})
            return
        if isinstance(built, Exception):
            # Redis hiccup or a bug: keep the connection; the next tick tries again.
            logger.error("live frame for %s in cluster %s failed", sub.key, self.cluster_id,
                         exc_info=built)
            return
        if self.subs.get(sub.key) is not sub:
            return  # unsubscribed meanwhile
        async with self.send_lock:
            if built.layout != sub.layout:
                await self.send(text_data=built.snapshot_text)
            elif built.seq > sub.seq:
                await self.send(text_data=built.frame_text)
            else:
                return  # nothing newer than what the client holds
            sub.seq, sub.layout, sub.sent_at = built.seq, built.layout, time.monotonic()
