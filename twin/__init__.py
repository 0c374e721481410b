"""Supercluster Twin: the Django project.

Importing the Celery app here makes ``@shared_task`` bind to it in every process.
"""
from twin.celery import app as celery_app

__all__ = ["celery_app"]
