#!/usr/bin/env python
"""Django's command-line entry point for Supercluster Twin.

A configuration error (``ImproperlyConfigured``: no ``TWIN_SECRET_KEY``, a bad
``TWIN_METRICS_ALLOW``, …) is one readable line on stderr and exit status 2,
not a traceback: the message already says what to set.

With ``REDIS_URL`` unset, a command that may need a broker gets the embedded Redis
(started if nobody runs it, and stopped at exit if this command started it);
``migrate``, ``check``, ``makemigrations`` and the like start nothing
(``twin.embedded.embedded_redis_for_command``).
"""
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    from twin.embedded import embedded_redis_for_command

    embedded_redis_for_command(sys.argv)
    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        message = " ".join(str(exc).split())
        sys.stderr.write(f"error: {message}\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
