#!/usr/bin/env python
"""Django's command-line entry point for Supercluster Twin.

A configuration error (``ImproperlyConfigured``: no ``TWIN_SECRET_KEY``, a bad
``TWIN_METRICS_ALLOW``, …) is one readable line on stderr and exit status 2,
not a traceback: the message already says what to set.
"""
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        message = " ".join(str(exc).split())
        sys.stderr.write(f"error: {message}\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
