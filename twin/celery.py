"""The Celery application: simulations, cluster builds and telemetry run here.

Late acks plus ``reject_on_worker_lost`` mean a task whose worker dies is not
silently lost; each task records its own failure so nothing stays ``running``.
"""
import os

from celery import Celery

__all__ = ["app"]

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.settings")

app = Celery("twin")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
