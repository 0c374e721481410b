"""The numeric bounds of a model field, for its serializer field (and so the schema).

A model states its bounds in three places that DRF does not all carry over:

* the column type — but Django derives those validators from the database in
  use: a ``PositiveIntegerField`` takes up to 2**31 − 1 on PostgreSQL and up to
  2**63 − 1 on SQLite, so a schema generated on SQLite promised values
  PostgreSQL refuses (and sums of them overflowed SQLite). The bound used here
  is the portable one, Django's own table of column ranges, whatever the
  database;
* for a float column, which holds any double, :data:`FLOAT_LIMIT` either way:
  a figure of 1.5e308 was accepted and the draw × PUE computed from it was
  infinite, which no JSON can carry (a 500 on every read of the rack);
* validators on the field (``MinValueValidator``…), which DRF already maps;
* check constraints such as ``Q(link_gbps__gt=0) & Q(latency_ns__gte=0)``,
  which DRF ignores: the API then took the value and failed in
  ``full_clean()`` with a message on the constraint's name, and the schema
  said nothing. The simple ones (a field compared with a number, joined by
  AND) become bounds here; anything else stays for ``full_clean()``.

:func:`bounded_kwargs` applies them to the keyword arguments DRF built for a
field; :class:`GreaterThanValidator` and :class:`LessThanValidator` express an
exclusive bound on a float (the schema shows them as ``exclusiveMinimum``/
``exclusiveMaximum``, see ``twin.core.api.schema``).
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.core.validators import BaseValidator
from django.db import models
from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.models import Q
from django.utils.deconstruct import deconstructible

__all__ = ["FLOAT_LIMIT", "Bound", "GreaterThanValidator", "LessThanValidator",
           "bounded_kwargs", "constraint_bounds"]

_LOOKUPS = {"gt", "gte", "lt", "lte"}

#: The largest magnitude of a float field written through the API: far above any
#: figure of the model (a petawatt, a 10**15 ns latency), far enough below the
#: largest double that sums and products of figures stay finite.
FLOAT_LIMIT = 1e15


@deconstructible
class GreaterThanValidator(BaseValidator):
    message = "Ensure this value is greater than %(limit_value)s."
    code = "min_value"

    def compare(self, a: Any, b: Any) -> bool:
        return a <= b


@deconstructible
class LessThanValidator(BaseValidator):
    message = "Ensure this value is less than %(limit_value)s."
    code = "max_value"

    def compare(self, a: Any, b: Any) -> bool:
        return a >= b


@dataclass
class Bound:
    """The tightest bounds known for one field; ``*_exclusive`` when strict."""

    minimum: float | None = None
    min_exclusive: bool = False
    maximum: float | None = None
    max_exclusive: bool = False

    def add(self, lookup: str, value: float) -> None:
        if lookup in ("gt", "gte"):
            strict = lookup == "gt"
            if self.minimum is None or value > self.minimum or (
                    value == self.minimum and strict):
                self.minimum, self.min_exclusive = value, strict
        else:
            strict = lookup == "lt"
            if self.maximum is None or value < self.maximum or (
                    value == self.maximum and strict):
                self.maximum, self.max_exclusive = value, strict


def _conjuncts(condition: Q) -> Iterator[tuple[str, str, float]]:
    """``(field, lookup, number)`` of each simple comparison ANDed in ``condition``."""
    if condition.negated or condition.connector != Q.AND:
        return
    for child in condition.children:
        if isinstance(child, Q):
            yield from _conjuncts(child)
            continue
        key, value = child
        field, _, lookup = key.rpartition("__")
        if (field and "__" not in field and lookup in _LOOKUPS
                and isinstance(value, int | float) and not isinstance(value, bool)):
            yield field, lookup, value


def constraint_bounds(model: type[models.Model]) -> dict[str, Bound]:
    """Field name → the bounds the model's check constraints put on it."""
    bounds: dict[str, Bound] = {}
    for constraint in model._meta.constraints:
        if isinstance(constraint, models.CheckConstraint):
            for field, lookup, value in _conjuncts(constraint.condition):
                bounds.setdefault(field, Bound()).add(lookup, value)
    return bounds


def _portable_range(model_field: models.Field) -> tuple[int, int] | None:
    ranges = BaseDatabaseOperations.integer_field_ranges
    return ranges.get(model_field.get_internal_type())


def bounded_kwargs(model_field: models.Field, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` of the serializer field for ``model_field`` with its bounds applied:
    integers get ``min_value``/``max_value`` (a strict bound moves by one), floats
    ``min_value``/``max_value`` or an exclusive validator."""
    if model_field.model is None or not isinstance(
            model_field, models.IntegerField | models.FloatField):
        return kwargs
    bound = constraint_bounds(model_field.model).get(model_field.name, Bound())
    integer = isinstance(model_field, models.IntegerField)
    if integer and (portable := _portable_range(model_field)) is not None:
        bound.add("gte", portable[0])
        bound.add("lte", portable[1])
    elif not integer:
        bound.add("gte", -FLOAT_LIMIT)
        bound.add("lte", FLOAT_LIMIT)
    kwargs = dict(kwargs)
    validators = list(kwargs.get("validators", []))
    if bound.minimum is not None:
        if integer:
            low = math.floor(bound.minimum) + 1 if bound.min_exclusive \
                else math.ceil(bound.minimum)
            kwargs["min_value"] = max(low, kwargs.get("min_value", low))
        elif bound.min_exclusive:
            validators.append(GreaterThanValidator(bound.minimum))
        else:
            kwargs["min_value"] = max(bound.minimum, kwargs.get("min_value", bound.minimum))
    if bound.maximum is not None:
        if integer:
            high = math.ceil(bound.maximum) - 1 if bound.max_exclusive \
                else math.floor(bound.maximum)
            kwargs["max_value"] = min(high, kwargs.get("max_value", high))
        elif bound.max_exclusive:
            validators.append(LessThanValidator(bound.maximum))
        else:
            kwargs["max_value"] = min(bound.maximum, kwargs.get("max_value", bound.maximum))
    if validators:
        kwargs["validators"] = validators
    return kwargs
