"""Cross-cutting API endpoints: the token exchange (schema and docs are drf-spectacular's
views, wired in ``twin.core.api.urls``)."""
from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.exceptions import AuthenticationFailed, ValidationError
from rest_framework.parsers import FormParser, MultiPartParser

from twin.core.api.parsers import TwinJSONParser
from twin.core.throttling import LoginRateThrottle, LoginThrottled

__all__ = ["ThrottledSerializer", "TokenSerializer", "TokenView"]


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="Send as `Authorization: Token <token>`.")


class ThrottledSerializer(serializers.Serializer):
    """The body of a 429 (the ``Retry-After`` header carries the same seconds)."""

    detail = serializers.CharField()
    retry_after = serializers.IntegerField(help_text="Seconds until the next attempt counts.")


@extend_schema_view(
    post=extend_schema(
        request=AuthTokenSerializer,
        responses={200: TokenSerializer,
                   429: OpenApiResponse(ThrottledSerializer, description=(
                       "Too many login attempts from this address (`TWIN_LOGIN_RATE`, shared "
                       "with /login/ and /admin/login/); `Retry-After` says when to retry."))},
        summary="Exchange a username and password for an API token"),
)
class TokenView(ObtainAuthToken):
    """``POST {username, password}`` → ``{token}`` for scripts (``Authorization: Token …``);
    attempts are rate-limited per address (``twin.core.throttling``)."""

    throttle_classes = [LoginRateThrottle]
    # DRF's view names its own parsers; ours has the nesting limit.
    parser_classes = (FormParser, MultiPartParser, TwinJSONParser)

    def throttled(self, request: Any, wait: float | None) -> None:
        raise LoginThrottled(wait)

    def post(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        """A well-formed request with a wrong username or password is 401 (with
        ``WWW-Authenticate``), as for a bad token: the credentials are refused, the
        request is not malformed (DRF's view answers 400). A malformed one stays 400."""
        try:
            return super().post(request, *args, **kwargs)
        except ValidationError as exc:
            codes = {getattr(message, "code", None) for messages in
                     (exc.detail.values() if isinstance(exc.detail, dict) else [exc.detail])
                     for message in (messages if isinstance(messages, list) else [messages])}
            if codes == {"authorization"}:
                raise AuthenticationFailed("Unable to log in with the username and password "
                                           "given.") from exc
            raise
