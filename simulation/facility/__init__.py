"""The physical twin: the plant as data (power chain, cooling chain, racks) and the
models that read it. See :mod:`simulation.facility.plant`."""

__all__: list[str] = []
