"""The delivery log shows what an SMS provider reported last, in the operator's language (issue 29 item 3)."""

from __future__ import annotations

import pytest

from tests.factories import UserFactory
from tests.sms.conftest import member
from tests.support.html import parse, texts


@pytest.mark.parametrize(
    "language, undelivered, delivered", [("en", "undelivered", "delivered"), ("ja", "未達", "配信済み")]
)
def test_the_log_and_the_delivery_show_the_final_state_with_its_error(client, login_as, twilio_hook, sent_sms,
                                                                       language, undelivered, delivered):  # fmt: skip
    failed, fine = sent_sms(member()), sent_sms(member(phone="+819011112222"))
    twilio_hook.status(failed.provider_message_id, "sent")
    twilio_hook.status(failed.provider_message_id, "undelivered", 30005)
    twilio_hook.status(fine.provider_message_id, "delivered")
    login_as(UserFactory(role="operator"))
    headers = {"Accept-Language": language}

    page = parse(client.get(f"/console/deliveries/{failed.id}", headers=headers).get_data(as_text=True))
    assert texts(page, "#provider-status")[0].startswith(undelivered)
    timeline = page.select("#attempts > li")
    assert [texts(item, ".tag")[0] for item in timeline][-1] == undelivered
    error = texts(timeline[-1], ".ops-timeline__error")[0]
    assert "30005" in error and "5678" in error and "+819012345678" not in error  # the number masked

    listing = parse(client.get("/console/deliveries?channel=sms", headers=headers).get_data(as_text=True))
    assert sorted(texts(listing, ".provider-status")) == sorted([undelivered, delivered])
