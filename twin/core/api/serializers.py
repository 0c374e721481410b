"""The base serializer of every model an app's API edits.

:class:`ValidatedModelSerializer` (after NetBox's ``netbox/api/serializers/base.py``)
builds the model instance from the request and runs ``full_clean()``, so the
invariants that live in the models' ``clean()`` (rack power budget, torus
dimensions, link compatibility) answer an API client exactly as they answer an
admin user — HTTP 400 with a message on the field at fault. The instance that
was cleaned is the one saved, so anything ``clean()`` derives (a device's rack
from its server) is kept.

A check that reads other rows (a rack's budget against what is already in it)
is only sound if no other transaction changes those rows between the check and
the insert: the model's ``full_clean()`` locks them when it runs in a
transaction (hardware's budgeted models lock the racks a write adds draw to,
for the admin as for the API), and the viewsets run validation and save in one
``transaction.atomic()`` block, so the locks hold until the row is committed.
A request field that is not a model field (hardware's ``allow_over_budget``)
is taken off in :meth:`ValidatedModelSerializer.build`.

Numeric fields carry the model's bounds (``twin.core.api.bounds``): the
portable range of the column and the simple check constraints, so a value
out of range is a 400 on its field before the model sees it, and the schema
states the range.
"""
from __future__ import annotations

from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import models
from rest_framework import serializers
from rest_framework.fields import get_error_detail
from rest_framework.settings import api_settings

from twin.core.api.bounds import bounded_kwargs
from twin.core.bounds import AtLeast, AtMost

__all__ = ["AllowOverBudgetSerializer", "PlainPrimaryKeyRelatedField", "ValidatedModelSerializer"]


class PlainPrimaryKeyRelatedField(serializers.PrimaryKeyRelatedField):
    """A primary-key field rendered as a text input in the browsable API.

    The default ``<select>`` lists up to 1,000 rows and calls ``str()`` on each
    (a query per rack or supernode): unusable on a million-card cluster.
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("style", {"base_template": "input.html", "input_type": "number"})
        super().__init__(**kwargs)


class ValidatedModelSerializer(serializers.ModelSerializer):
    """A model serializer that enforces the model's own validation.

    ``validate()`` applies the incoming values to an instance (:meth:`build`: a
    new one on create, the existing one on update) and calls ``full_clean()``;
    Django's per-field errors become DRF errors on the same field names
    (``__all__`` becomes ``non_field_errors``).
    """

    serializer_related_field = PlainPrimaryKeyRelatedField

    display = serializers.SerializerMethodField()

    def get_display(self, obj: models.Model) -> str:
        return str(obj)

    def build_standard_field(self, field_name: str, model_field: models.Field
                             ) -> tuple[type[serializers.Field], dict[str, Any]]:
        """DRF's field with the model's bounds: the column's portable range and simple
        check constraints (``twin.core.api.bounds``), said with the unit of the model's
        bound validators (``twin.core.bounds``) where those set the limit."""
        field_class, kwargs = super().build_standard_field(field_name, model_field)
        kwargs = bounded_kwargs(model_field, kwargs)
        messages = {}
        for validator in model_field.validators:
            if isinstance(validator, AtMost) and kwargs.get("max_value") == validator.limit_value:
                messages["max_value"] = validator.api_message
            elif isinstance(validator, AtLeast) and \
                    kwargs.get("min_value") == validator.limit_value:
                messages["min_value"] = validator.api_message
        if messages:
            kwargs["error_messages"] = {**kwargs.get("error_messages", {}), **messages}
        return field_class, kwargs

    # --- hook -------------------------------------------------------------
    def build(self, attrs: dict[str, Any]) -> models.Model:
        """The instance the request describes, not saved: a new one on create, the
        existing one with ``attrs`` set on update. A serializer that accepts request
        fields that are not model fields takes them off ``attrs`` here."""
        if self.instance is None:
            return self.Meta.model(**attrs)
        for name, value in attrs.items():
            setattr(self.instance, name, value)
        return self.instance

    # --- validation -----------------------------------------------------
    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = super().validate(attrs)
        instance = self.build(attrs)
        try:
            instance.full_clean()
        except DjangoValidationError as exc:
            detail = get_error_detail(exc)
            if isinstance(detail, dict) and NON_FIELD_ERRORS in detail:
                detail[api_settings.NON_FIELD_ERRORS_KEY] = detail.pop(NON_FIELD_ERRORS)
            raise serializers.ValidationError(detail) from exc
        self._cleaned_instance = instance
        return attrs

    def create(self, validated_data: dict[str, Any]) -> models.Model:
        instance = self._cleaned_instance
        instance.save()
        return instance

    def update(self, instance: models.Model, validated_data: dict[str, Any]) -> models.Model:
        cleaned = self._cleaned_instance
        cleaned.save()
        return cleaned


class AllowOverBudgetSerializer(ValidatedModelSerializer):
    """A write a limit may refuse (a rack's budget, an element's rating) unless the
    client sets ``allow_over_budget``: the flag is not stored but handed to the model
    (its ``clean()`` then records instead of refusing), and it reads back false unless
    this response is the write that set it, so a PUT of every field as read still works.
    Subclasses declare the field with their own help text and report what went over."""

    def build(self, attrs: dict[str, Any]) -> models.Model:
        self._allow = bool(attrs.pop("allow_over_budget", False))
        instance = super().build(attrs)
        instance.allow_over_budget = self._allow  # type: ignore[attr-defined]
        return instance

    def to_representation(self, instance: models.Model) -> dict[str, Any]:
        data = super().to_representation(instance)
        data["allow_over_budget"] = getattr(self, "_allow", False)
        return data
