"""The OpenAPI schema's error answers, documented once for every operation.

drf-spectacular documents only the success of an operation; a client (and
the frontend's generated types) also needs to know how it fails. The rules
that decide which errors an operation can answer live here, in
:class:`TwinAutoSchema` (``DEFAULT_SCHEMA_CLASS``), so every app's endpoints
get them without a decorator each:

* **400** (``ValidationError``: per-field messages) where the request carries
  anything to validate: query parameters, a body, or path parameters;
* **401** everywhere (a missing or bad token), with ``WWW-Authenticate``;
* **403** everywhere (no permission; a session write without its CSRF token);
* **404** where the path names an object, and on paginated lists (a page or
  cursor past the end);
* **409** on the writes of a :class:`~twin.core.api.viewsets.TwinModelViewSet`
  (a uniqueness race, or rows that still refer to the object on delete) and
  wherever there is a body: a well-formed request that conflicts with what is
  stored (a name or position taken, an id that names no row, a rack over its power
  budget) answers 409 with
  the per-field messages (``twin.core.api.exceptions``);
* **412** on its updates and deletes, which take ``If-Match`` (documented as a
  header parameter); its reads and writes carry an ``ETag``;
* **413** and **415** where there is a body (too large; a media type no
  parser reads);
* **429** where the view has throttles, with ``Retry-After``;
* **503** everywhere (Redis or the database unreachable), with ``Retry-After``.

An operation that declares one of these codes itself (``@extend_schema``)
keeps its own. Every error body is JSON with ``detail`` (``Error``), except
400 (``ValidationError``).

It also states what the generic mapping leaves out: ids in paths and primary-key
fields run from 1 to ``MAX_ID``, and a strict bound (``twin.core.api.bounds``)
is an ``exclusiveMinimum``/``exclusiveMaximum``.
"""
from __future__ import annotations

from typing import Any

from django.core.validators import ProhibitNullCharactersValidator
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework.relations import PrimaryKeyRelatedField

from twin.core.api.bounds import GreaterThanValidator, LessThanValidator
from twin.core.filtersets import MAX_ID

__all__ = ["ERROR_RESPONSES", "NO_NUL", "TwinAutoSchema", "error_response"]

_WRITES = {"POST", "PUT", "PATCH", "DELETE"}
_BODY = {"POST", "PUT", "PATCH"}
#: TwinModelViewSet actions that write in one transaction (409 on a conflict) …
_ATOMIC_WRITES = {"create", "update", "partial_update", "destroy"}
#: … and the ones whose answer carries the row's ETag.
_VERSIONED = {"retrieve", "create", "update", "partial_update"}

_ERROR = {
    "type": "object",
    "description": "An error: `detail` says what went wrong and what to do; some answers "
                   "add keys of their own (e.g. `limit` on a 413).",
    "properties": {"detail": {"type": "string", "description": "What went wrong."}},
    "required": ["detail"],
    "additionalProperties": {},
}
_VALIDATION_ERROR = {
    "type": "object",
    "description": "Bad input, nothing written: each key is a field at fault (a dotted "
                   "path for nested input, e.g. `params.dims[0]`) and its value the list of "
                   "messages (an object of the same shape for a nested object); "
                   "`non_field_errors` is about the object as a whole; `detail` alone when "
                   "the request could not be read at all (malformed JSON).",
    "properties": {
        "detail": {"type": "string"},
        "non_field_errors": {"type": "array", "items": {"type": "string"}},
    },
    "additionalProperties": {},
}

_RETRY_AFTER = {"Retry-After": {"schema": {"type": "string"},
                                "description": "Seconds to wait before retrying."}}

#: status → (component name, description, body schema name, response headers)
ERROR_RESPONSES: dict[int, tuple[str, str, str, dict[str, Any]]] = {
    400: ("BadRequest", "Bad input: per-field messages; nothing was written.",
          "ValidationError", {}),
    401: ("Unauthorized", "No valid credentials: send `Authorization: Token <token>` "
          "(from /api/token/, or a named one from /api/tokens/; revoked and expired ones "
          "are refused) or log in.", "Error",
          {"WWW-Authenticate": {"schema": {"type": "string"},
                                "description": "The scheme to authenticate with."}}),
    403: ("Forbidden", "Logged in, but without the permission this needs (or a session "
          "write without its CSRF token).", "Error", {}),
    404: ("NotFound", "No such object (or page).", "Error", {}),
    409: ("Conflict", "Well formed, but conflicts with the stored data: a name or position "
          "taken, an id that names no row, rows that still refer to it, a rack (or the PDU, "
          "CDU or feed above it) that the write would take over its power budget or rating. "
          "`detail` says what; the fields at fault carry their messages, as in a 400. "
          "Nothing was changed.", "Error", {}),
    412: ("PreconditionFailed", "`If-Match` names an older version: GET it again and "
          "reapply your change.", "Error", {}),
    413: ("PayloadTooLarge", "The body is over the size limit.", "Error", {}),
    415: ("UnsupportedMediaType", "A content type the endpoint does not read.", "Error", {}),
    429: ("TooManyRequests", "Too many requests: wait `Retry-After` seconds.", "Error",
          _RETRY_AFTER),
    503: ("ServiceUnavailable", "A service it needs (Redis, the database) is unreachable "
          "or behind: retry after `Retry-After` seconds.", "Error", _RETRY_AFTER),
}

_ETAG = {"ETag": {"schema": {"type": "string"},
                  "description": "Version of the stored row: send it as `If-Match` on a "
                                 "write to refuse (412) if someone changed it meanwhile."}}


#: A string without NUL characters (PostgreSQL's text cannot hold one; DRF and Django's
#: form fields refuse them).
NO_NUL = "^[^\\u0000]*$"


def _no_nul(schema: dict[str, Any]) -> None:
    if schema.get("type") == "string" and not {"pattern", "format", "enum"} & set(schema):
        schema["pattern"] = NO_NUL


class TwinAutoSchema(AutoSchema):
    """drf-spectacular's schema of an operation, plus its error answers (module doc)."""

    def _model_action(self) -> str | None:
        """The action of a ``TwinModelViewSet`` (``None`` for any other view)."""
        from twin.core.api.viewsets import TwinModelViewSet

        return getattr(self.view, "action", None) \
            if isinstance(self.view, TwinModelViewSet) else None

    def _guards_versions(self) -> bool:
        """A write on one object of a ``TwinModelViewSet``: its ``get_object`` checks
        ``If-Match`` on any method but a read."""
        return self._model_action() not in (None, "create") and self.method in _WRITES

    def get_override_parameters(self) -> list[Any]:
        parameters = list(super().get_override_parameters())
        if self._guards_versions():
            parameters.append(OpenApiParameter(
                "If-Match", str, OpenApiParameter.HEADER,
                description="The `ETag` you read: the write is refused (412) if the row "
                            "changed since. `*` matches any version."))
        return parameters

    def _map_serializer_field(self, field: Any, direction: Any,
                              bypass_extensions: bool = False) -> dict[str, Any]:
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if isinstance(field, PrimaryKeyRelatedField) and schema.get("type") == "integer":
            schema.update(minimum=1, maximum=MAX_ID)
        for validator in getattr(field, "validators", ()):
            if isinstance(validator, GreaterThanValidator):
                schema.update(minimum=validator.limit_value, exclusiveMinimum=True)
            elif isinstance(validator, LessThanValidator):
                schema.update(maximum=validator.limit_value, exclusiveMaximum=True)
        return schema

    def _insert_field_validators(self, field: Any, schema: dict[str, Any]) -> None:
        """drf-spectacular's validator mapping, which drops an ``exclusiveMinimum`` when
        a plain ``MinValueValidator`` on the same bound follows (``bf16_tflops``: ≥ 0 by
        its field, > 0 by its check constraint): the strict bound is put back; and a
        string that refuses NUL characters (every DRF ``CharField``) says so."""
        super()._insert_field_validators(field, schema)
        for validator in getattr(field, "validators", ()):
            if isinstance(validator, GreaterThanValidator) and \
                    schema.get("minimum", validator.limit_value) <= validator.limit_value:
                schema.update(minimum=validator.limit_value, exclusiveMinimum=True)
            elif isinstance(validator, LessThanValidator) and \
                    schema.get("maximum", validator.limit_value) >= validator.limit_value:
                schema.update(maximum=validator.limit_value, exclusiveMaximum=True)
            elif isinstance(validator, ProhibitNullCharactersValidator):
                _no_nul(schema)

    def error_statuses(self, operation: dict[str, Any]) -> list[int]:
        """The error codes this operation can answer (the rules of the module doc)."""
        params = operation.get("parameters", [])
        has_body = "requestBody" in operation
        codes = {401, 403, 503}
        if has_body or any(p["in"] in ("query", "path") for p in params):
            codes.add(400)
        if any(p["in"] == "path" for p in params) or (
                self.method == "GET" and self._is_list_view() and self._get_paginator()):
            codes.add(404)
        if self._model_action() in _ATOMIC_WRITES or has_body:
            codes.add(409)
        if self._guards_versions():
            codes.add(412)
        if has_body or self.method in _BODY:
            codes |= {413, 415}
        if self.view.get_throttles():
            codes.add(429)
        return sorted(codes)

    def _register_components(self) -> None:
        for name, schema in (("Error", _ERROR), ("ValidationError", _VALIDATION_ERROR)):
            self.registry.register_on_missing(ResolvedComponent(
                name=name, type=ResolvedComponent.SCHEMA, schema=schema, object=name))
        for name, description, body, headers in ERROR_RESPONSES.values():
            response: dict[str, Any] = {
                "description": description,
                "content": {"application/json": {
                    "schema": {"$ref": f"#/components/schemas/{body}"}}},
            }
            if headers:
                response["headers"] = headers
            self.registry.register_on_missing(ResolvedComponent(
                name=name, type=ResolvedComponent.RESPONSE, schema=response, object=name))

    def get_operation(self, path: str, path_regex: str, path_prefix: str, method: str,
                      registry: Any) -> dict[str, Any] | None:
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None:
            return None
        self._register_components()
        for parameter in operation.get("parameters", []):
            if parameter["in"] == "path" and parameter["schema"].get("type") == "integer":
                parameter["schema"].update(minimum=1, maximum=MAX_ID)
            if parameter["in"] == "query":  # django-filter's form fields refuse NUL too
                _no_nul(parameter["schema"].get("items", parameter["schema"]))
        responses = operation["responses"]
        if self._model_action() in _VERSIONED:
            for code, response in responses.items():
                if code in ("200", "201"):
                    response.setdefault("headers", {}).update(_ETAG)
        for code in self.error_statuses(operation):
            name = ERROR_RESPONSES[code][0]
            responses.setdefault(str(code), {"$ref": f"#/components/responses/{name}"})
        return operation


def error_response(description: str) -> OpenApiResponse:
    """An error answer an operation declares itself (``@extend_schema(responses={409:
    error_response("…")})``): the ``Error`` body, with what it means there."""
    return OpenApiResponse(response={"$ref": "#/components/schemas/Error"},
                           description=description)
