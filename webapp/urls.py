from django.urls import include, path, re_path

from webapp.api.app import api
from webapp.api.http import not_found

urlpatterns = [
    # The API first: its reads are the hot path, and no page's URL starts with api/.
    re_path(r"^api/$", not_found),  # before the API's root, which is only for reverse()
    path("api/", api.urls),
    re_path(r"^api(/|$)", not_found, name="api-not-found"),
    path("", include("webapp.pages.urls")),
]

# A server the product needs being down is a 503 with the reason wherever it is noticed.
handler500 = "webapp.dependencies.server_error_or_dependency_down"
