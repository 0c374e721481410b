"""``manage.py assign_role <username> <role>``: put a user in one of the roles of
``twin.core.roles`` (viewer, operator, hardware admin).

``--list`` prints each role's permissions; ``--remove`` takes the role away;
``--only`` leaves the user in that role alone (out of the other two); ``--staff``
also opens the admin site to the user (Django's ``is_staff``). The groups are made
by ``migrate``; this command makes them too if they are missing.
"""
from __future__ import annotations

from typing import Any

from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from twin.core.roles import ROLES, grant_roles

__all__ = ["Command"]


class Command(BaseCommand):
    help = "Give a user one of the roles viewer, operator or hardware admin (or --list them)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username", nargs="?")
        parser.add_argument("role", nargs="?", choices=ROLES,
                            help="One of: " + ", ".join(f"'{r}'" for r in ROLES))
        parser.add_argument("--list", action="store_true", help="Print the roles' permissions.")
        parser.add_argument("--remove", action="store_true", help="Take the role away.")
        parser.add_argument("--only", action="store_true",
                            help="Take the user out of the other roles.")
        parser.add_argument("--staff", action="store_true",
                            help="Also let the user into the admin site (is_staff).")

    def handle(self, *args: Any, **options: Any) -> None:
        with transaction.atomic():
            for app_config in apps.get_app_configs():
                grant_roles(app_config)
        if options["list"]:
            for role in ROLES:
                perms = Group.objects.get(name=role).permissions.select_related("content_type")
                names = sorted(f"{p.content_type.app_label}.{p.codename}" for p in perms)
                self.stdout.write(f"{role} ({len(names)}): {' '.join(names)}")
            return
        username, role = options["username"], options["role"]
        if not username or not role:
            raise CommandError("give a username and a role (or --list)")
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r}; create it first (manage.py "
                               f"createsuperuser, or the admin's Users page)")
        with transaction.atomic():
            group = Group.objects.get(name=role)
            if options["remove"]:
                user.groups.remove(group)
            else:
                user.groups.add(group)
            if options["only"]:
                user.groups.remove(*Group.objects.filter(name__in=ROLES).exclude(pk=group.pk))
            if options["staff"]:
                user.is_staff = True
                user.save(update_fields=["is_staff"])
        roles = sorted(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
        self.stdout.write(f"{username}: {', '.join(roles) or 'no role'}"
                          f"{' (admin site)' if user.is_staff else ''}")
