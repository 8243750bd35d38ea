"""The API reference: reached from the navigation, rendered from the generated OpenAPI
document by scripts served from this origin only, under the pages' real Content-Security-Policy
(this test does not bypass it), and a request tried from it answers."""

from __future__ import annotations

import pytest

from tests.browser.conftest import PASSWORD, screenshot

pytestmark = pytest.mark.browser


def test_the_api_reference_lists_every_operation_under_the_csp(stack, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900},
                                  base_url=stack.url.rstrip("/"))
    page = context.new_page()
    problems, elsewhere = [], []
    page.on("console", lambda m: m.type in ("error", "warning") and problems.append(m.text))
    page.on("pageerror", lambda e: problems.append(f"page error {e}"))
    page.on("request", lambda r: r.url.startswith(stack.url) or r.url.startswith("data:")
            or elsewhere.append(r.url))
    try:
        page.goto("/login/")
        page.fill("#id_username", "viewer-b")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(stack.url)
        document = page.request.get("/api/schema").json()
        with page.expect_response(f"{stack.url}api/docs") as answer:
            page.get_by_role("navigation", name="Main").get_by_role("link", name="API").click()
        assert "script-src 'self'" in answer.value.headers["content-security-policy"]
        # Swagger UI parses a 1.5 MB bundle before it renders anything; on a 2-core machine
        # shared with other work that alone has taken over the default 30 s.
        page.wait_for_selector(".opblock", state="attached", timeout=120_000)
        expected = sorted((method.upper(), path) for path, operations in
                          document["paths"].items() for method in operations)
        shown = page.locator(".opblock").evaluate_all(
            """els => els.map((el) => [
                 el.querySelector('.opblock-summary-method').textContent,
                 el.querySelector('.opblock-summary-path').getAttribute('data-path')])""")
        assert sorted(tuple(s) for s in shown) == expected
        assert page.locator("nav a[aria-current=page]").inner_text() == "API"

        # Try a read from the page: the session is the credential, the answer is shown.
        catalog = page.locator(".opblock-get", has=page.locator("[data-path='/api/catalog']"))
        catalog.wait_for()
        screenshot(page, "api-docs", full_page=False)
        catalog.locator(".opblock-summary").click()
        catalog.get_by_role("button", name="Try it out").click()
        catalog.get_by_role("button", name="Execute").click()
        status = catalog.locator(".live-responses-table tbody .response-col_status").first
        status.wait_for()
        assert status.inner_text().strip() == "200"
    finally:
        context.close()
    assert problems == [], problems
    assert elsewhere == [], f"requests outside this origin: {elsewhere}"
