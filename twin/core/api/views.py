"""Cross-cutting API endpoints: the token exchange (schema and docs are drf-spectacular's
views, wired in ``twin.core.api.urls``)."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.parsers import FormParser, MultiPartParser

from twin.core.api.parsers import TwinJSONParser

__all__ = ["TokenSerializer", "TokenView"]


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="Send as `Authorization: Token <token>`.")


@extend_schema_view(
    post=extend_schema(request=AuthTokenSerializer, responses=TokenSerializer,
                       summary="Exchange a username and password for an API token"),
)
class TokenView(ObtainAuthToken):
    """``POST {username, password}`` → ``{token}`` for scripts (``Authorization: Token …``)."""

    # DRF's view names its own parsers; ours has the nesting limit.
    parser_classes = (FormParser, MultiPartParser, TwinJSONParser)
