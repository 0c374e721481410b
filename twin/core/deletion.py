"""The one deletion rule: a row that holds others is not deleted by accident.

Deleting a rack with its servers, a supernode with its cards or a live cluster
with its telemetry agents takes everything inside along (``on_delete=CASCADE``)
or fails half-way (``PROTECT``). So a model that holds other rows derives from
:class:`GuardedDeletion` and says what it holds (:meth:`~GuardedDeletion.deletion_contents`);
then, in the API and in the admin alike:

* nothing inside → deleted as usual;
* something inside → refused, naming what is inside with counts per kind
  (``{"servers": 1, "cards": 8}``), unless the caller confirms the cascade
  explicitly (the API's ``?cascade=true``, the admin's confirmation page, which
  lists the same counts);
* a model whose cascade must be confirmed by name (a cluster: deleting it
  drops live telemetry agents too) also needs ``?confirm=<its name>``;
* rows that merely *use* the object (cards of an accelerator type) are never
  deleted with it: the refusal stands whatever is sent.

Counts come from one ``COUNT`` per kind, never from loading the rows (Django's
``Collector`` would read a million cards into Python); the cascade itself is
:meth:`~GuardedDeletion.delete_with_contents`, which a model overrides when a
set-based delete is needed. Apps above the owning app add their own rows
(telemetry's agents of a cluster) with :func:`register_contents`, so the
hardware app never imports them.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from django.db import models

__all__ = [
    "DeletionBlocked",
    "DeletionCheck",
    "GuardedDeletion",
    "check_deletion",
    "content_models",
    "describe_contents",
    "register_contents",
]

Rows = Callable[[models.Model], models.QuerySet]

#: Contents other apps add to a model: model → [(label, rows of an instance)].
_registered: dict[type[models.Model], list[tuple[str, Rows]]] = {}


class DeletionBlocked(Exception):
    """A cascade that cannot go ahead (rows of another app protect something inside):
    the API answers 409 with ``message``, the admin shows it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def register_contents(model: type[models.Model], label: str, rows: Rows) -> None:
    """Count ``rows(instance)`` as held by every ``model`` instance under ``label``
    (called from an app's ``ready()``; registering the same label twice replaces it)."""
    entries = [(name, fn) for name, fn in _registered.get(model, []) if name != label]
    _registered[model] = [*entries, (label, rows)]


class GuardedDeletion:
    """Mixin of models that hold other rows (see the module doc)."""

    #: Whether ``?cascade=true`` may delete what is inside (False: rows that only use it).
    deletion_cascades: ClassVar[bool] = True
    #: A field whose value must be sent back (``?confirm=``) to confirm a cascade.
    deletion_confirm_field: ClassVar[str | None] = None

    def deletion_contents(self) -> dict[str, models.QuerySet]:
        """What deleting this row would take along or is blocked by: label → rows."""
        return {}

    def all_deletion_contents(self) -> dict[str, models.QuerySet]:
        contents = dict(self.deletion_contents())
        for model, entries in _registered.items():
            if isinstance(self, model):
                contents.update((label, rows(self)) for label, rows in entries)
        return contents

    def deletion_blocked_by(self) -> dict[str, int]:
        """Counts per kind of what is inside (kinds with none left out)."""
        counts = {label: rows.order_by().count()
                  for label, rows in self.all_deletion_contents().items()}
        return {label: n for label, n in counts.items() if n}

    def deletion_refusal_hint(self) -> str:
        """What to do instead, for a model whose contents are never cascaded."""
        return "Delete or move them first."

    def delete_with_contents(self) -> None:
        """Delete this row and everything inside (in the caller's transaction)."""
        self.delete()  # type: ignore[attr-defined]


def content_models(obj: GuardedDeletion) -> dict[str, type[models.Model]]:
    """Label → model of each kind of contents (for the admin's permission check)."""
    return {label: rows.model for label, rows in obj.all_deletion_contents().items()}


def describe_contents(counts: Mapping[str, int]) -> str:
    """``servers: 1, cards: 8, links: 3`` — the kinds as the ``contains`` keys name them."""
    return ", ".join(f"{label.replace('_', ' ')}: {n:,}" for label, n in counts.items())


@dataclass(frozen=True)
class DeletionCheck:
    """The outcome of :func:`check_deletion`."""

    allowed: bool
    cascade: bool = False  #: delete what is inside too
    detail: str = ""
    contains: dict[str, int] = field(default_factory=dict)
    #: A bad ``confirm`` value: the message for that field (an HTTP 400, not a 409).
    confirm_error: str = ""
    #: The query that would confirm the cascade, when one may.
    retry_with: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"detail": self.detail, "contains": self.contains}
        if self.retry_with:
            body["retry_with"] = self.retry_with
        return body


def check_deletion(obj: models.Model, *, cascade: bool, confirm: str | None) -> DeletionCheck:
    """Apply the rule to ``obj`` given the caller's ``cascade`` and ``confirm``."""
    if not isinstance(obj, GuardedDeletion):
        return DeletionCheck(allowed=True)
    counts = obj.deletion_blocked_by()
    if not counts:
        return DeletionCheck(allowed=True)
    what = f"{obj._meta.verbose_name.capitalize()} {obj}"
    inside = describe_contents(counts)
    if not obj.deletion_cascades:
        return DeletionCheck(
            allowed=False, contains=counts,
            detail=f"Cannot delete {what}: it is in use ({inside}). "
                   f"{obj.deletion_refusal_hint()}",
        )
    retry = {"cascade": "true"}
    expected = None
    if obj.deletion_confirm_field:
        expected = str(getattr(obj, obj.deletion_confirm_field))
        retry["confirm"] = expected
    if not cascade:
        confirm_text = (f" and confirm={expected} (its {obj.deletion_confirm_field})"
                        if expected is not None else "")
        return DeletionCheck(
            allowed=False, contains=counts, retry_with=retry,
            detail=f"Cannot delete {what}: it is not empty ({inside}). Delete or move those "
                   f"first, or send cascade=true{confirm_text} to delete it with everything in "
                   f"it.",
        )
    if expected is not None and confirm != expected:
        said = "no confirm was sent" if confirm is None else f"{confirm!r} does not match"
        return DeletionCheck(
            allowed=False, contains=counts,
            confirm_error=f"Deleting {what} also deletes everything in it ({inside}): "
                          f"confirm with its {obj.deletion_confirm_field}, confirm={expected} "
                          f"({said}).",
        )
    return DeletionCheck(allowed=True, cascade=True, contains=counts)
