"""Roles out of the box: the groups "viewer", "operator" and "hardware admin".

Each role includes the one before it:

* **viewer** — ``view_*`` on every model of every twin app (what the admin needs to
  show a page; API reads need only a login, see ``twin.core.api.permissions``);
* **operator** — runs the twin: what each app lists under ``"operator"`` in its
  ``AppConfig.role_permissions`` (start and cancel scenario runs, build clusters
  from presets, acknowledge alerts, manage telemetry agents and scrape targets);
* **hardware admin** — edits the hardware: what each app lists under
  ``"hardware admin"`` (hardware: add, change and delete on every model).

The core knows the roles, each app what they may do with its own models, so no
app-specific name lives here. The groups are made after every ``migrate`` (a
``post_migrate`` handler, per app as its permissions appear) and the handler only
*adds* permissions: what an administrator adds to a group by hand stays.
``manage.py assign_role <user> <role>`` puts users in them.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.apps import AppConfig
from django.apps import apps as global_apps
from django.db import DEFAULT_DB_ALIAS

__all__ = [
    "ALL_MODELS",
    "HARDWARE_ADMIN",
    "OPERATOR",
    "ROLES",
    "VIEWER",
    "grant_roles",
    "role_codenames",
]

log = logging.getLogger(__name__)

VIEWER, OPERATOR, HARDWARE_ADMIN = "viewer", "operator", "hardware admin"
#: The roles, each including the ones before it.
ROLES = (VIEWER, OPERATOR, HARDWARE_ADMIN)
#: In ``role_permissions``: add, change and delete on every model of the app.
ALL_MODELS = "*"


def _twin_app(app_config: AppConfig) -> bool:
    return app_config.name.startswith("twin.")


def role_codenames(app_config: AppConfig, model_names: Iterable[str]) -> dict[str, set[str]]:
    """Role → permission codenames of ``app_config``'s models (``model_names``, lower
    case), each role with the ones before it."""
    models = sorted(model_names)
    declared: dict[str, Iterable[str]] = getattr(app_config, "role_permissions", {})
    unknown = set(declared) - set(ROLES)
    if unknown:
        raise ValueError(f"{app_config.name}.role_permissions: unknown roles {sorted(unknown)}; "
                         f"the roles are {', '.join(ROLES)}")
    granted = {f"view_{model}" for model in models}
    out: dict[str, set[str]] = {}
    for role in ROLES:
        for codename in declared.get(role, ()):
            if codename == ALL_MODELS:
                granted |= {f"{action}_{model}" for model in models
                            for action in ("add", "change", "delete")}
            else:
                granted.add(codename)
        out[role] = set(granted)
    return out


def grant_roles(sender: AppConfig, using: str = DEFAULT_DB_ALIAS, apps: Any = global_apps,
                **kwargs: Any) -> None:
    """``post_migrate`` receiver: make the groups, and give them what ``sender`` grants."""
    if not _twin_app(sender):
        return
    try:
        group_model = apps.get_model("auth", "Group")
        permission_model = apps.get_model("auth", "Permission")
    except LookupError:
        return
    try:
        app_models = [m._meta.model_name for m in apps.get_app_config(sender.label).get_models()]
    except LookupError:
        return
    wanted = role_codenames(sender, app_models)
    every = set().union(*wanted.values())
    found = dict(permission_model.objects.using(using).filter(
        content_type__app_label=sender.label, codename__in=every).values_list("codename", "pk"))
    missing = every - set(found)
    if missing:
        log.warning("roles: %s has no permissions %s (yet)", sender.label, sorted(missing))
    for role in ROLES:
        group, _ = group_model.objects.using(using).get_or_create(name=role)
        group.permissions.add(*(found[c] for c in wanted[role] if c in found))
