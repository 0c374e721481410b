"""Websockets with a named API token (``twin.core.tokens``): the token's scope applies
as over REST — its clusters followed, any other closed as unknown (4404) — by header
or ``?token=``; a revoked or expired one leaves the client anonymous (4401)."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from tests.live.conftest import session_headers
from tests.live.test_access import first_message
from twin.core import tokens
from twin.hardware.models import ApiToken, Cluster
from twin.live.protocol import CLOSE_NOT_FOUND, CLOSE_UNAUTHENTICATED
from twin.scenarios.models import ScenarioRun

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def owner(transactional_db) -> User:
    """A user without grant rows: every cluster (the token is what limits)."""
    tokens.clear_cache()
    return User.objects.create_user("script", "script@example.com", "script-pass-123")


def issue(user: User, *clusters: Cluster, see_only: bool = False,
          expires: timezone.datetime | None = None) -> tuple[ApiToken, str]:
    token = ApiToken(user=user, name="wall", limited=bool(clusters), see_only=see_only,
                     expires=expires)
    key = token.new_key()
    token.save()
    token.clusters.set(clusters)
    return token, key


def with_header(key: str) -> list[tuple[bytes, bytes]]:
    return session_headers(None) + [(b"authorization", f"Token {key}".encode())]


def is_hello(out: dict) -> bool:
    return out["type"] == "websocket.send" and '"hello"' in out["text"]


def test_a_scoped_token_follows_its_cluster_and_not_another(tiny_cluster, owner):
    mine = tiny_cluster["cluster"]
    other = Cluster.objects.create(name="other-tenant")
    _, key = issue(owner, mine, see_only=True)  # websockets only read: see-only follows
    assert is_hello(first_message(f"/ws/clusters/{mine.pk}/", with_header(key)))
    assert is_hello(first_message(f"/ws/clusters/{mine.pk}/?token={key}",
                                  session_headers(None)))
    for path in (f"/ws/clusters/{other.pk}/", f"/ws/clusters/{other.pk}/?token={key}"):
        headers = with_header(key) if "token=" not in path else session_headers(None)
        assert first_message(path, headers) == {"type": "websocket.close",
                                                "code": CLOSE_NOT_FOUND}
    # the same user's unscoped token follows both
    _, wide = issue(owner)
    assert is_hello(first_message(f"/ws/clusters/{other.pk}/", with_header(wide)))


def test_a_scoped_token_follows_only_its_clusters_runs(tiny_cluster, owner):
    other = Cluster.objects.create(name="other-tenant")
    theirs = ScenarioRun.objects.create(kind="topology", status="succeeded", cluster=other)
    mine = ScenarioRun.objects.create(kind="topology", status="succeeded",
                                      cluster=tiny_cluster["cluster"])
    _, key = issue(owner, tiny_cluster["cluster"])
    assert first_message(f"/ws/scenarios/{theirs.pk}/", with_header(key)) == {
        "type": "websocket.close", "code": CLOSE_NOT_FOUND}
    out = first_message(f"/ws/scenarios/{mine.pk}/", with_header(key))
    assert out["type"] == "websocket.send" and '"snapshot"' in out["text"]


def test_a_revoked_or_expired_token_is_anonymous(tiny_cluster, owner):
    cluster = tiny_cluster["cluster"]
    token, key = issue(owner, cluster)
    assert is_hello(first_message(f"/ws/clusters/{cluster.pk}/", with_header(key)))
    token.revoke()
    assert first_message(f"/ws/clusters/{cluster.pk}/", with_header(key)) == {
        "type": "websocket.close", "code": CLOSE_UNAUTHENTICATED}
    _, old = issue(owner, cluster, expires=timezone.now() - timedelta(seconds=1))
    assert first_message(f"/ws/clusters/{cluster.pk}/?token={old}", session_headers(None)) == {
        "type": "websocket.close", "code": CLOSE_UNAUTHENTICATED}
