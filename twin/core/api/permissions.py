"""Who may read and write through the API."""
from django.conf import settings
from rest_framework.permissions import SAFE_METHODS, BasePermission, DjangoModelPermissions

__all__ = ["TwinModelPermissions", "TwinReadOnlyPermissions"]


class TwinModelPermissions(DjangoModelPermissions):
    """Writes need the model permission; reads need a login unless
    ``TWIN_PUBLIC_READ`` opens them for a demo.

    A view with no model (``presets/``) has no permission to take writes from:
    a method it does not implement passes on to its 405, one it implements is
    refused (such a view sets its own ``permission_classes`` to allow writes).
    """

    def has_permission(self, request, view) -> bool:  # type: ignore[no-untyped-def]
        if request.method in SAFE_METHODS:
            if settings.TWIN_PUBLIC_READ:
                return True
            return bool(request.user and request.user.is_authenticated)
        if getattr(view, "_ignore_model_permissions", False):
            return bool(request.user and request.user.is_authenticated)
        if getattr(view, "queryset", None) is None and not hasattr(view, "get_queryset"):
            return bool(request.user and request.user.is_authenticated) and \
                getattr(view, request.method.lower(), None) is None
        return super().has_permission(request, view)


class TwinReadOnlyPermissions(BasePermission):
    """For a read-only endpoint without a model (the presets): reads as
    :class:`TwinModelPermissions` allows them; any other method passes, for the
    view to answer 405. (``DjangoModelPermissions`` asserts that the view has a
    queryset: a ``POST`` there was an ``AssertionError``, a 500.)"""

    def has_permission(self, request, view) -> bool:  # type: ignore[no-untyped-def]
        if request.method not in SAFE_METHODS:
            return True
        return bool(settings.TWIN_PUBLIC_READ
                    or (request.user and request.user.is_authenticated))
