"""The ASGI server's database connections (twin/asgi.py, twin/settings.py DATABASES).

Under the million-card ingest load (benchmarks/live_million.py, 16 POSTs a
second) the web process ran PostgreSQL out of connections ("too many clients
already", answered 503): with persistent connections every request thread of the
ASGI server kept one. The ASGI entry point turns them off and gives each web process
a pool of at most TWIN_DB_POOL_MAX (8) instead; the workers keep theirs.
"""
from __future__ import annotations

import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _connections(db_name: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s "
                       "AND pid <> pg_backend_pid()", [db_name])
        return int(cursor.fetchone()[0])


@pytest.mark.skipif(connection.vendor != "postgresql",
                    reason="SQLite has no server connections to run out of")
def test_concurrent_requests_leave_no_connections_behind(telemetry_server):
    db_name = connection.settings_dict["NAME"]

    def get(_: int) -> int:
        with urllib.request.urlopen(f"{telemetry_server}/healthz/", timeout=30) as response:
            return response.status

    get(0)  # (the server up and its first connection made)
    before = _connections(db_name)
    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(get, range(200)))
    assert codes == [200] * 200
    # At most the process's pool (8, twin/asgi.py); persistent ones were ≈ 40.
    assert _connections(db_name) - before <= 8

