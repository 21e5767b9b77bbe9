"""The workflow's test run page: the operator's gate, CSRF, checked input, the outcome of each step, escaping."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.extensions import db
from app.models import AuditEntry, Notification, NotificationDelivery, PushSubscription
from app.workflows import service
from tests.factories import NotificationTypeFactory, UserFactory
from tests.support.html import one, parse, table_rows, texts

# The example: in-app; after 30 min a push if unread; 4 h later an SMS for a large amount, else the digest.
EXAMPLE = {
    "steps": [
        {"kind": "channel", "channel": "in_app"},
        {"kind": "delay", "seconds": 1800},
        {"kind": "channel", "channel": "push", "only_if": ["unread"]},
        {"kind": "delay", "seconds": 14400},
        {"kind": "channel", "channel": "sms", "only_if": ["unread"], "condition": "data.amount > 10000"},
        {"kind": "digest", "frequency": "daily", "only_if": ["unread"], "condition": "!(data.amount > 10000)"},
    ]
}
URL = "/console/types/payment/workflow/test"


@pytest.fixture
def payment(app):
    """The payment type running the example (version 2), and a member every channel reaches."""
    NotificationTypeFactory(type="payment", label="Payment", default_email=True, default_push=True,
                            default_channels=["sms"])  # fmt: skip
    service.save_draft(None, "payment", EXAMPLE)
    service.publish(None, "payment", note="the example")
    member = UserFactory(external_id="m-1", phone="+819012345678", phone_verified_at=datetime.now(UTC),
                         sms_opt_in=True, timezone="Asia/Tokyo")  # fmt: skip
    db.session.add(PushSubscription(user_id=member.id, endpoint="https://push.example/1", p256dh="k", auth="a"))
    db.session.flush()
    return member


@pytest.fixture
def run(client, csrf):
    """Post the test run's form (with its CSRF token); fields override the defaults."""

    def _run(**fields):
        data = {"sample": '{"amount": 20000}', "member": "m-1", "read_after": "", "which": "published"} | fields
        return client.post(URL, data=data, headers=csrf())

    return _run


def _outcomes(page: str) -> dict[int, str]:
    return {
        int(tr["id"].removeprefix("trial-step-")): tr["data-outcome"]
        for tr in parse(page).select("#trial-table tr[id]")
    }


def test_a_visitor_goes_to_sign_in(client, payment):
    assert client.get(URL).status_code == 302


def test_a_member_gets_403(client, payment, member, run):
    assert client.get(URL).status_code == 403
    assert run().status_code == 403


def test_the_form_starts_on_the_published_version_and_an_unknown_type_is_404(client, operator, payment):
    page = client.get(URL)
    assert page.status_code == 200
    assert one(page.text, "#which-0")["value"] == "published"  # no draft: the published version only
    assert "Give a sample payload and a member" in one(page.text, "#trial-output").get_text()
    assert client.get("/console/types/nope/workflow/test").status_code == 404


def test_a_large_amount_sends_the_sms_and_a_small_one_goes_to_the_digest(client, operator, payment, run):
    large = run()
    assert large.status_code == 200
    assert _outcomes(large.text) == {1: "shown", 2: "waits", 3: "sent", 4: "waits", 5: "sent", 6: "skipped"}
    rows = table_rows(large.text, "#trial-table")
    assert rows[2][2] == "sent" and "+30 min" in rows[2][3]  # the push, 30 min in
    assert "+4 h 30 min" in rows[4][3] and "SMS" in rows[4][4]
    assert "condition false" in rows[5][5]
    assert "JST" in rows[4][3]  # the operator's time zone (Asia/Tokyo)

    small = run(sample='{"amount": 500}')
    assert _outcomes(small.text)[5] == "skipped" and _outcomes(small.text)[6] == "digested"
    sms = table_rows(small.text, "#trial-table")[4]
    assert "condition false" in sms[5]
    assert "data.amount > 10000" in sms[0]
    assert one(small.text, ".wf-timeline__svg title").get_text() == "Timeline of the test run"


def test_reading_it_first_skips_the_unread_steps(client, operator, payment, run):
    page = run(read_after="600")
    rows = {row[0][:2]: row for row in table_rows(page.text, "#trial-table")}
    assert _outcomes(page.text)[3] == "skipped" and "read by then" in rows["3."][5]
    assert "reads it after 10 min" in one(page.text, "#trial-output").get_text()


def test_a_channel_the_member_turned_off_or_cannot_get_says_so(client, operator, payment, run):
    db.session.execute(db.text("DELETE FROM push_subscriptions"))
    db.session.flush()
    page = run()
    assert "nowhere to send" in table_rows(page.text, "#trial-table")[2][5]


def test_the_draft_runs_when_chosen(client, operator, payment, run):
    service.save_draft(None, "payment", {"steps": [{"kind": "channel", "channel": "in_app"},
                                                   {"kind": "exit"}]})  # fmt: skip
    page = client.get(URL)
    assert one(page.text, "input[name=which]:checked")["value"] == "draft"
    ran = run(which="draft")
    assert _outcomes(ran.text) == {1: "shown", 2: "exits"}
    assert "The draft" in one(ran.text, "#trial-output").get_text()


@pytest.mark.parametrize(
    "fields, field, message",
    [
        ({"sample": "{"}, "sample", "Not JSON"),
        ({"sample": "[1, 2]"}, "sample", "a JSON object"),
        ({"sample": '{"a": "' + "x" * 20_000 + '"}'}, "sample", "20000"),
        ({"member": "nobody"}, "member", "No member has this external id."),
        ({"member": ""}, "member", "required"),
        ({"read_after": "-5"}, "read_after", "between"),
        ({"which": "draft"}, "which", "Not a valid choice"),  # there is no draft
    ],
)
def test_wrong_input_is_a_field_error_and_nothing_runs(client, operator, payment, fields, field, message, run):
    page = run(**fields)
    assert page.status_code == 422
    if field == "which":  # radios: the message under the group
        assert message in one(page.text, "fieldset .field__error").get_text()
    else:
        assert message in one(page.text, f"#{field}-error").get_text()
        assert one(page.text, f"#{field}")["aria-invalid"] == "true"
    assert not parse(page.text).select("#trial-table")


def test_nothing_is_sent_or_written(client, operator, payment, run):
    before = (db.session.query(Notification).count(), db.session.query(NotificationDelivery).count(),
              db.session.query(AuditEntry).count())  # fmt: skip
    run()
    after = (db.session.query(Notification).count(), db.session.query(NotificationDelivery).count(),
             db.session.query(AuditEntry).count())  # fmt: skip
    assert before == after


def test_the_post_needs_its_csrf_token(client, operator, payment):
    refused = client.post(URL, data={"sample": "{}", "member": "m-1", "which": "published"})
    assert refused.status_code == 400


def test_htmx_gets_the_page_whose_results_it_swaps(client, csrf, operator, payment):
    page = client.post(URL, data={"sample": '{"amount": 1}', "member": "m-1", "which": "published"},
                       headers={"HX-Request": "true", **csrf()})  # fmt: skip
    form = one(page.text, "#trial-form")
    assert (form["hx-target"], form["hx-select"]) == ("#trial-output", "#trial-output")
    assert "Test run done." in one(page.text, "#trial-status").get_text()


def test_payload_values_and_conditions_are_escaped(client, operator, payment, run):
    evil = "<script>alert(1)</script>"
    service.save_draft(None, "payment", {"steps": [{"kind": "channel", "channel": "in_app"},
        {"kind": "channel", "channel": "push", "condition": f'data.x == "{evil}"'}]})  # fmt: skip
    page = run(which="draft", sample='{"x": "' + evil + '", "amount": "<b>"}', member="m-1")
    assert page.status_code == 200
    assert "<script>alert(1)</script>" not in page.text
    assert evil in texts(page.text, "#trial-table code")[0]
    nope = run(member=evil)
    assert "<script>alert(1)" not in nope.text


def test_the_timeline_keeps_every_label_inside_the_picture(app):
    from app.console.workflow_timeline import WIDTH, timeline
    from app.workflows.definition import parse
    from app.workflows.simulate import Member, run

    workflow = parse(EXAMPLE)
    start = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
    member = Member("m-1", "en", "UTC", channels_on=frozenset({"in_app", "push", "sms", "email"}),
                    reachable=frozenset({"in_app", "push", "sms", "email"}))  # fmt: skip
    with app.test_request_context():
        chart = timeline(workflow, run(workflow, {"amount": 20000}, member, start), start)
    assert [r.outcome for r in chart.rows] == ["shown", "waits", "sent", "waits", "sent", "skipped"]
    assert [t.label for t in chart.ticks][:2] == ["at once", "+1 h"]
    for row in chart.rows:
        width = len(row.text) * 6.6
        left = row.text_x - width if row.anchor == "end" else row.text_x
        assert 0 <= left and left + width <= WIDTH, row
    assert chart.summary == "6 steps over 4 h 30 min. 3 go out."


def test_a_stored_workflow_that_no_longer_checks_is_an_error_not_a_crash(client, operator, payment, run):
    from app.models import WorkflowDraft

    db.session.add(WorkflowDraft(type="payment", steps={"steps": [{"kind": "channel", "channel": "pigeon"}]}))
    db.session.flush()
    page = run(which="draft")
    assert page.status_code == 422
    assert "This workflow no longer checks" in one(page.text, "fieldset .field__error").get_text()


@pytest.mark.parametrize(
    "code, words",
    [
        ("preference_off", "the member turned this channel off"),
        ("read", "read by then"),
        ("condition", "condition false"),
        ("condition: no such key: amount", "condition false: no such key: amount"),
        ("quiet_hours", "held for quiet hours"),
        ("no_sms_target", "nowhere to send"),
        ("something_new", "something_new"),  # a code without words yet is shown as it is
        (None, ""),
    ],
)
def test_reasons_read_as_words(app, code, words):
    from app.console.workflow_words import offset, reason_text

    with app.test_request_context():
        assert reason_text(code) == words
        assert (offset(0), offset(1800), offset(16200), offset(93784)) == (
            "at once",
            "+30 min",
            "+4 h 30 min",
            "+1 d 2 h",
        )
