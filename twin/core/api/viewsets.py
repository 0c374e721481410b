"""The base viewset of every model an app's API edits.

Every write runs in one ``transaction.atomic()`` block that spans validation
and save, so the rows a serializer locks while it validates (see
``ValidatedModelSerializer.lock``) stay locked until the row is committed, and
a write that fails half-way leaves nothing behind.

A DELETE follows the deletion rule of ``twin.core.deletion``: a row that holds
others answers 409 with what is inside (``{"detail", "contains": {"cards": 8}}``)
unless ``?cascade=true`` (and, for a model that asks for it, ``?confirm=<name>``)
confirms that everything inside goes too.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Model, ProtectedError, RestrictedError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status, viewsets
from rest_framework.exceptions import APIException, PermissionDenied, ValidationError
from rest_framework.filters import OrderingFilter
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request
from rest_framework.response import Response

from twin.core.api.access import ClusterScopedMixin
from twin.core.api.filters import TwinFilterBackend
from twin.core.deletion import DeletionBlocked, check_deletion, content_models

__all__ = ["Conflict", "DeletionConflictSerializer", "PreconditionFailed", "TwinModelViewSet",
           "row_etag"]

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off", ""}


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the current state of the data."
    default_code = "conflict"


class DeletionRefused(Conflict):
    """409 whose body is the deletion check's (counts stay numbers, not strings)."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(body["detail"])
        self.detail = body  # type: ignore[assignment]


class DeletionConflictSerializer(serializers.Serializer):
    """The body of a refused DELETE."""

    detail = serializers.CharField()
    contains = serializers.DictField(
        child=serializers.IntegerField(), required=False,
        help_text="What is inside, per kind (e.g. {\"servers\": 1, \"cards\": 8}); absent "
                  "when a cascade's `confirm` is missing or not the object's name (the "
                  "`confirm` key then says what to send).")
    retry_with = serializers.DictField(
        child=serializers.CharField(), required=False,
        help_text="The query parameters that delete it with everything inside; absent when "
                  "that is not offered (an accelerator type in use).")


DESTROY_SCHEMA = extend_schema(
    parameters=[
        OpenApiParameter("cascade", OpenApiTypes.BOOL, description=(
            "Delete the object with everything in it (servers, cards, links, …). Without "
            "it, an object that holds others is refused with 409.")),
        OpenApiParameter("confirm", OpenApiTypes.STR, description=(
            "With cascade=true on a cluster: its name, to confirm.")),
    ],
    responses={
        204: None,
        400: OpenApiResponse(description="A bad `cascade`, or a missing or wrong `confirm`."),
        409: OpenApiResponse(DeletionConflictSerializer,
                             description="It holds other objects (counts in `contains`)."),
    },
)


def _flag(request: Request, name: str) -> bool:
    raw = request.query_params.get(name, "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ValidationError({name: [f"Must be true or false, not {raw[:40]!r}."]})


def _check_cascade_permissions(request: Request, obj: Model, contains: dict[str, int]) -> None:
    """A cascade deletes rows of other models: it needs their delete permission too
    (as the admin's confirmation page does)."""
    kinds = content_models(obj)
    lacking: set[str] = set()
    for label in contains:
        opts = kinds[label]._meta
        if not request.user.has_perm(f"{opts.app_label}.delete_{opts.model_name}"):
            lacking.add(str(opts.verbose_name_plural))
    if lacking:
        raise PermissionDenied(f"Deleting {obj} with everything in it needs permission to "
                               f"delete {', '.join(sorted(lacking))} too.")


class PreconditionFailed(APIException):
    status_code = status.HTTP_412_PRECONDITION_FAILED
    default_detail = "The object changed since you read it."
    default_code = "precondition_failed"


def row_etag(obj: Model) -> str:
    """A strong ETag of the stored row: a hash of its concrete column values.

    Computed fields (a rack's draw) are left out on purpose: a card added to a
    rack must not make an edit of that rack's name fail.
    """
    values = "\x1f".join(str(getattr(obj, f.attname)) for f in obj._meta.concrete_fields)
    return '"' + hashlib.sha256(values.encode()).hexdigest()[:32] + '"'


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__


class TwinModelViewSet(ClusterScopedMixin, viewsets.ModelViewSet):
    """CRUD with atomic writes, a fresh read-back, 409 for conflicts, and ETags.

    After a create or update the object is read back through ``get_queryset()``
    so the response carries the same computed fields (e.g. a rack's
    ``power_w``) as a GET would. A detail GET carries an ``ETag``; a write that
    sends ``If-Match`` with an older one gets 412 instead of silently
    overwriting someone else's edit (after NetBox's viewsets). Per-cluster access
    comes from ``ClusterScopedMixin``: a subclass declares ``cluster_field``.
    """

    filter_backends = [TwinFilterBackend, OrderingFilter]
    ordering_fields: list[str] = ["id", "name", "created", "last_updated"]

    def _atomic(self, write: Callable[..., Response], request: Request, *args: Any,
                **kwargs: Any) -> Response:
        try:
            with transaction.atomic():
                return write(request, *args, **kwargs)
        except (ProtectedError, RestrictedError) as exc:  # subclasses of IntegrityError
            blocking = exc.protected_objects if isinstance(exc, ProtectedError) else \
                exc.restricted_objects
            kinds = sorted({str(obj._meta.verbose_name_plural) for obj in blocking})
            raise Conflict(f"Cannot delete: {', '.join(kinds)} still refer to it; "
                           f"delete or move them first.") from exc
        except IntegrityError as exc:
            # Only a race reaches here (validation checks uniqueness first).
            raise Conflict(f"Conflicts with existing data: {_first_line(exc)}") from exc

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self._atomic(super().create, request, *args, **kwargs)

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self._atomic(super().update, request, *args, **kwargs)

    @DESTROY_SCHEMA
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self._atomic(self._destroy, request, *args, **kwargs)

    def _destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        cascade = _flag(request, "cascade")
        instance = self.get_object()
        # Lock the row first: on PostgreSQL a row being added inside it (its foreign key
        # takes a share lock on this row) waits, so the counts below stay true.
        list(type(instance)._default_manager.select_for_update().filter(pk=instance.pk)
             .values_list("pk", flat=True))
        check = check_deletion(instance, cascade=cascade,
                               confirm=request.query_params.get("confirm"))
        if check.confirm_error:
            # The value is well formed; it is what is stored that it must match: 409.
            raise ValidationError({"confirm": [check.confirm_error]}, code="does_not_match")
        if not check.allowed:
            raise DeletionRefused(check.as_dict())
        if check.cascade:
            _check_cascade_permissions(request, instance, check.contains)
        try:
            if check.cascade:
                instance.delete_with_contents()  # type: ignore[attr-defined]
            else:
                self.perform_destroy(instance)
        except DeletionBlocked as exc:
            raise Conflict(exc.message) from exc
        return Response(status=status.HTTP_204_NO_CONTENT)

    def get_object(self) -> Model:
        obj = super().get_object()
        if_match = self.request.headers.get("If-Match")
        if if_match and self.request.method not in SAFE_METHODS:
            wanted = {tag.strip().removeprefix("W/") for tag in if_match.split(",")}
            if "*" not in wanted and row_etag(obj) not in wanted:
                raise PreconditionFailed(
                    f"{obj._meta.verbose_name.capitalize()} {obj} changed since you read it "
                    f"(ETag {row_etag(obj)}); GET it again and reapply your change."
                )
        return obj

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        obj = self.get_object()
        response = Response(self.get_serializer(obj).data)
        response["ETag"] = row_etag(obj)
        return response

    def finalize_response(self, request: Request, response: Response, *args: Any,
                          **kwargs: Any) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        instance = getattr(self, "_written", None)
        if instance is not None and response.status_code in (200, 201):
            response["ETag"] = row_etag(instance)
        return response

    def _read_back(self, serializer: Any) -> None:
        serializer.instance = self.get_queryset().get(pk=serializer.instance.pk)
        self._written = serializer.instance

    def perform_create(self, serializer: Any) -> None:
        self.check_cluster_create()
        serializer.save()
        self.check_cluster_write(serializer.instance)
        self._read_back(serializer)

    def perform_update(self, serializer: Any) -> None:
        serializer.save()
        self.check_cluster_write(serializer.instance)
        self._read_back(serializer)
