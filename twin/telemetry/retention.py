"""Retention: how long the 1-minute history and closed alerts are kept."""
from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

__all__ = ["cleanup"]


def cleanup() -> dict[str, int]:
    """Delete 1-minute history (the telemetry's and the plant's, ``PlantMinute``) past
    ``TELEMETRY_RETENTION_DAYS`` and closed alerts past ``TELEMETRY_ALERT_RETENTION_DAYS``."""
    from twin.facility.models import PlantMinute
    from twin.telemetry.models import Alert, TelemetryMinute

    now = timezone.now()
    keep = dt.timedelta(days=float(getattr(settings, "TELEMETRY_RETENTION_DAYS", 7)))
    keep_alerts = dt.timedelta(days=float(getattr(settings, "TELEMETRY_ALERT_RETENTION_DAYS",
                                                  90)))
    minutes, _ = TelemetryMinute.objects.filter(minute__lt=now - keep).delete()
    plant, _ = PlantMinute.objects.filter(minute__lt=now - keep).delete()
    alerts, _ = Alert.objects.filter(Q(ended__lt=now - keep_alerts)).delete()
    return {"minutes": minutes, "plant_minutes": plant, "alerts": alerts}
