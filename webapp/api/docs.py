"""The API's interactive reference at /api/docs: Swagger UI reading the generated OpenAPI
document, its script and style served from our own static files (vendored, version pinned)
so it works offline and under the pages' Content-Security-Policy (no inline script)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from ninja.openapi.docs import DocsBase

# Swagger UI's own options; the rest (where to mount, the CSRF header) is set by
# static/js/api-docs.js. No validator: it would call a service outside this origin.
SWAGGER_SETTINGS = {"layout": "BaseLayout", "deepLinking": True, "validatorUrl": None,
                    "docExpansion": "list", "tryItOutEnabled": False}


class VendoredSwagger(DocsBase):
    """Swagger UI inside the product's own page frame (navigation, sign-out, styles)."""

    def render_page(self, request: HttpRequest, api: Any, **kwargs: Any) -> HttpResponse:
        settings = {**SWAGGER_SETTINGS, "url": self.get_openapi_url(api, kwargs)}
        return render(request, "pages/api_docs.html",
                      {"swagger_settings": settings, "api": api, "nav": "api"})
