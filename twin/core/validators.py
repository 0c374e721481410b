"""Names are printable text (issue 22, item 4).

Clusters were created with names like ``"\\x03Ið¶Bä"``: a control character
shows as nothing (or garbles a terminal, a log line, a CSV export) and makes
two different names look the same. Every name a user gives (a cluster, a rack,
an agent, a job, …) carries :data:`printable`: the model's ``full_clean()`` runs
it (the admin's forms and the API's ``ValidatedModelSerializer`` too), the schema
shows its ``pattern`` (drf-spectacular reads a ``RegexValidator``), and
:func:`printable_constraint` repeats it in the database for writes that skip
validation. Any letter, digit, symbol or space of any script is fine; what is
refused are the control characters (C0, DEL, C1) and the Unicode line and
paragraph separators.
"""
from __future__ import annotations

import re
from typing import Any

from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q

__all__ = ["CONTROL_CHARACTERS", "PRINTABLE_PATTERN", "printable", "printable_constraint",
           "repair_names"]

CONTROL_CHARACTERS = "\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029"
"""The refused characters, as a regular-expression class body (Python, ECMA, PostgreSQL)."""
PRINTABLE_PATTERN = f"^[^{CONTROL_CHARACTERS}]+$"

printable = RegexValidator(
    PRINTABLE_PATTERN,
    message="Use printable text: control characters (such as \\x03 or a line break) are "
            "not allowed.",
    code="not_printable",
)


def printable_constraint(field: str, name: str) -> models.CheckConstraint:
    """The database's copy of :data:`printable` for ``field``."""
    return models.CheckConstraint(condition=~Q(**{f"{field}__regex": f"[{CONTROL_CHARACTERS}]"}),
                                  name=name)


_CONTROL = re.compile(f"[{CONTROL_CHARACTERS}]")


def repair_names(apps: Any, schema_editor: Any, fields: list[tuple[str, str, str]]) -> None:
    """Before a migration adds :func:`printable_constraint`: rewrite every stored value
    of ``(app_label, model, field)`` that holds a control character, each such character
    as its visible escape (``\\x03`` → the four characters ``\\x03``), so distinct names
    stay distinct and nothing is lost."""
    alias = schema_editor.connection.alias
    for app_label, model_name, field in fields:
        model = apps.get_model(app_label, model_name)
        limit = model._meta.get_field(field).max_length
        for row in model.objects.using(alias).filter(
                **{f"{field}__regex": f"[{CONTROL_CHARACTERS}]"}).only("pk", field):
            value = _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode(),
                                 getattr(row, field))
            model.objects.using(alias).filter(pk=row.pk).update(**{field: value[:limit]})
