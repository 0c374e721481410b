"""Every request under ``/api/`` checked against the published OpenAPI schema.

The schema (``/api/schema/``) is what clients and the frontend's types are
generated from; the API must be exactly as strict as it says, no more and no
less. DRF and django-filter are lax in ways the schema does not describe: an
unknown query parameter was ignored, ``?limit=1001`` silently capped, an empty
or malformed value (``?uuid=``, ``?over_budget=maybe``, ``?since=``) treated as
"no filter", and a body value of the wrong JSON type coerced (``"preset": 0``
saved as ``"0"``). This middleware reads the operation the request is for out
of the schema — generated once per process by drf-spectacular, the very
document the API serves — and answers **400** naming the parameter when:

* a query parameter is not one the operation documents (``format``, DRF's
  renderer switch, is always allowed);
* a query parameter's value is not what its schema allows: its type (an
  integer, ``true``/``false`` for a boolean), its range, its enum, its format
  (``uuid``, an RFC 3339 ``date-time``), a parameter given twice that is not an
  array, a required one missing;
* a JSON body has a value of the wrong JSON type for its field (a number where
  a string is documented, ``null`` where the field is not nullable, a list
  where an object is). Every other body constraint (bounds, lengths, enums,
  required fields) is the serializer's, which the schema is generated from, so
  its per-field messages (with units) stay what the client sees.

A request for a path the schema does not describe (the schema itself, the
docs, the telemetry ingest endpoints) is left alone, and so is a request
without credentials (unless ``TWIN_PUBLIC_READ`` opens reads to anyone):
authentication answers first (401), as for any other input.
New apps inherit this as they are: an endpoint is checked as soon as it is in
the schema.
"""
from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, JsonResponse
from django.utils.deprecation import MiddlewareMixin
from jsonschema import Draft4Validator, FormatChecker
from jsonschema.exceptions import ValidationError as SchemaError

from twin.core.api.middleware import API_PREFIX
from twin.core.api.schema import NO_NUL
from twin.core.nesting import loads
from twin.core.rfc3339 import parse_rfc3339

__all__ = ["ALWAYS_ALLOWED", "Operation", "StrictRequestMiddleware", "operations",
           "query_errors"]

#: Query parameters every endpoint takes: DRF's renderer switch (``?format=json``).
ALWAYS_ALLOWED = frozenset({"format"})

_INTEGER = re.compile(r"^-?[0-9]+$")
_NUMBER = re.compile(r"^-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$")


_FORMATS = FormatChecker(formats=())


@_FORMATS.checks("date-time")
def _is_date_time(value: object) -> bool:
    return not isinstance(value, str) or parse_rfc3339(value) is not None


@_FORMATS.checks("uuid")
def _is_uuid(value: object) -> bool:
    if not isinstance(value, str):
        return True
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return len(value) == 36 and all(value[i] == "-" for i in (8, 13, 18, 23))


def _openapi_to_json_schema(node: Any) -> Any:
    """OpenAPI 3.0's ``nullable`` said in JSON Schema (draft 4, whose boolean
    ``exclusiveMinimum`` the schema uses)."""
    if isinstance(node, list):
        return [_openapi_to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _openapi_to_json_schema(value) for key, value in node.items()
           if key not in ("nullable", "readOnly", "writeOnly", "example", "examples")}
    if node.get("nullable"):
        if isinstance(out.get("type"), str) and "enum" not in out:
            out["type"] = [out["type"], "null"]
        else:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


@dataclass
class Operation:
    """What the schema says about one operation's input."""

    query: dict[str, dict[str, Any]] = field(default_factory=dict)  # name → parameter
    body: Draft4Validator | None = None  # the JSON body's validator, if it takes one
    validators: dict[str, Draft4Validator] = field(default_factory=dict)


class _Index:
    def __init__(self, schema: dict[str, Any]) -> None:
        components = _openapi_to_json_schema(schema.get("components", {}))
        self.routes: list[tuple[re.Pattern[str], int, dict[str, Operation]]] = []
        for path, operations in schema["paths"].items():
            parts = re.split(r"(\{[^}]+\})", path)
            regex = "".join("[^/]+" if part.startswith("{") else re.escape(part)
                            for part in parts)
            by_method: dict[str, Operation] = {}
            for method, spec in operations.items():
                op = Operation()
                for parameter in spec.get("parameters", []):
                    if parameter.get("in") == "query":
                        op.query[parameter["name"]] = parameter
                        op.validators[parameter["name"]] = Draft4Validator(
                            {**_openapi_to_json_schema(parameter.get("schema", {})),
                             "components": components}, format_checker=_FORMATS)
                body = spec.get("requestBody", {}).get("content", {}).get("application/json")
                if body is not None:
                    op.body = Draft4Validator(
                        {**_openapi_to_json_schema(body.get("schema", {})),
                         "components": components}, format_checker=_FORMATS)
                by_method[method.upper()] = op
            self.routes.append((re.compile(f"^{regex}$"), path.count("{"), by_method))
        self.routes.sort(key=lambda route: route[1])  # literal segments win

    def find(self, path: str, method: str) -> Operation | None:
        for pattern, _, by_method in self.routes:
            if pattern.match(path):
                return by_method.get(method)
        return None


_index: _Index | None = None
_lock = threading.Lock()


def operations() -> _Index:
    """The operations of the schema the API serves, generated once per process."""
    global _index
    if _index is None:
        with _lock:
            if _index is None:
                from drf_spectacular.generators import SchemaGenerator

                _index = _Index(SchemaGenerator().get_schema(request=None, public=True))
    return _index


def _coerce(raw: str, schema: dict[str, Any]) -> tuple[Any, str | None]:
    """A query string value as the JSON value its schema's type means, or a message."""
    kind = schema.get("type")
    if kind == "integer":
        return (int(raw), None) if _INTEGER.fullmatch(raw) else (raw, "Enter a whole number.")
    if kind == "number":
        return (float(raw), None) if _NUMBER.fullmatch(raw) else (raw, "Enter a number.")
    if kind == "boolean":
        if raw in ("true", "false"):
            return raw == "true", None
        return raw, "Must be true or false."
    return raw, None


def _message(error: SchemaError) -> str:
    schema, value = error.schema, error.instance
    if not isinstance(schema, dict):
        return error.message
    if error.validator == "enum":
        return f"{str(value)[:40]!r} is not one of: {', '.join(map(str, schema['enum']))}."
    if error.validator == "minimum":
        strict = schema.get("exclusiveMinimum") is True
        return f"Ensure this value is greater than {'' if strict else 'or equal to '}" \
               f"{schema['minimum']}."
    if error.validator == "maximum":
        strict = schema.get("exclusiveMaximum") is True
        return f"Ensure this value is less than {'' if strict else 'or equal to '}" \
               f"{schema['maximum']}."
    if error.validator == "format":
        return {"uuid": "Enter a valid UUID.",
                "date-time": "Enter an RFC 3339 date-time with its offset, e.g. "
                             "2024-01-01T00:00:00Z."}.get(schema["format"], error.message)
    if error.validator == "pattern" and schema["pattern"] == NO_NUL:
        return "Null characters are not allowed."
    if error.validator == "minLength":
        return "This value may not be blank." if schema["minLength"] == 1 else \
            f"Ensure this value has at least {schema['minLength']} characters."
    if error.validator == "maxLength":
        return f"Ensure this value has at most {schema['maxLength']} characters."
    return error.message


def query_errors(request: HttpRequest, op: Operation) -> dict[str, list[str]]:
    """Per parameter, what is wrong with the request's query string (empty: nothing)."""
    errors: dict[str, list[str]] = {}
    for name in request.GET:
        if name not in op.query and name not in ALWAYS_ALLOWED:
            takes = ", ".join(sorted(op.query)) or "none"
            errors[name] = [f"Unknown query parameter; this endpoint takes: {takes}."]
    for name, parameter in op.query.items():
        schema = parameter.get("schema", {})
        values = request.GET.getlist(name)
        if not values:
            if parameter.get("required"):
                errors[name] = ["This query parameter is required."]
            continue
        if schema.get("type") == "array":
            if parameter.get("explode", True) is False:
                values = [item for value in values for item in value.split(",")]
            items = [_coerce(value, schema.get("items", {})) for value in values]
            value: Any = [item for item, _ in items]
            problems = [problem for _, problem in items if problem]
        else:
            if len(values) > 1:
                errors[name] = [f"Give {name} once."]
                continue
            value, problem = _coerce(values[0], schema)
            problems = [problem] if problem else []
        if problems:
            errors[name] = problems[:1]
            continue
        found = [_message(error) for error in op.validators[name].iter_errors(value)]
        if found:
            errors[name] = found[:1]
    return errors


def _path(error: SchemaError) -> str:
    text = ""
    for part in error.absolute_path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "non_field_errors"


_JSON_TYPES = {"string": "a string", "integer": "an integer", "number": "a number",
               "boolean": "true or false", "object": "an object", "array": "a list",
               "null": "null"}


def _type_errors(errors: Iterator[SchemaError]) -> dict[str, list[str]]:
    """The type mismatches among a body's schema errors (nested in ``anyOf`` too)."""
    found: dict[str, list[str]] = {}
    for error in errors:
        if error.validator == "type":
            wanted = error.validator_value
            wanted = wanted if isinstance(wanted, list) else [wanted]
            said = " or ".join(_JSON_TYPES.get(kind, kind) for kind in wanted)
            found.setdefault(_path(error), []).append(f"Must be {said}.")
        elif error.validator == "anyOf" and error.context and all(
                sub.validator == "type" or sub.validator == "anyOf" or
                sub.validator == "$ref" for sub in error.context):
            nested = _type_errors(iter(error.context))
            if nested and not any(sub.validator == "enum" for sub in error.context):
                found.setdefault(_path(error), []).append(
                    next(iter(nested.values()))[0])
    return found


class StrictRequestMiddleware(MiddlewareMixin):
    """400 per parameter (or body field) for input the schema does not allow (module
    doc). After ``AuthenticationMiddleware``: a request without credentials is left
    to the view's 401."""

    def process_view(self, request: HttpRequest, view_func: Any, view_args: Any,
                     view_kwargs: Any) -> JsonResponse | None:
        if not request.path.startswith(API_PREFIX):
            return None
        user = getattr(request, "user", None)
        public = settings.TWIN_PUBLIC_READ and request.method in ("GET", "HEAD", "OPTIONS")
        if not (public or request.META.get("HTTP_AUTHORIZATION")
                or (user and user.is_authenticated)):
            return None
        op = operations().find(request.path_info, request.method or "GET")
        if op is None:
            return None
        errors = query_errors(request, op)
        if not errors and op.body is not None and \
                request.content_type == "application/json":
            try:
                body = loads(request.body or b"null")
            except (RequestDataTooBig, ValueError):  # TooDeep is a ValueError
                return None  # the view answers 413, or its parser its own 400
            if body is not None or request.body:
                errors = _type_errors(op.body.iter_errors(body))
        if errors:
            return JsonResponse(errors, status=400)
        return None
