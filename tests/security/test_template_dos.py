"""Attack: an operator's message template that burns a web thread or a worker (CPU, memory, time).

The issue's payloads (`'a' * 10**9`, `9**9**9`, `center(10**9)`, `lipsum(10**7)`, nested
`range(100000)` loops) and their known variants are typed into the console editor, whose live
preview renders them on every keystroke, and saved as the template a send job renders. Each must end
in a clear, fast error: a problem in the preview, and a permanent render failure for that one
delivery while its sibling in the same batch is sent.

Every payload is first rendered in a forked child with an address-space and CPU-time limit, so that
code without the limits fails the test instead of eating the machine's memory or hanging it; the
console and the job are attacked in-process only after that child came back clean.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import time
from functools import cache

import pytest

from app.delivery import rendering
from app.extensions import db
from app.models import MessageTemplate
from jobs.delivery import deliver_batch
from tests.factories import NotificationTypeFactory, UserFactory
from tests.support.delivery import reload

FAST = 2.0  # seconds: what "fast" means for the preview request and for the batch
CHILD_MEMORY = 768 * 1024 * 1024  # address space the guarded child may add before MemoryError
CHILD_MAX_RSS_GROWTH = 256 * 1024 * 1024
CHILD_CPU_SECONDS = 4
CHILD_WALL_SECONDS = 20

LOOPS = "{% for i in range(100000) %}{% for j in range(100000) %}{{ '' }}{% endfor %}{% endfor %}"
NESTED = (
    "{% set a = ['x' * 100000] * 5 %}{% set b = [a, a, a, a, a, a, a, a, a, a] %}"
    "{% set c = [b, b, b, b, b, b, b, b, b, b] %}{% set d = [c, c, c, c, c, c, c, c, c, c] %}{{ d }}"
)
DOUBLING_MACRO = "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}"
DOUBLING_NAMESPACE = (
    "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
    "{{ ns.s | length }}"
)

# (template, what the error says)
PAYLOADS = [
    pytest.param("{{ 'a' * 10**9 }}", "TemplateLimitError", id="str-times-10**9"),
    pytest.param("{{ 9**(9**9) }}", "TemplateLimitError", id="power-9**(9**9)"),
    pytest.param("{{ 'x' | center(10**9) }}", "TemplateLimitError", id="center-10**9"),
    pytest.param("{{ lipsum(10**7) }}", "'lipsum' is undefined", id="lipsum-10**7"),
    pytest.param(LOOPS, "time budget", id="nested-range-loops"),
    pytest.param("{{ 'a' * 9999999 * 9999 }}", "TemplateLimitError", id="str-times-chain"),
    pytest.param("{{ [0] * 10**8 }}", "TemplateLimitError", id="list-times-10**8"),
    pytest.param("{{ '%099999999d' | format(1) }}", "TemplateLimitError", id="format-filter-width"),
    pytest.param("{{ '%099999999d' % 1 }}", "TemplateLimitError", id="percent-operator-width"),
    pytest.param("{{ '{:>999999999}'.format(1) }}", "TemplateLimitError", id="str-format-width"),
    pytest.param("{{ '{0:0>{1}}'.format(1, 999999999) }}", "TemplateLimitError", id="str-format-nested-width"),
    pytest.param("{{ range(10**9) | list }}", "Range too big", id="range-10**9"),
    pytest.param("{{ (range(10**5) | list) * 10**5 }}", "TemplateLimitError", id="range-list-times-10**5"),
    pytest.param("{{ 'x'.ljust(10**9) }}", "TemplateLimitError", id="ljust-10**9"),
    pytest.param("{{ 'x'.zfill(10**9) }}", "TemplateLimitError", id="zfill-10**9"),
    pytest.param("{{ 'x' | indent(10**9) }}", "TemplateLimitError", id="indent-10**9"),
    pytest.param("{{ ('a' * 100000).replace('', 'b' * 100000) }}", "TemplateLimitError", id="replace-growth"),
    pytest.param("{{ ('%(a)s' * 100000) % {'a': 'x' * 100000} }}", "TemplateLimitError", id="percent-mapping"),
    pytest.param("{{ [1] | batch(10**9, 0) | list }}", "TemplateLimitError", id="batch-fill-10**9"),
    pytest.param(NESTED, "TemplateLimitError", id="shared-references-10**4"),
    pytest.param(DOUBLING_NAMESPACE, "TemplateLimitError", id="namespace-doubling"),
    pytest.param(DOUBLING_MACRO, "time budget", id="macro-doubling-2**40"),
    pytest.param("{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}", "TemplateLimitError", id="loop-output"),
]

CONTEXT = {
    "user": {"name": "Ada", "email": "ada@example.com", "locale": "en"},
    "notification": {"id": 1, "title": "Hello", "body": "Body", "link": None, "type": "comment"},
    "type": {"type": "comment", "label": "Comment"},
    "data": {},
    "unsubscribe_url": "http://x/u",
    "base_url": "http://x",
}


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


def _child_render(source: str, write: int) -> None:
    """In the forked child: limit memory and CPU, render, report (outcome, detail, seconds) on the pipe."""
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    limit = _status_kb("VmSize") * 1024 + CHILD_MEMORY
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    resource.setrlimit(resource.RLIMIT_CPU, (CHILD_CPU_SECONDS, CHILD_CPU_SECONDS + 1))
    started = time.perf_counter()
    try:
        outcome = ("rendered", f"{len(rendering.render_string(source, CONTEXT)):,} characters")
    except rendering.RenderError as exc:
        outcome = ("error", str(exc)[:300])
    except BaseException as exc:  # noqa: BLE001 - MemoryError, RecursionError: report, never hang
        outcome = ("crash", f"{type(exc).__name__}: {exc}"[:300])
    os.write(write, json.dumps([*outcome, time.perf_counter() - started]).encode())


@cache
def guarded_render(source: str) -> tuple[str, str, float]:
    """Render source in a forked child under memory and CPU limits; (outcome, detail, seconds)."""
    rss_before = _status_kb("VmRSS") * 1024
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child never returns into pytest
        try:
            os.close(read)
            _child_render(source, write)
        finally:
            os._exit(0)
    os.close(write)
    deadline = time.monotonic() + CHILD_WALL_SECONDS
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            done, status, usage = os.wait4(pid, 0)
            break
        time.sleep(0.02)
    report = os.read(read, 65536)
    os.close(read)
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        return "killed", f"killed by {name} (CPU limit {CHILD_CPU_SECONDS} s, wall {CHILD_WALL_SECONDS} s)", 0.0
    outcome, detail, seconds = json.loads(report)
    growth = usage.ru_maxrss * 1024 - rss_before
    if growth > CHILD_MAX_RSS_GROWTH:
        return "memory", f"{outcome} after using {growth / 2**20:,.0f} MiB more memory: {detail}", seconds
    return outcome, detail, seconds


def assert_bounded(source: str) -> None:
    outcome, detail, seconds = guarded_render(source)
    assert outcome == "error", f"not a clean render error: {outcome}: {detail}"
    assert seconds < FAST, f"the render took {seconds:.1f} s before failing: {detail}"


@pytest.fixture
def operator(login_as):
    return login_as(UserFactory(role="operator"))


@pytest.mark.parametrize(("source", "says"), PAYLOADS)
def test_preview_keystroke_gets_a_fast_clear_error(client, csrf, operator, source, says):
    assert_bounded(source)
    NotificationTypeFactory(type="comment", label="Comment")
    started = time.perf_counter()
    response = client.post(
        "/console/templates/comment/email/en/preview",
        headers={**csrf(), "HX-Request": "true"},
        data={"subject": "Hello", "body_text": f"Hi {{{{ user.name }}}}\n{source}"},
    )
    elapsed = time.perf_counter() - started
    page = response.get_data(as_text=True)
    assert response.status_code == 200
    assert elapsed < FAST, f"the preview took {elapsed:.1f} s"
    assert "cannot be sent or saved" in page and "Text body" in page  # the part (and its line, when known)
    assert says in page.replace("&#39;", "'"), page
    assert "<iframe" not in page


@pytest.mark.committed
@pytest.mark.parametrize(("source", "says"), PAYLOADS)
def test_send_job_fails_that_delivery_and_sends_its_sibling(app, fake_provider, make_delivery, source, says):
    assert_bounded(source)
    bomb = NotificationTypeFactory(type="bomb", label="Bomb", default_email=True)
    db.session.add(MessageTemplate(type="bomb", channel="email", locale="en", subject="Hi", body_text=source))
    bad = make_delivery(type_=bomb, title="bad")
    good = make_delivery(title="good")  # another type, no template: the notification's own words

    started = time.perf_counter()
    deliver_batch("email", [bad.id, good.id])
    elapsed = time.perf_counter() - started

    assert elapsed < FAST, f"the batch took {elapsed:.1f} s"
    bad_row, good_row = reload(bad), reload(good)
    assert (bad_row.status, bad_row.error_kind) == ("failed", "render")  # permanent: in the DLQ, never retried
    assert bad_row.attempts == 1 and says in (bad_row.last_error or ""), bad_row.last_error
    assert good_row.status == "sent"
    assert [m.subject for m in fake_provider.sent] == ["good"]


def test_power_is_left_associative_and_9_9_9_is_harmless():
    """Jinja reads 9**9**9 as (9**9)**9, a 78-digit number: it renders; 9**(9**9) is the bomb."""
    assert guarded_render("{{ 9**9**9 }}")[:2] == ("rendered", "78 characters")
    assert rendering.render_string("{{ 9**9**9 }}", {}) == str((9**9) ** 9)
    assert_bounded("{{ 9**(9**9) }}")
    assert "bits" in guarded_render("{{ 9**(9**9) }}")[1]
