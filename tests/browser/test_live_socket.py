"""Live pages stay live: when their websocket drops (the server closes it, the browser goes
offline) they say so, reconnect by themselves, say "live" again and resume their updates."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import run_page_open, wait_live

pytestmark = pytest.mark.browser

RECONNECTING = re.compile(r"reconnecting in \d+ s")


class Sockets:
    """The page's websockets to paths matching `pattern`, passed through to the server, each
    of which the test can close from the server's side."""

    def __init__(self, page, pattern: str) -> None:
        self.routes: list = []
        page.route_web_socket(re.compile(pattern), self._connect)

    def _connect(self, route) -> None:
        route.connect_to_server()
        self.routes.append(route)

    def drop(self) -> None:
        """Close the newest connection as a restarting server does (1012)."""
        self.routes[-1].close(code=1012, reason="server restart")


def _epoch(page) -> int:
    text = page.inner_text("#kpi-epoch")
    return int(text) if text.isdigit() else -1


def _epoch_passes(page, epoch: int) -> None:
    page.wait_for_function(
        f"Number(document.querySelector('#kpi-epoch').textContent) > {epoch}", timeout=30_000)


def _label(page) -> tuple[str, str]:
    return page.evaluate(
        "[document.querySelector('#live-state').dataset.state,"
        " document.querySelector('#live-state').textContent]")


def test_the_run_page_reconnects_after_the_server_drops_it_and_resumes(fed_run, signed_in):
    run_id, _ = fed_run("socket-drops", 5)
    page = signed_in("viewer")
    sockets = Sockets(page, r"/ws/runs/\d+/$")
    run_page_open(page, run_id)
    _epoch_passes(page, _epoch(page))
    for dropped in (1, 2):
        sockets.drop()
        page.wait_for_function(
            "document.querySelector('#live-state').dataset.state === 'reconnecting'")
        state, text = _label(page)
        assert RECONNECTING.fullmatch(text), text
        assert "off" in page.get_attribute("#live-state", "class")
        frozen = _epoch(page)
        wait_live(page)
        assert len(sockets.routes) == dropped + 1
        # The new connection's snapshot and the epochs after it reach the page.
        _epoch_passes(page, frozen)
    assert "on" in page.get_attribute("#live-state", "class").split()


def test_the_run_page_says_offline_and_comes_back_with_the_network(fed_run, signed_in):
    run_id, _ = fed_run("socket-offline", 5)
    # While offline the browser logs each load it refuses.
    page = signed_in("viewer", expected_errors=("ERR_INTERNET_DISCONNECTED",))
    sockets = Sockets(page, r"/ws/runs/\d+/$")
    run_page_open(page, run_id)
    page.context.set_offline(True)
    # A browser whose only network is loopback (a bare machine) already calls itself offline,
    # so going offline changes nothing it would announce: announce it as the browser would.
    page.evaluate("window.dispatchEvent(new Event('offline'))")
    page.wait_for_function("document.querySelector('#live-state').textContent === 'offline'")
    frozen = _epoch(page)
    page.wait_for_timeout(2500)  # a feeder epoch a second: none arrives while offline
    assert _epoch(page) == frozen and len(sockets.routes) == 1
    page.context.set_offline(False)
    page.evaluate("window.dispatchEvent(new Event('online'))")
    wait_live(page)
    assert len(sockets.routes) == 2
    _epoch_passes(page, frozen)


def test_a_history_that_fails_to_load_is_said_beside_the_charts_not_over_the_connection(
    fed_run, signed_in
):
    # The run page fetches its earlier epochs once it is live; a fetch the network fails (the
    # browser going offline as it runs) must not leave its error where the connection's state
    # is shown.
    run_id, _ = fed_run("socket-history", 3)
    page = signed_in("viewer", expected_errors=("ERR_FAILED",))
    page.route(re.compile(r"/runs/\d+/series\.json$"), lambda route: route.abort())
    run_page_open(page, run_id)
    page.wait_for_selector("#history-state:not([hidden])")
    assert "could not be loaded" in page.inner_text("#history-state")
    wait_live(page)
    assert page.inner_text("#live-state") == "live"


def test_the_editor_reconnects_and_still_hears_of_a_newer_version(stack, fed_run, signed_in):
    _, job_id = fed_run("socket-editor", 0, feed=False)
    page = signed_in("editor", expected_errors=("ERR_INTERNET_DISCONNECTED",))
    sockets = Sockets(page, r"/ws/jobs/\d+/$")
    page.goto(f"/jobs/{job_id}/edit/")
    wait_live(page)
    sockets.drop()
    page.wait_for_function(
        "document.querySelector('#live-state').dataset.state === 'reconnecting'")
    wait_live(page)
    assert len(sockets.routes) == 2
    # Saved while the page listens on its second connection: announced live.
    stack.fake_run("create", "0", "socket-editor")
    page.wait_for_selector("#conflict:not([hidden])", timeout=15_000)
    assert "was saved" in page.inner_text("#conflict")

    # Saved while the page was offline: found when it comes back. The reload's connection
    # asks for the latest version once it is open: that answer is awaited, or it could come
    # after the version saved offline below and show it.
    with page.expect_response(re.compile(rf"/api/jobs/{job_id}$")):
        page.reload()
    wait_live(page)
    assert page.locator("#conflict:not([hidden])").count() == 0
    page.context.set_offline(True)
    page.evaluate("window.dispatchEvent(new Event('offline'))")  # see the run page's test
    page.wait_for_function("document.querySelector('#live-state').textContent === 'offline'")
    stack.fake_run("create", "0", "socket-editor")
    assert page.locator("#conflict:not([hidden])").count() == 0
    page.context.set_offline(False)
    page.evaluate("window.dispatchEvent(new Event('online'))")
    wait_live(page)
    page.wait_for_selector("#conflict:not([hidden])", timeout=15_000)


_CLOSE_CODE_OF = """url => new Promise(resolve => {
  const socket = new WebSocket(url);
  socket.onclose = event => resolve(event.code);
})"""


@pytest.fixture
def page_on_another_port():
    """The address of an empty page served on another port of the product's host: the same
    site, so the browser sends the session cookie along with its socket."""
    import http.server
    import threading

    class EmptyPage(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the http.server's name
            body = b"<!doctype html><title>another port</title>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), EmptyPage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_a_page_on_another_port_cannot_open_the_products_socket(
    stack, signed_in, page_on_another_port
):
    page = signed_in("viewer", expected_errors=("WebSocket",))
    socket_url = stack.url.replace("http://", "ws://") + "ws/jobs/999999/"

    # From the product's own page: signed in and same origin, so only the job is unknown.
    assert page.evaluate(_CLOSE_CODE_OF, socket_url) == 4404
    page.goto(page_on_another_port)
    # The same browser and cookie from another port: refused as another origin, with the
    # code the pages understand (not an HTTP 403 seen as 1006).
    assert page.evaluate(_CLOSE_CODE_OF, socket_url) == 4403
