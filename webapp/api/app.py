"""The JSON API under /api/: one NinjaAPI with the jobs and runs routers, the body parser with
its limits, and the error handlers that answer every error as {error, problems}. Its OpenAPI
document, generated from the routers' models, is served at /api/schema and rendered as an
interactive reference at /api/docs."""

from __future__ import annotations

from django.urls import register_converter
from ninja import NinjaAPI

from webapp.api import runs, views
from webapp.api.docs import VendoredSwagger
from webapp.api.http import EXCEPTION_HANDLERS, ApiIdConverter, BoundedJsonParser, only_get

register_converter(ApiIdConverter, "id")


api = NinjaAPI(
    title="streamscale API", version="1",
    description="Jobs, runs and reconfigurations of elastic stateful stream jobs. "
                "Authenticate with `Authorization: Bearer <token>` or a signed-in session "
                "(writes then need the X-CSRFToken header). Every error answers "
                "{error, problems}, each problem {where, message}.",
    openapi_url="/schema", docs_url="/docs", docs=VendoredSwagger(), docs_decorator=only_get,
    parser=BoundedJsonParser(), urls_namespace="api",
)
for exception, handler in EXCEPTION_HANDLERS:
    api.add_exception_handler(exception, handler)
api.add_router("", runs.router)  # GET /api/runs/{id}, the hottest read, is matched first
api.add_router("", views.router)
