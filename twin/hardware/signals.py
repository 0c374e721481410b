"""Signals the hardware app sends, so that apps above it act without hardware importing them.

``cluster_built(sender=Cluster, cluster=…, progress=…)`` is sent by
``twin.hardware.builder.build_cluster`` inside the build's transaction once every
row is written: a receiver that raises fails the whole build (nothing is kept).
``progress(fraction, message)`` reports within the build's last steps. The facility
app sizes the cluster's plant on it (``twin.facility.apps``).

``rack_draw_rising(sender=Rack, rack=…, added_w=…)`` is sent by the budget rule
(``Rack.check_added_draw``) when a write would add ``added_w`` W to a rack that stays
within its own budget: the elements above the rack (a PDU, a CDU, the feed) must keep
their ratings too. A receiver returns a list of refusal messages ([] when the write
fits); the write is refused with the first, on the same field and under the same
``allow over budget`` override as the rack's own budget. The facility app checks its
power and cooling chains on it.
"""
from django.dispatch import Signal

__all__ = ["cluster_built", "plant_pue", "rack_draw_rising"]

cluster_built = Signal()
rack_draw_rising = Signal()
#: ``plant_pue(sender=Cluster, cluster_id=…)``: a receiver returns the PUE its plant model
#: computes from the components at the racks' nameplate draw, or None (no plant built);
#: the cluster summary publishes it (``pue_source: "plant"``). The facility app answers.
plant_pue = Signal()
