"""ASGI entry point: HTTP through Django, websockets through Channels.

Websockets go through the session auth middleware, then the API-token one
(``twin.core.ws_auth``), so every consumer knows its user and can refuse anonymous
clients.
"""
import os

from twin.embedded import ensure_for_process

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.settings")
ensure_for_process()  # REDIS_URL unset: the embedded Redis (twin.embedded)
# No persistent database connections here: every request runs in a thread of its own
# (asgiref), and their connections would pile up (twin/settings.py, DATABASES).
os.environ.setdefault("TWIN_DB_CONN_MAX_AGE", "0")
# … but a pool per process (PostgreSQL): a request borrows a connection and returns
# it, no connect per request, never more than this many per process.
os.environ.setdefault("TWIN_DB_POOL_MAX", "8")
# Django's handler, with request threads kept between requests (twin.core.asgi_handler).
from twin.core.asgi_handler import get_pooled_asgi_application  # noqa: E402

django_asgi_app = get_pooled_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.urls import get_resolver  # noqa: E402

from twin.core.collector import freeze_startup_objects  # noqa: E402
from twin.core.ws_auth import TokenAuthMiddleware  # noqa: E402
from twin.live.routing import websocket_urlpatterns  # noqa: E402

__all__ = ["application"]

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(TokenAuthMiddleware(URLRouter(websocket_urlpatterns)))
        ),
    }
)

# Every view imported now rather than on the first request, then the process's
# start-up objects (≈ 170,000) frozen out of the collector's sight: a full collection
# walking them stalled every request thread for 70–150 ms (twin.core.collector).
get_resolver().url_patterns  # noqa: B018 - imports the URLconf and its views
freeze_startup_objects()
