"""`Authorization: Bearer <token>` authentication for the API."""

from __future__ import annotations

from django.http import JsonResponse

from webapp.accounts.selectors import user_for_token


class BearerTokenMiddleware:
    """Authenticates requests that carry a bearer token; a bad token is refused outright.

    Token-authenticated requests are exempt from CSRF: they carry no ambient credentials.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        header = request.headers.get("Authorization", "")
        if header:
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                return _refused("the Authorization header must be 'Bearer <token>'")
            user = user_for_token(token=token.strip())
            if user is None:
                return _refused("the API token is unknown or revoked")
            request.user = user
            request._cached_user = user
            request.auth_via_token = True
            request._dont_enforce_csrf_checks = True
        return self.get_response(request)


def _refused(message: str) -> JsonResponse:
    """401 in the API's error shape, the problem naming the header; the challenge says which
    scheme to use and that this token was refused (RFC 6750)."""
    response = JsonResponse({"error": message,
                             "problems": [{"where": "header Authorization", "message": message}]},
                            status=401)
    response["WWW-Authenticate"] = 'Bearer error="invalid_token"'
    return response
