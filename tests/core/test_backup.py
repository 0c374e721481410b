"""Backup → restore round trip (``manage.py backup`` / ``restore``, twin.core.backup):
inventory, runs, jobs, alerts and audit trails restored into an empty database
compare equal, table by table and row by row, and so do the Redis keys that hold
accepted writes (the ingest stream, an agent's sequence, a queued task)."""
from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
import redis
from django.conf import settings
from django.contrib.admin.models import ADDITION, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone

from tests.conftest import _worker_env
from tests.faults.redis_server import RedisServer
from twin.core.backup import redis_patterns

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]


def _dsn(name: str) -> str:
    db = connection.settings_dict
    return psycopg.conninfo.make_conninfo(
        host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432, user=db["USER"] or None,
        password=db["PASSWORD"] or None, dbname=name)


def _rows(dsn: str) -> dict[str, list[tuple]]:
    """Every table's rows (ordered) and every sequence's position."""
    out: dict[str, list[tuple]] = {}
    with psycopg.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        for (table,) in cur.fetchall():
            cur.execute(f'SELECT * FROM "{table}" ORDER BY 1')
            out[table] = cur.fetchall()
        cur.execute("SELECT sequencename, last_value FROM pg_sequences "
                    "WHERE schemaname = 'public'")
        out["<sequences>"] = sorted(cur.fetchall())
    return out


def _redis_state(client: redis.Redis) -> dict[bytes, object]:
    state: dict[bytes, object] = {}
    for pattern in redis_patterns():
        for key in client.scan_iter(match=pattern):
            kind = client.type(key)
            state[key] = {b"stream": lambda k: client.xrange(k),
                          b"list": lambda k: client.lrange(k, 0, -1),
                          b"hash": lambda k: client.hgetall(k),
                          b"set": lambda k: client.smembers(k),
                          b"zset": lambda k: client.zrange(k, 0, -1, withscores=True),
                          b"string": lambda k: client.get(k)}[kind](key)
    return state


@pytest.fixture
def populated(tiny_cluster, admin_user):
    """A bit of everything a team would miss: inventory (the tiny cluster), a job,
    a scenario run, an open alert, a remediation (self-healing's audit trail), an
    admin log entry, and accepted telemetry still in Redis."""
    from twin.jobs.choices import JobStateChoices
    from twin.jobs.models import Job, Remediation
    from twin.scenarios.models import ScenarioRun
    from twin.telemetry.models import Alert

    cluster, card = tiny_cluster["cluster"], tiny_cluster["cards"][0]
    job = Job.objects.create(cluster=cluster, name="train-7b", tenant="team-a", cards=1,
                             share_milli=1000, state=JobStateChoices.RUNNING)
    ScenarioRun.objects.create(kind="topology", cluster=cluster, params={"x": 1},
                               created_by=admin_user)
    Alert.objects.create(cluster=cluster, card=card, rule=Alert._meta.get_field("rule")
                         .choices[0][0], severity="critical", level="card",
                         subject=f"card:{card.pk}", message="hot", started=timezone.now())
    remediation = Remediation.objects.create(
        cluster=cluster, card=card, cause=Remediation._meta.get_field("cause").choices[0][0],
        episode=1, detected_at=timezone.now(), message="card lost")
    remediation.jobs.add(job)
    LogEntry.objects.create(user=admin_user, content_type=ContentType.objects.get_for_model(job),
                            object_id=str(job.pk), object_repr=str(job), action_flag=ADDITION)
    client = redis.Redis.from_url(settings.REDIS_URL)
    prefix = settings.TELEMETRY_REDIS_PREFIX
    keys = [f"{prefix}:ingest", f"{prefix}:agent:424242:seq", settings.CELERY_TASK_DEFAULT_QUEUE]
    client.delete(*keys)
    client.xadd(keys[0], {"batch": b"\x00\x01accepted", "cluster": str(cluster.pk)})
    client.set(keys[1], 17)
    client.lpush(keys[2], b'{"body": "a queued scenario run"}')
    yield keys
    client.delete(*keys)


def test_backup_and_restore_into_an_empty_database_compare_equal(populated, tmp_path):
    target_db = f"{connection.settings_dict['NAME']}_restored_{uuid.uuid4().hex[:6]}"
    backup_dir = tmp_path / "backup"
    call_command("backup", str(backup_dir))
    assert {p.name for p in backup_dir.iterdir()} == {"manifest.json", "database.pgdump",
                                                      "redis.msgpack"}
    private = RedisServer(tmp_path / "redis")
    private.start()
    admin = psycopg.connect(_dsn("postgres"), autocommit=True)
    admin.execute(f'CREATE DATABASE "{target_db}"')
    try:
        env = _worker_env(dict(connection.settings_dict))
        env["DATABASE_URL"] = env["DATABASE_URL"].rsplit("/", 1)[0] + f"/{target_db}"
        env["REDIS_URL"] = private.url
        done = subprocess.run([sys.executable, "manage.py", "restore", str(backup_dir)],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("restored ")

        source, restored = _rows(_dsn(connection.settings_dict["NAME"])), _rows(_dsn(target_db))
        assert set(restored) == set(source)
        for name in ("hardware_card", "jobs_job", "scenarios_scenariorun", "telemetry_alert",
                     "jobs_remediation", "jobs_remediation_jobs", "django_admin_log"):
            assert source[name], f"{name} was meant to hold rows"
        for name in sorted(source):
            assert restored[name] == source[name], name

        theirs = _redis_state(redis.Redis(port=private.port))
        ours = _redis_state(redis.Redis.from_url(settings.REDIS_URL))
        assert set(populated) <= {k.decode() for k in theirs}
        assert theirs == ours
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{target_db}" WITH (FORCE)')
        admin.close()
        private.stop()


def test_restore_refuses_a_database_that_is_not_empty(populated, tmp_path):
    call_command("backup", str(tmp_path / "b"), "--no-redis")
    with pytest.raises(CommandError, match="is not empty"):
        call_command("restore", str(tmp_path / "b"))


def test_backup_refuses_a_directory_that_holds_files(db, tmp_path):
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "x").write_text("keep me")
    with pytest.raises(CommandError, match="not empty"):
        call_command("backup", str(tmp_path / "old"))
    assert (tmp_path / "old" / "x").read_text() == "keep me"
