"""REST API of the jobs on the twin (``/api/jobs/``, ``/api/jobs/traces/``)."""
