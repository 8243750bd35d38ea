// Mounts Swagger UI on the API reference page. Its options come from a JSON script element
// (the Content-Security-Policy allows no inline script); "Try it out" requests carry the
// page's CSRF token, as the session-authenticated API requires for writes.
/* global SwaggerUIBundle */
const settings = JSON.parse(document.getElementById("swagger-settings").textContent);
const csrf = JSON.parse(document.body.getAttribute("hx-headers"))["X-CSRFToken"];

SwaggerUIBundle({
  ...settings,
  dom_id: "#swagger-ui",
  presets: [SwaggerUIBundle.presets.apis],
  requestInterceptor: (request) => {
    request.headers["X-CSRFToken"] = csrf;
    return request;
  },
});
