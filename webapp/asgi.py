"""ASGI entry point: HTTP (with static files) and origin-checked, authenticated websockets."""

import gc
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
# Names this process's database connections (pg_stat_activity.application_name).
os.environ["PGAPPNAME"] = "streamscale-web"

import django  # noqa: E402

django.setup(set_prefix=False)  # as get_asgi_application(): the prefix comes with each request

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from webapp.bounded import BoundedWorkers, ThreadedDjango, connect_thread  # noqa: E402
from webapp.live.auth import BearerTokenWebsocketMiddleware  # noqa: E402
from webapp.live.origin import SameOriginWebsocketValidator  # noqa: E402
from webapp.live.routing import websocket_urlpatterns  # noqa: E402

# Each request thread keeps one database connection across requests (webapp.bounded). The
# launcher's server prepares at start what its first requests would otherwise wait for: each
# thread's connection, the URLconf with every view, the engine modules requests use. Elsewhere
# (the tests' servers, whose database is chosen after this module loads) requests do.
_prepare = os.environ.get("STREAMSCALE_WEB_PREPARE_AT_START") == "1"
if _prepare:
    from django.urls import get_resolver  # noqa: E402

    from webapp import engine_gateway  # noqa: E402

    get_resolver().url_patterns  # noqa: B018  # imports every view module
    # The parser's start loads Spark's Python side (~55k objects), which also lives as long
    # as the server: frozen too once it is loaded (see below).
    engine_gateway.prepare(then=gc.freeze)

application = ProtocolTypeRouter(
    {
        "http": ASGIStaticFilesHandler(BoundedWorkers(
            ThreadedDjango(), threads=settings.WEB_THREADS, queue=settings.WEB_QUEUE,
            wait_s=settings.WEB_QUEUE_WAIT_S, connect=connect_thread if _prepare else None)),
        "websocket": SameOriginWebsocketValidator(
            AuthMiddlewareStack(BearerTokenWebsocketMiddleware(URLRouter(websocket_urlpatterns)))
        ),
    }
)

# What is loaded by now lives as long as the server. Left to the collector, each full
# collection walks all of it again, every few seconds under load, with every request
# thread of the process stopped: the tail of `python -m bench api`.
gc.freeze()
