"""The websocket protocol of ``ws/clusters/<id>/``: client messages, validated.

Everything a client may send is parsed here into a :class:`Request`, or into a
:class:`ProtocolError` whose ``code`` and ``field`` say exactly what was wrong
(the consumer sends it back as an ``error`` message and keeps the connection
open: a typo in a dashboard must not cost it its stream).

Client → server (JSON text frames)::

    {"action": "subscribe",   "view": "cluster"}                      # metric: default
    {"action": "subscribe",   "view": "supernode", "id": 3, "metric": "power_w"}
    {"action": "subscribe",   "view": "rack",      "id": 17, "metric": "temp_c"}
    {"action": "unsubscribe", "view": "rack", "id": 17, "metric": "temp_c"}
    {"action": "unsubscribe"}                                          # everything
    {"action": "ping"}

The metric names a client may ask for come from the telemetry state
(:func:`twin.live.frames.view_metrics`), so a metric added there streams
without touching this module.

Subscribing is idempotent. A new subscription is answered with its full
``snapshot``; a subscribe for a (view, id, metric) the connection already
follows only with ``{"type": "subscribed", "view", "id", "metric", "seq",
"layout", "already": true}`` (``seq`` and ``layout`` as the client last got
them): its frames keep coming, and nothing else changes. Resending the whole
snapshot every time let one client pull megabytes a second. A client that
wants a fresh snapshot unsubscribes and subscribes again (or reconnects).

Messages are at most :data:`MAX_MESSAGE_BYTES` long and
:data:`MAX_MESSAGE_DEPTH` levels deep (``too_large``, ``too_deep``); nothing a
client sends ends the connection.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from twin.core import nesting
from twin.core.choices import ChoiceSet
from twin.core.unavailable import CLOSE_UNAVAILABLE as _CLOSE_UNAVAILABLE

__all__ = [
    "CLOSE_NOT_FOUND",
    "CLOSE_UNAUTHENTICATED",
    "CLOSE_UNAVAILABLE",
    "MAX_MESSAGE_BYTES",
    "MAX_MESSAGE_DEPTH",
    "MAX_SUBSCRIPTIONS",
    "ActionChoices",
    "ProtocolError",
    "Request",
    "SubscriptionKey",
    "ViewChoices",
    "parse_message",
]

# Application close codes (4000–4999 are ours by RFC 6455). They mirror HTTP so a
# client knows what to do: 4401 → log in, 4404 → pick another cluster (both
# final), 4503 → a service behind the socket (the channel layer's Redis, the
# database) is away: reconnect with backoff, as after any other close, and
# resubscribe; the new snapshots carry the state and a ``seq`` that never went
# back (twin.telemetry.processing.ticks). Defined in twin.core.unavailable,
# where every consumer's outage handling lives.
CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404
CLOSE_UNAVAILABLE = _CLOSE_UNAVAILABLE

MAX_MESSAGE_BYTES = 4096
"""Client messages are tiny; anything larger is refused before JSON parsing."""
MAX_MESSAGE_DEPTH = 8
"""Client messages are one flat object; 4 KB of ``[`` (2,048 levels) would be a
``RecursionError`` in the decoder, so deeper ones are refused before decoding."""
MAX_SUBSCRIPTIONS = 16
"""Views one connection may follow at once (each costs a frame per tick)."""


class ViewChoices(ChoiceSet):
    CLUSTER = "cluster"
    SUPERNODE = "supernode"
    RACK = "rack"

    CHOICES = [
        (CLUSTER, "Cluster overview (one value per rack)", "blue"),
        (SUPERNODE, "One supernode (one value per card)", "purple"),
        (RACK, "One rack (one value per card)", "teal"),
    ]


class ActionChoices(ChoiceSet):
    SUBSCRIBE = "subscribe"
    UNSUBSCRIBE = "unsubscribe"
    PING = "ping"

    CHOICES = [
        (SUBSCRIBE, "Subscribe to a view and metric", "green"),
        (UNSUBSCRIBE, "Stop one subscription, or all", "gray"),
        (PING, "Liveness check; answered with pong", "gray"),
    ]


@dataclass(frozen=True, slots=True)
class SubscriptionKey:
    """What one subscription follows. ``id`` is None for the cluster view."""

    view: str
    id: int | None
    metric: str

    def as_dict(self) -> dict[str, Any]:
        return {"view": self.view, "id": self.id, "metric": self.metric}


@dataclass(frozen=True, slots=True)
class Request:
    action: str
    key: SubscriptionKey | None = None
    """Set for subscribe; for unsubscribe only when the client named a view."""
    view: str | None = None
    """Unsubscribe filters: None means "any"."""
    id: int | None = None
    metric: str | None = None


class ProtocolError(Exception):
    """A client message we refuse; sent back as ``{"type": "error", ...}``."""

    def __init__(self, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field

    def as_message(self, request: Any = None) -> dict[str, Any]:
        body: dict[str, Any] = {"type": "error", "code": self.code, "message": self.message}
        if self.field is not None:
            body["field"] = self.field
        if isinstance(request, dict) and isinstance(request.get("action"), str):
            body["action"] = request["action"]
        return body


def _choose(value: Any, allowed: Iterable[str], field: str, code: str) -> str:
    allowed = list(allowed)
    if not isinstance(value, str) or value not in allowed:
        raise ProtocolError(
            code, f"{field} must be one of {', '.join(allowed)}; got {value!r}.", field
        )
    return value


def _object_id(value: Any, view: str) -> int:
    # bool is an int in Python; {"id": true} is a client bug, not rack 1.
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ProtocolError(
            "invalid_id", f"The {view} view needs \"id\": the positive integer id of the "
            f"{view}; got {value!r}.", "id",
        )
    return value


def parse_message(
    text: str | None, metrics: dict[str, Iterable[str]], default_metric: dict[str, str]
) -> tuple[dict[str, Any], Request]:
    """Decode and validate one client text frame.

    ``metrics`` maps each view to the metric names it can stream and
    ``default_metric`` gives the one used when the client names none. Returns
    the decoded object (for error echoes) and the request; raises
    :class:`ProtocolError` on anything else.
    """
    if text is None:
        raise ProtocolError("bad_frame", "Send JSON text frames, not binary.")
    if len(text) > MAX_MESSAGE_BYTES:
        raise ProtocolError(
            "too_large", f"Messages are limited to {MAX_MESSAGE_BYTES} bytes; got {len(text)}."
        )
    try:
        data = nesting.loads(text, max_depth=MAX_MESSAGE_DEPTH)
    except nesting.TooDeep:
        raise ProtocolError("too_deep", f"Messages nest at most {MAX_MESSAGE_DEPTH} levels "
                            "deep; send one flat object such as "
                            '{"action": "subscribe", "view": "cluster"}.') from None
    except ValueError as exc:
        raise ProtocolError("bad_json", f"Not valid JSON: {exc}.") from None
    if not isinstance(data, dict):
        raise ProtocolError("bad_json", "Send a JSON object such as "
                            '{"action": "subscribe", "view": "cluster"}.')
    action = _choose(data.get("action"), ActionChoices.values(), "action", "unknown_action")
    if action == ActionChoices.PING:
        return data, Request(action)
    if action == ActionChoices.UNSUBSCRIBE:
        view = data.get("view")
        if view is not None:
            _choose(view, ViewChoices.values(), "view", "unknown_view")
        object_id = data.get("id")
        if object_id is not None:
            object_id = _object_id(object_id, view or "object")
        metric = data.get("metric")
        if metric is not None and not isinstance(metric, str):
            raise ProtocolError("unknown_metric", f"metric must be a string; got {metric!r}.",
                                "metric")
        return data, Request(action, view=view, id=object_id, metric=metric)

    view = _choose(data.get("view"), ViewChoices.values(), "view", "unknown_view")
    if view == ViewChoices.CLUSTER:
        if data.get("id") is not None:
            raise ProtocolError("invalid_id", "The cluster view takes no id: the cluster is "
                                "the one in the URL.", "id")
        object_id = None
    else:
        object_id = _object_id(data.get("id"), view)
    metric = data.get("metric", default_metric[view])
    metric = _choose(metric, sorted(metrics[view]), "metric", "unknown_metric")
    key = SubscriptionKey(view, object_id, metric)
    return data, Request(action, key=key, view=view, id=object_id, metric=metric)
