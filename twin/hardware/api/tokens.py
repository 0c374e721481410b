"""``/api/tokens/``: a user's named API tokens (``twin.core.tokens``).

* ``GET /api/tokens/`` lists the caller's own tokens (prefix, scope, dates, revoked),
  never a secret; ``GET /api/tokens/<id>/`` one of them. Another user's token is a
  404, as an id that does not exist — superusers included (the admin lists all).
* ``POST /api/tokens/`` ``{"name", "clusters"?, "see_only"?, "expires"?}`` creates one;
  the answer (201) carries ``token``, the secret, **this once**.
* ``POST /api/tokens/<id>/revoke/`` refuses it from then on (the row stays listed,
  ``revoked: true``); revoking a revoked token is a no-op (200).

A token never reaches beyond its creator: ``clusters`` offers only the clusters the
caller may see (another one reads as an id that does not exist), and a request made
with a token limited to some clusters may create only tokens limited to some of
those. A see-only token writes nothing (``TwinTokenAuthentication``: 403).
Any logged-in user may manage their own tokens (no model permission: a viewer's
token reads what the viewer reads).
"""
from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from twin.core.access import access_for
from twin.core.api.serializers import PlainPrimaryKeyRelatedField
from twin.core.tokens import scope_of
from twin.hardware.models import ApiToken, Cluster

__all__ = ["ApiTokenSerializer", "ApiTokenViewSet"]


class ApiTokenSerializer(serializers.ModelSerializer):
    clusters = PlainPrimaryKeyRelatedField(
        many=True, required=False, queryset=Cluster.objects.all(),
        help_text="Limit it to these of your clusters (ids); empty or absent: all of them.")
    token = serializers.SerializerMethodField(
        help_text="The secret: send `Authorization: Token <token>`. Only in the answer to "
                  "the create (it is not stored); null afterwards.")

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "token", "clusters", "see_only", "expires",
                  "created", "last_used", "revoked", "revoked_at"]
        read_only_fields = ["prefix", "created", "last_used", "revoked", "revoked_at"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        if request is not None:
            field = self.fields["clusters"].child_relation
            field.queryset = access_for(request.user, getattr(request, "_request", request)
                                        ).filter(Cluster.objects.all(), "pk")

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_token(self, obj: ApiToken) -> str | None:
        return getattr(obj, "secret", None)

    def validate_expires(self, value: Any) -> Any:
        if value is not None and value <= timezone.now():
            raise serializers.ValidationError("Must be in the future.")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        request = self.context["request"]
        mine = scope_of(request.user)
        if mine is not None and mine.clusters is not None and not attrs.get("clusters"):
            raise serializers.ValidationError({"clusters": [
                "This request's token is limited to some clusters: a token it creates "
                "must name some of them."]})
        return attrs

    def to_representation(self, instance: ApiToken) -> dict[str, Any]:
        data = super().to_representation(instance)
        if not instance.limited:
            data["clusters"] = []
        return data


class ApiTokenViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin,
                      mixins.CreateModelMixin, viewsets.GenericViewSet):
    """The caller's own named tokens: list, create (secret shown once), revoke."""

    serializer_class = ApiTokenSerializer
    permission_classes = [IsAuthenticated]
    queryset = ApiToken.objects.all()
    filter_backends: list[Any] = []

    def get_queryset(self) -> QuerySet[ApiToken]:
        return ApiToken.objects.filter(user_id=self.request.user.pk).prefetch_related(
            "clusters").order_by("-created", "-pk")

    def perform_create(self, serializer: Any) -> None:
        data = dict(serializer.validated_data)
        clusters = data.pop("clusters", None) or []
        token = ApiToken(user_id=self.request.user.pk, limited=bool(clusters), **data)
        secret = token.new_key()
        with transaction.atomic():
            token.full_clean()
            token.save()
            token.clusters.set(clusters)
        token.secret = secret  # type: ignore[attr-defined]
        serializer.instance = token

    @extend_schema(request=None, responses={200: ApiTokenSerializer},
                   summary="Revoke one of your tokens (refused from now on)")
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, pk: Any = None) -> Response:
        token = self.get_object()
        token.revoke()
        return Response(self.get_serializer(token).data, status=status.HTTP_200_OK)
