"""A signed-in Chromium page on a running product, for the scripts that take the README's
screenshots (``bench.screens``, ``bench.autoscale_screens``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

CHROMIUM = "/usr/bin/chromium"


@contextmanager
def signed_in_page(url: str, username: str, password: str,
                   viewport: tuple[int, int] = (1280, 900)) -> Iterator[Any]:
    """A page of headless Chromium signed in to the product at ``url`` as ``username``."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
            page.goto(f"{url}/login/")
            page.fill("#id_username", username)
            page.fill("#id_password", password)
            page.click("button[type=submit]")
            page.wait_for_url(lambda now: "/login/" not in now)
            yield page
        finally:
            browser.close()
