"""A reusable API test suite (after NetBox's ``utilities/testing/api.py``).

A model's test class declares its data — an object to read/update/delete,
a valid create body, an update body, filter cases — and inherits the same
tests every endpoint must pass: list, get, create, full and partial update,
delete; anonymous refused with 401 and no write; a logged-in reader without
permissions refused with 403 and no write; reads opened by
``TWIN_PUBLIC_READ`` but writes still closed; a session-authenticated
operator holding only the model permissions allowed to write; a user granted
another cluster only finds the object missing (404) unless the endpoint is shared.
"""
from __future__ import annotations

import json
import math
from typing import Any, ClassVar

from django.db import models
from django.test import override_settings
from django.urls import reverse
from rest_framework.test import APIClient

__all__ = ["APIViewTests"]


def _same(sent: Any, got: Any) -> bool:
    if isinstance(sent, float) or isinstance(got, float):
        return math.isclose(float(sent), float(got), rel_tol=1e-9)
    return str(sent) == str(got) if not isinstance(sent, (list, dict)) else sent == got


class APIViewTests:
    """Mixin of API tests; subclasses set ``basename``/``model`` and the data hooks.

    ``tiny_cluster`` (tests/conftest.py) is the world every hook receives.
    """

    basename: ClassVar[str]
    model: ClassVar[type[models.Model]]
    cursor_paginated: ClassVar[bool] = False
    # Fields a response must carry beyond the ones sent in create_data.
    expected_fields: ClassVar[tuple[str, ...]] = ("id", "url", "display")

    # --- hooks -------------------------------------------------------------
    def existing(self, world: dict[str, Any]) -> models.Model:
        """An object the tests read, update and delete."""
        raise NotImplementedError

    def create_data(self, world: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def update_data(self, world: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def filter_cases(self, world: dict[str, Any]) -> list[tuple[dict[str, Any], set[int]]]:
        """``(query parameters, ids expected among the results)``; exact match."""
        return []

    def delete_query(self, world: dict[str, Any]) -> str:
        """The query string that confirms deleting ``existing()`` with what it holds
        ("" when it holds nothing: then a plain DELETE must do)."""
        return ""

    # --- helpers -----------------------------------------------------------
    def list_url(self) -> str:
        return reverse(f"api:{self.basename}-list")

    def detail_url(self, pk: int) -> str:
        return reverse(f"api:{self.basename}-detail", args=[pk])

    def _ids(self, response: Any) -> set[int]:
        assert response.status_code == 200, response.content
        body = response.json()
        if self.cursor_paginated:
            assert "count" not in body and {"next", "previous"} <= set(body)
        else:
            assert "count" in body
        return {row["id"] for row in body["results"]}

    def _assert_matches(self, body: dict[str, Any], sent: dict[str, Any]) -> None:
        for field, value in sent.items():
            assert _same(value, body[field]), (field, value, body[field])
        for field in self.expected_fields:
            assert field in body

    def _assert_db_matches(self, obj: models.Model, sent: dict[str, Any]) -> None:
        obj.refresh_from_db()
        for field, value in sent.items():
            attname = self.model._meta.get_field(field).attname
            assert _same(value, getattr(obj, attname)), (field, value, getattr(obj, attname))

    # --- reads -------------------------------------------------------------
    def test_list(self, reader_client: APIClient, tiny_cluster: dict[str, Any]) -> None:
        obj = self.existing(tiny_cluster)
        assert obj.pk in self._ids(reader_client.get(self.list_url(), {"limit": 1000}))

    def test_get(self, reader_client: APIClient, tiny_cluster: dict[str, Any]) -> None:
        obj = self.existing(tiny_cluster)
        response = reader_client.get(self.detail_url(obj.pk))
        assert response.status_code == 200, response.content
        body = response.json()
        assert body["id"] == obj.pk
        assert body["display"] == str(obj)
        assert body["url"].endswith(self.detail_url(obj.pk))

    def test_get_missing_is_404(self, reader_client: APIClient,
                                tiny_cluster: dict[str, Any]) -> None:
        assert reader_client.get(self.detail_url(987654321)).status_code == 404

    def test_anonymous_read_refused(self, anon_client: APIClient,
                                    tiny_cluster: dict[str, Any]) -> None:
        obj = self.existing(tiny_cluster)
        for url in (self.list_url(), self.detail_url(obj.pk)):
            response = anon_client.get(url)
            assert response.status_code == 401
            assert response["WWW-Authenticate"] == "Token"

    def test_public_read_opens_reads_not_writes(self, anon_client: APIClient,
                                                tiny_cluster: dict[str, Any]) -> None:
        obj = self.existing(tiny_cluster)
        data = self.create_data(tiny_cluster)
        before = self.model.objects.count()
        with override_settings(TWIN_PUBLIC_READ=True):
            assert obj.pk in self._ids(anon_client.get(self.list_url(), {"limit": 1000}))
            assert anon_client.get(self.detail_url(obj.pk)).status_code == 200
            assert anon_client.post(self.list_url(), data, format="json").status_code == 401
            assert anon_client.delete(self.detail_url(obj.pk)).status_code == 401
        assert self.model.objects.count() == before

    def test_filters(self, reader_client: APIClient, tiny_cluster: dict[str, Any]) -> None:
        for params, expected in self.filter_cases(tiny_cluster):
            got = self._ids(reader_client.get(self.list_url(), {**params, "limit": 1000}))
            assert got == expected, params

    # --- writes ------------------------------------------------------------
    def test_create(self, admin_client_api: APIClient, tiny_cluster: dict[str, Any]) -> None:
        data = self.create_data(tiny_cluster)
        before = self.model.objects.count()
        response = admin_client_api.post(self.list_url(), data, format="json")
        assert response.status_code == 201, response.content
        body = response.json()
        self._assert_matches(body, data)
        assert self.model.objects.count() == before + 1
        self._assert_db_matches(self.model.objects.get(pk=body["id"]), data)

    def test_create_refused_for_anonymous(self, anon_client: APIClient,
                                          tiny_cluster: dict[str, Any]) -> None:
        data = self.create_data(tiny_cluster)
        before = self.model.objects.count()
        response = anon_client.post(self.list_url(), data, format="json")
        assert response.status_code == 401
        assert self.model.objects.count() == before

    def test_create_refused_without_permission(self, reader_client: APIClient,
                                               tiny_cluster: dict[str, Any]) -> None:
        data = self.create_data(tiny_cluster)
        before = self.model.objects.count()
        response = reader_client.post(self.list_url(), data, format="json")
        assert response.status_code == 403
        assert self.model.objects.count() == before

    def test_create_with_model_permission_over_session(
            self, staff_client: APIClient, tiny_cluster: dict[str, Any]) -> None:
        data = self.create_data(tiny_cluster)
        response = staff_client.post(self.list_url(), data, format="json")
        assert response.status_code == 201, response.content

    def test_partial_update(self, admin_client_api: APIClient,
                            tiny_cluster: dict[str, Any]) -> None:
        obj = self.existing(tiny_cluster)
        data = self.update_data(tiny_cluster)
        response = admin_client_api.patch(self.detail_url(obj.pk), data, format="json")
        assert response.status_code == 200, response.content
        self._assert_matches(response.json(), data)
        self._assert_db_matches(obj, data)

    def test_full_update(self, admin_client_api: APIClient,
                         tiny_cluster: dict[str, Any]) -> None:
        """PUT of every writable field, as read, with the update applied."""
        obj = self.existing(tiny_cluster)
        current = admin_client_api.get(self.detail_url(obj.pk)).json()
        serializer = admin_client_api.options(self.detail_url(obj.pk)).json()
        writable = {name for name, meta in serializer["actions"]["PUT"].items()
                    if not meta.get("read_only")}
        body = {name: current[name] for name in writable} | self.update_data(tiny_cluster)
        response = admin_client_api.put(self.detail_url(obj.pk), body, format="json")
        assert response.status_code == 200, response.content
        self._assert_db_matches(obj, self.update_data(tiny_cluster))

    def test_update_refused_without_permission(self, reader_client: APIClient,
                                               tiny_cluster: dict[str, Any]) -> None:
        obj = self.existing(tiny_cluster)
        data = self.update_data(tiny_cluster)
        before = {f: getattr(obj, self.model._meta.get_field(f).attname) for f in data}
        response = reader_client.patch(self.detail_url(obj.pk), data, format="json")
        assert response.status_code == 403
        self._assert_db_matches(obj, before)

    def test_update_refused_for_anonymous(self, anon_client: APIClient,
                                          tiny_cluster: dict[str, Any]) -> None:
        obj = self.existing(tiny_cluster)
        response = anon_client.patch(self.detail_url(obj.pk), self.update_data(tiny_cluster),
                                     format="json")
        assert response.status_code == 401

    def test_delete(self, admin_client_api: APIClient, tiny_cluster: dict[str, Any]) -> None:
        obj = self.existing(tiny_cluster)
        response = admin_client_api.delete(self.detail_url(obj.pk),
                                           QUERY_STRING=self.delete_query(tiny_cluster))
        assert response.status_code == 204, response.content
        assert not self.model.objects.filter(pk=obj.pk).exists()

    def test_delete_of_what_holds_others_needs_cascade(
            self, admin_client_api: APIClient, tiny_cluster: dict[str, Any]) -> None:
        """The deletion rule (``twin.core.deletion``): 409 with what is inside."""
        obj = self.existing(tiny_cluster)
        if not self.delete_query(tiny_cluster):
            return
        response = admin_client_api.delete(self.detail_url(obj.pk))
        assert response.status_code == 409, response.content
        assert response.json()["contains"]
        assert self.model.objects.filter(pk=obj.pk).exists()

    def test_delete_refused_without_permission(self, reader_client: APIClient,
                                               tiny_cluster: dict[str, Any]) -> None:
        obj = self.existing(tiny_cluster)
        assert reader_client.delete(self.detail_url(obj.pk)).status_code == 403
        assert self.model.objects.filter(pk=obj.pk).exists()

    def test_malformed_json_is_400_and_writes_nothing(
            self, admin_client_api: APIClient, tiny_cluster: dict[str, Any]) -> None:
        before = self.model.objects.count()
        response = admin_client_api.post(self.list_url(), '{"name": "x",',
                                         content_type="application/json")
        assert response.status_code == 400
        assert "JSON parse error" in json.dumps(response.json())
        assert self.model.objects.count() == before

    def test_if_match_guards_against_lost_updates(self, admin_client_api: APIClient,
                                                  tiny_cluster: dict[str, Any]) -> None:
        """A write with a stale ``If-Match`` is 412 and changes nothing; a fresh one works."""
        obj = self.existing(tiny_cluster)
        etag = admin_client_api.get(self.detail_url(obj.pk))["ETag"]
        assert etag.startswith('"')
        data = self.update_data(tiny_cluster)
        # Someone else saves the object meanwhile (a new last_updated stamp).
        self.model.objects.get(pk=obj.pk).save()
        stale = admin_client_api.patch(self.detail_url(obj.pk), data, format="json",
                                       HTTP_IF_MATCH=etag)
        assert stale.status_code == 412, stale.content
        assert admin_client_api.delete(self.detail_url(obj.pk), HTTP_IF_MATCH=etag) \
            .status_code == 412
        assert self.model.objects.filter(pk=obj.pk).exists()
        fresh = admin_client_api.get(self.detail_url(obj.pk))["ETag"]
        assert fresh != etag
        response = admin_client_api.patch(self.detail_url(obj.pk), data, format="json",
                                          HTTP_IF_MATCH=fresh)
        assert response.status_code == 200, response.content
        assert response["ETag"] != fresh  # the write made a new version
        self._assert_db_matches(obj, data)

    # --- per-cluster access (docs/access.md) -------------------------------
    def test_a_user_granted_another_cluster_only(self, tiny_cluster: dict[str, Any]) -> None:
        """Granted another cluster only (with every permission of the model), a user
        finds this cluster's object missing: left out of the list, 404 to read, update
        and delete. An endpoint whose viewset declares no ``cluster_field`` (the
        catalogue) is shared: its object stays visible."""
        from django.contrib.auth.models import Permission, User
        from django.urls import resolve

        from twin.hardware.models import Cluster, ClusterGrant

        obj = self.existing(tiny_cluster)
        user = User.objects.create_user("elsewhere", "e@example.com", "elsewhere-pass-123")
        user.user_permissions.set(Permission.objects.filter(
            content_type__app_label=self.model._meta.app_label))
        ClusterGrant.objects.create(user=user, cluster=Cluster.objects.create(name="elsewhere"),
                                    level="change")
        client = APIClient()
        client.force_authenticate(User.objects.get(pk=user.pk))
        listed = obj.pk in self._ids(client.get(self.list_url(), {"limit": 1000}))
        read = client.get(self.detail_url(obj.pk)).status_code
        if resolve(self.list_url()).func.cls.cluster_field is None:
            assert listed and read == 200
            return
        assert not listed and read == 404
        data = self.update_data(tiny_cluster)
        assert client.patch(self.detail_url(obj.pk), data, format="json").status_code == 404
        query = self.delete_query(tiny_cluster)
        url = self.detail_url(obj.pk) + (f"?{query}" if query else "")
        assert client.delete(url).status_code == 404
        assert self.model.objects.filter(pk=obj.pk).exists()
