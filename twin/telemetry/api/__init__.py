"""REST API of telemetry under ``/api/telemetry/`` (namespace ``telemetry``): the
ingestion endpoints agents post to (``ingest_views``) and the API people and
dashboards read (``views``)."""
