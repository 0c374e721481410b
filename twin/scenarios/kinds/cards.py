"""A card of a cluster by id or serial: the lookup the route and failure kinds share."""
from __future__ import annotations

from typing import Any

from twin.scenarios.inputs import ClusterInput, card_node
from twin.scenarios.kinds.base import ScenarioInputError

__all__ = ["card_lookup"]


def card_lookup(info: ClusterInput, value: Any, field: str) -> dict[str, Any]:
    """A card of the cluster by id (int) or serial (str) → its node and labels.

    Shared by the route and failure kinds and the synchronous route endpoint
    (``twin.scenarios.api.route``); ``field`` is the key of the error.
    """
    from twin.hardware.models import Card

    cards = Card.objects.filter(supernode__cluster_id=info.cluster_id)
    if isinstance(value, bool) or not isinstance(value, int | str) or value == "":
        raise ScenarioInputError.one(field, f"a card id (integer) or serial (string), "
                                            f"got {value!r}")
    if isinstance(value, int):
        matches = cards.filter(pk=value)
    elif "\x00" in value:  # no serial holds a NUL: PostgreSQL text cannot (a 500 to ask)
        matches = cards.none()
    else:
        matches = cards.filter(serial=value)
    row = matches.values("pk", "serial", "index", "x", "y", "z", "supernode__index",
                         "supernode__fabric", "supernode__dim_x", "supernode__dim_y",
                         "supernode__dim_z").first()
    if row is None:
        what = f"id {value}" if isinstance(value, int) else f"serial {value!r}"
        raise ScenarioInputError.one(field, f"no card with {what} in cluster "
                                            f"{info.cluster_name!r}", missing=True)
    node = card_node(info, row["supernode__index"], row["supernode__fabric"], row["index"],
                     (row["supernode__dim_x"], row["supernode__dim_y"], row["supernode__dim_z"]),
                     (row["x"], row["y"], row["z"]))
    return {"node": node, "id": row["pk"], "serial": row["serial"],
            "supernode": row["supernode__index"], "index": row["index"]}
