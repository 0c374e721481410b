"""The base viewset of every model an app's API edits.

Every write runs in one ``transaction.atomic()`` block that spans validation
and save, so the rows a serializer locks while it validates (see
``ValidatedModelSerializer.lock``) stay locked until the row is committed, and
a write that fails half-way leaves nothing behind.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Model, ProtectedError, RestrictedError
from rest_framework import status, viewsets
from rest_framework.exceptions import APIException
from rest_framework.filters import OrderingFilter
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request
from rest_framework.response import Response

from twin.core.api.filters import TwinFilterBackend

__all__ = ["Conflict", "PreconditionFailed", "TwinModelViewSet", "row_etag"]


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the current state of the data."
    default_code = "conflict"


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


class TwinModelViewSet(viewsets.ModelViewSet):
    """CRUD with atomic writes, a fresh read-back, 409 for conflicts, and ETags.

    After a create or update the object is read back through ``get_queryset()``
    so the response carries the same computed fields (e.g. a rack's
    ``power_w``) as a GET would. A detail GET carries an ``ETag``; a write that
    sends ``If-Match`` with an older one gets 412 instead of silently
    overwriting someone else's edit (after NetBox's viewsets).
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

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self._atomic(super().destroy, request, *args, **kwargs)

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
        serializer.save()
        self._read_back(serializer)

    def perform_update(self, serializer: Any) -> None:
        serializer.save()
        self._read_back(serializer)
