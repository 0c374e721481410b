"""The physical twin: the plant as data (power chain, cooling chain, racks) and the
models that read it — :mod:`~simulation.facility.validate`,
:mod:`~simulation.facility.power_chain`, :mod:`~simulation.facility.thermal`,
:mod:`~simulation.facility.model` (PUE), :mod:`~simulation.facility.capping` and
:mod:`~simulation.facility.whatif`. See docs/facility.md."""

__all__: list[str] = []
