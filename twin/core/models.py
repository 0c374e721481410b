"""Base model tiers shared by every app (after NetBox's ``netbox/models``).

Created/updated stamps come from one mixin instead of each model; ``save()``
does not call ``full_clean()`` (bulk builders write millions of rows), so the
admin and the API call it explicitly.
"""
from django.db import models

__all__ = ["TimestampedModel"]


class TimestampedModel(models.Model):
    created = models.DateTimeField(auto_now_add=True, null=True)
    last_updated = models.DateTimeField(auto_now=True, null=True)

    class Meta:
        abstract = True
