"""Dark mode follows the system's preference: a browser that prefers dark gets dark pages,
charts drawn in the dark theme's colours, and text that keeps its contrast; switching back
to light redraws the charts in the light colours without a reload."""

from __future__ import annotations

import pytest

from tests.browser.conftest import PASSWORD, wait_live
from tests.browser.published import chain_epoch, chain_run, publish

pytestmark = pytest.mark.browser

# WCAG's contrast ratio between each element's text colour and the background it sits on (the
# nearest ancestor with a background). A color-mix() background computes to "color(srgb r g b)"
# with components from 0 to 1.
CONTRASTS = """els => els.map((el) => {
  const rgb = (c) => c.match(/[\\d.]+/g).map(Number)
    .map((v) => (c.startsWith('color(srgb') ? v * 255 : v));
  const lum = (c) => { const [r, g, b] = rgb(c).slice(0, 3).map((v) => {
      v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  let bg = el;
  while (bg && (getComputedStyle(bg).backgroundColor === 'rgba(0, 0, 0, 0)')) bg = bg.parentElement;
  const a = lum(getComputedStyle(el).color);
  const b = lum(getComputedStyle(bg || document.body).backgroundColor);
  return [el.id || el.className || el.tagName, (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)];
})"""

CHART = "document.querySelector('#chart-throughput')"
DRAWN = f"Number({CHART}.dataset.drawn) >= 30"

THEME = """() => {
  const lum = (c) => c.match(/[\\d.]+/g).slice(0, 3).map(Number).reduce((a, b) => a + b, 0) / 3;
  const marker = document.querySelector('#chart-throughput .u-series:nth-child(2) .u-marker');
  const canvas = document.querySelector('#chart-throughput canvas');
  return {body: lum(getComputedStyle(document.body).backgroundColor),
          card: lum(getComputedStyle(document.querySelector('.card')).backgroundColor),
          series: getComputedStyle(marker).borderColor,
          theme: document.querySelector('#chart-throughput').dataset.theme,
          canvas: canvas.toDataURL()};
}"""


def test_the_run_page_and_its_charts_follow_a_dark_preference(stack, browser):
    run_id = chain_run(stack, "dark-run")
    publish(stack, run_id, *[chain_epoch(
        e, out={"src": 3000 + 40 * e, "keep": 1800, "counts": 60 - e},
        busy={"src": 50, "keep": 300, "counts": [900, 400], "out": 5}) for e in range(1, 41)])
    context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme="dark",
                                  base_url=stack.url.rstrip("/"), bypass_csp=True)
    errors = []
    try:
        page = context.new_page()
        page.on("console", lambda m: m.type == "error" and errors.append(m.text))
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto("/login/")
        page.fill("#id_username", "operator-b")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(stack.url)
        page.goto(f"/runs/{run_id}/")
        wait_live(page)
        page.wait_for_function(DRAWN)
        dark = page.evaluate(THEME)
        assert dark["theme"] == "dark"
        assert dark["body"] < 40 and dark["card"] < 50, dark
        texts = page.locator("h1, .kpis dt, .kpis dd, .op-id, .node-metrics span, .legend li, "
                             ".chart-block h2, #run-status, .bp-badge").evaluate_all(CONTRASTS)
        assert [t for t in texts if t[1] < 4.5] == [], texts

        page.emulate_media(color_scheme="light")
        page.wait_for_function(f"{CHART}.dataset.theme === 'light'")
        page.wait_for_function(DRAWN)
        light = page.evaluate(THEME)
        assert light["body"] > 200 and light["card"] > 240, light
        assert light["series"] != dark["series"]
        assert light["canvas"] != dark["canvas"]
        texts = page.locator("h1, .kpis dd, .op-id, .bp-badge").evaluate_all(CONTRASTS)
        assert [t for t in texts if t[1] < 4.5] == [], texts
    finally:
        context.close()
    assert errors == []
