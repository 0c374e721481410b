"""Scenario runs: simulations of the cluster model, run by Celery workers.

A :class:`~twin.scenarios.models.ScenarioRun` records one request (kind,
parameters, cluster), its progress and its result. Kinds are pluggable
(:mod:`twin.scenarios.kinds`); the Django model reaches the pure
``simulation`` library only through the plain dataclasses built by
:mod:`twin.scenarios.inputs`. See README.md, "Scenario runs".
"""
