"""Signals the hardware app sends, so that apps above it act without hardware importing them.

``cluster_built(sender=Cluster, cluster=…, progress=…)`` is sent by
``twin.hardware.builder.build_cluster`` inside the build's transaction once every
row is written: a receiver that raises fails the whole build (nothing is kept).
``progress(fraction, message)`` reports within the build's last steps. The facility
app sizes the cluster's plant on it (``twin.facility.apps``).
"""
from django.dispatch import Signal

__all__ = ["cluster_built"]

cluster_built = Signal()
