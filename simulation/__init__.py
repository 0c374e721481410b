"""Pure simulation and planning library of the Supercluster Twin.

Nothing here imports Django: inputs are plain numbers and dataclasses built
from the model (or typed by hand), so every formula can be tested in
isolation and reused by workers, the API and notebooks alike.

Modules:
    power: rack packing by nameplate power (how many servers fit a 40 kW rack,
        how many racks a supernode needs).
"""

__all__: list[str] = []
