"""Driving the console's workflow editor in a browser: add a step, fill its fields, wait for HTMX to redraw."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.e2e.helpers import wait_for_htmx_idle


def settled(page) -> None:
    """Wait until no htmx request is in flight (each change re-renders the list)."""
    wait_for_htmx_idle(page)


def add(page, kind: str, n: int) -> None:
    page.get_by_label("New step").select_option(label=kind)
    settled(page)
    page.get_by_role("button", name="Add step").click()
    expect(page.locator(f"#step-{n}")).to_be_visible()
    settled(page)


def seconds(page, n: int, value: str) -> None:
    field = page.locator(f"#step-{n}-delay_value")
    field.fill(value)
    field.press("Tab")  # a change event: the list is checked again
    settled(page)


def choose(page, n: int, name: str, **option) -> None:
    page.locator(f"#step-{n}-{name}").select_option(**option)
    settled(page)


def condition(page, n: int, text: str) -> None:
    field = page.locator(f"#step-{n}-condition")
    field.fill(text)
    field.press("End")  # a keyup: the condition is checked 400 ms later
    page.wait_for_timeout(500)
    settled(page)


def remove_all_but_in_app(page) -> None:
    """Remove every step after the first (the in-app step of a type's version 1), last first."""
    while page.locator("#step-2").count():
        last = page.locator(".workflow-step").count()
        page.get_by_role("button", name=f"Remove: step {last}").click()
        expect(page.locator(f"#step-{last}")).to_have_count(0)
        settled(page)


def build_example(page, first: int, second: int) -> None:
    """Issue 31's example from the in-app step: push if unread after `first` s; SMS if still unread `second` s
    later and data.amount > 10000; otherwise the daily digest."""
    add(page, "Wait", 2)
    seconds(page, 2, str(first))
    add(page, "Send on a channel", 3)
    choose(page, 3, "channel", value="push")
    choose(page, 3, "read", value="unread")
    add(page, "Wait", 4)
    seconds(page, 4, str(second))
    add(page, "Send on a channel", 5)
    choose(page, 5, "channel", value="sms")
    choose(page, 5, "read", value="unread")
    condition(page, 5, "data.amount > 10000")
    add(page, "E-mail digest", 6)
    choose(page, 6, "frequency", value="daily")
    choose(page, 6, "read", value="unread")
    condition(page, 6, "!(data.amount > 10000)")
