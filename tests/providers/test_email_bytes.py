"""email_bytes (built directly) against build_email (the stdlib's registry and folding): the same to a reader."""

from __future__ import annotations

from email import message_from_bytes, policy
from email.utils import parsedate_to_datetime

import pytest

from app.providers import Message, PermanentError
from app.providers.email_message import build_email, email_bytes, wire_bytes

FROM = "Hato <hato@example.com>"
LINK = "<https://hato.example.com/unsubscribe/" + "a1B2" * 60 + ">"
UNSUBSCRIBE = {"List-Unsubscribe": LINK, "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"}

SAMPLES = {
    "english": dict(
        to_name="Ada Lovelace",
        subject="Your report is ready",
        text="Line one\nLine <two>\n",
        html="<p>Line one<br>Line &lt;two&gt;</p>",
    ),
    "japanese": dict(
        to_name="山田 太郎",
        subject="レポートの準備ができました。ご確認ください — 締め切りは明日の午前九時です",
        text="山田様\n\nレポートの準備ができました。\n.で始まる行\n",
        html="<p>山田様</p>\n<p>レポート</p>",
    ),
    "mixed subject": dict(to_name="Zoë O'Brien", subject="Re: 週報 (week 12) ready ✓", text="ok", html="<b>ok</b>"),
    "quoted name": dict(to_name='Bob "The" Builder, Jr.', subject="=?utf-8?q?not_a_word?=", text="a\r\nb\rc\n"),
    "no name, text only": dict(to_name="", subject="Plain", text=""),
    "long english subject": dict(to_name="A", subject="word " * 150, text="x" * 998, html="<p>" + "y" * 990 + "</p>"),
    "long japanese name": dict(to_name="長い名前" * 20, subject="件名" * 60, text=("本文" * 100 + "\n") * 3),
    "header injection": dict(to_name="Eve\r\nBcc: x@example.com", subject="Hi\r\nBcc: x@example.com", text="t"),
}


def message(sample: dict, **extra) -> Message:
    fields = dict(delivery_id=7, channel="email", to="ada@example.com", headers=UNSUBSCRIBE) | sample | extra
    return Message(**fields)


def parse(data: bytes):
    return message_from_bytes(data, policy=policy.default)


def headers(msg) -> list[tuple[str, str]]:
    skip = {"date", "content-type"}
    return [(name, str(value)) for name, value in msg.items() if name.lower() not in skip]


def parts(msg) -> list[tuple]:
    leaves = [p for p in msg.walk() if not p.is_multipart()]
    return [(p.get_content_type(), p.get_content_charset(), headers(p), p.get_content()) for p in leaves]


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_reader_sees_what_the_stdlib_builder_writes(name):
    sample = message(SAMPLES[name])
    ours, message_id = email_bytes(sample, FROM, "hato.example.com")
    theirs = parse(wire_bytes(build_email(sample, FROM, "hato.example.com"), False))
    mine = parse(ours)

    assert headers(mine) == headers(theirs)
    assert message_id == theirs["Message-ID"] == "<delivery-7@hato.hato.example.com>"
    assert abs((parsedate_to_datetime(mine["Date"]) - parsedate_to_datetime(theirs["Date"])).total_seconds()) <= 2
    assert mine.get_content_type() == theirs.get_content_type()
    assert parts(mine) == parts(theirs)
    assert not mine.defects and all(not p.defects for p in mine.walk())
    assert all(not getattr(value, "defects", ()) for _, value in mine.items())
    assert all(len(line) <= 998 for line in ours.split(b"\r\n"))
    assert b"\nBcc" not in ours and ours.count(b"\r\n") == ours.count(b"\n")


def test_encoded_words_stay_within_rfc_2047_lengths():
    ours, _ = email_bytes(message(SAMPLES["long japanese name"]), FROM, "hato.example.com")
    subject = ours.split(b"\r\nSubject: ", 1)[1].split(b"\r\nDate: ", 1)[0]  # a name stays one word, as today
    words = [w for line in subject.split(b"\r\n") for w in line.split() if w.startswith(b"=?")]
    assert len(words) > 1 and max(len(w) for w in words) <= 75


def test_what_it_does_not_cover_goes_the_stdlib_way():
    assert email_bytes(message({"to": "山田@例え.jp", "subject": "s", "text": "t"}), FROM, "h") is None
    assert email_bytes(message({"subject": "s", "text": "x" * 999}), FROM, "h") is None
    assert email_bytes(message({"subject": "s", "text": "t", "headers": {"Subject": "again"}}), FROM, "h") is None


def test_a_malformed_recipient_is_permanent():
    with pytest.raises(PermanentError):
        email_bytes(message({"to": "not an address", "subject": "s", "text": "t"}), FROM, "h")
