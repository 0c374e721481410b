"""``manage.py ensure_admin``: the demo's admin account, the same on every run.

The password lives in a file (``var/admin-password`` for the demo, mode 600):
made once with a random value, then reused, so running the demo again neither
locks the user out nor prints a password that no longer works. The account is
(re)made a superuser with that password, and given an API token for curl.
"""
from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from rest_framework.authtoken.models import Token

__all__ = ["Command"]


def read_or_create_password(path: Path) -> str:
    """The password stored at ``path``; a new random one written there if none is."""
    if path.exists():
        password = path.read_text(encoding="utf-8").strip()
        if password:
            return password
    path.parent.mkdir(parents=True, exist_ok=True)
    password = secrets.token_urlsafe(12)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(password + "\n")
    return password


class Command(BaseCommand):
    help = (
        "Create or update a superuser whose password is kept in a file (generated on first "
        "use), give it an API token, and print username, password and token."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin")
        parser.add_argument("--email", default="admin@localhost")
        parser.add_argument(
            "--password-file",
            required=True,
            type=Path,
            help="Where the password is kept; created with a random password if missing.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        username: str = options["username"].strip()
        if not username:
            raise CommandError("--username must not be empty")
        password_file: Path = options["password_file"]
        try:
            password = read_or_create_password(password_file)
        except OSError as exc:
            raise CommandError(f"cannot read or write {password_file}: {exc}") from exc

        user_model = get_user_model()
        with transaction.atomic():
            user, created = user_model.objects.get_or_create(
                username=username, defaults={"email": options["email"]}
            )
            user.is_staff = True
            user.is_superuser = True
            user.is_active = True
            if created or not user.check_password(password):
                user.set_password(password)
            user.save()
            token, _ = Token.objects.get_or_create(user=user)

        self.stdout.write(f"username: {username}")
        self.stdout.write(f"password: {password}")
        self.stdout.write(f"token:    {token.key}")
        self.stdout.write(f"(password kept in {password_file})")
