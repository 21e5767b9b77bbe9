"""Shared steps for the browser tests."""

import re
import time

from playwright.sync_api import Page, expect

from tests.factories import TEST_PASSWORD

# htmx wires its attributes on DOMContentLoaded; a click before that is a plain navigation.
HTMX_READY = "() => document.readyState === 'complete' && window.htmx !== undefined"
# No request in flight and no swap still settling: htmx wires swapped-in elements only when the settle
# (20 ms later) runs, so a key pressed in a field that still carries htmx-added is lost.
HTMX_IDLE = (
    "() => document.readyState === 'complete'"
    " && !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling, .htmx-added')"
)


def wait_for_htmx(page: Page) -> None:
    """Wait until the page's scripts ran and htmx has processed the document."""
    page.wait_for_function(HTMX_READY)


def wait_for_htmx_idle(page: Page) -> None:
    """Wait until htmx has no request in flight and every swapped-in element is wired."""
    page.wait_for_function(HTMX_IDLE)


def sign_in(page: Page, email: str, *, scripts: bool = True) -> None:
    """Sign in through the form and, when the page runs scripts, wait for it to be interactive."""
    page.goto("/login")
    page.get_by_label("E-mail").fill(email)
    page.get_by_label("Password").fill(TEST_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(r"/inbox$"))
    if scripts:
        wait_for_htmx(page)


def open_inbox(page: Page, url: str, seconds: float = 15) -> None:
    """Load the inbox and wait until its websocket has delivered the first (authoritative) count.

    The frame listener is attached when the socket is created, so a first frame that arrives before
    the test would have started waiting is still counted.
    """
    frames: list = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(payload)))
    page.goto(url)
    deadline = time.monotonic() + seconds
    while not frames:
        assert time.monotonic() < deadline, "no websocket frame arrived"
        page.wait_for_timeout(50)
    page.evaluate("window.__sameDocument = true")
