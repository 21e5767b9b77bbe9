"""axe-core in the browser tests: the engine bundled with axe_playwright_python (no CDN), findings by impact.

    from tests.support.axe import serious_violations, describe
    found = serious_violations(page)
    assert not found, describe(found)

Injecting the script goes through the DevTools protocol (page.evaluate), which the page's CSP does not govern.
"""

from __future__ import annotations

import json
import re

from axe_playwright_python.base import AXE_SCRIPT

# What fails a test. "moderate" and "minor" findings (mostly best-practice hints) are reported, not enforced.
BLOCKING = ("serious", "critical")

# WCAG 2.1 A/AA plus axe's best practices (landmarks, one main, heading order…).
OPTIONS = {
    "resultTypes": ["violations"],
    "runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]},
}

# A second colour scheme changes colours only: check just the colour rules (much faster than everything again).
COLOUR_OPTIONS = {
    "resultTypes": ["violations"],
    "runOnly": {"type": "rule", "values": ["color-contrast", "link-in-text-block"]},
}


def run(page, options: dict | None = None) -> list[dict]:
    """Every violation axe finds on the page as it is now (after htmx settled); each a dict of axe's result."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(AXE_SCRIPT)
    return page.evaluate("options => window.axe.run(document, options).then(r => r.violations)", options or OPTIONS)


def serious_violations(page, options: dict | None = None) -> list[dict]:
    """The violations whose impact is serious or critical."""
    return [v for v in run(page, options) if v.get("impact") in BLOCKING]


def describe(violations: list[dict], where: str = "") -> str:
    """A readable report: rule, impact, help and every offending node with axe's explanation."""
    lines = []
    for v in violations:
        lines.append(f"{where}{v['id']} ({v['impact']}): {v['help']}")
        for node in v["nodes"]:
            messages = [item["message"] for part in ("any", "all", "none") for item in node.get(part, [])]
            lines.append(f"    {json.dumps(node['target'])}: {node['html'][:160]}")
            lines.extend(f"        - {m}" for m in messages)
    return "\n".join(lines)


def sign_in_any_language(page, email: str) -> None:
    """Sign in through the form by its fields' ids and wait for the inbox (the labels may be Japanese)."""
    from tests.factories import TEST_PASSWORD

    page.goto("/login")
    page.locator("#email").fill(email)
    page.locator("#password").fill(TEST_PASSWORD)
    page.locator("main form button[type=submit]").click()
    page.wait_for_url(re.compile(r"/inbox$"))
    page.wait_for_function("() => document.readyState === 'complete' && window.htmx !== undefined")


def settle(page) -> None:
    """Wait until no CSS transition runs: after emulate_media every colour transitions (briefly) to the new scheme,
    and axe must read the end colours, not a frame in between."""
    page.wait_for_function(
        "() => document.getAnimations().every(a => !(a instanceof CSSTransition) || a.playState === 'finished')"
    )
