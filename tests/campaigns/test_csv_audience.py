"""Uploaded audience lists: one id per line, optional header, bad lines reported with their numbers."""

from __future__ import annotations

import pytest

from app.campaigns import csv_audience
from app.campaigns.csv_audience import ListError, parse


def test_header_blank_lines_duplicates_and_quoting():
    parsed = parse(b'\xef\xbb\xbfexternal_id\r\nu-1\r\n\r\n u-2 \r\nu-1\r\n"u,3"\r\n')

    assert parsed.header is True
    assert parsed.ids == ["u-1", "u-2", "u,3"]  # a quoted comma is part of the id
    assert parsed.duplicates == 1
    assert parsed.bad_lines == []


def test_a_list_without_header_keeps_its_first_id():
    assert parse(b"a\nb\n").ids == ["a", "b"]
    assert parse(b"a\nb\n").header is False


def test_bad_rows_are_reported_with_line_numbers_and_left_out():
    data = b"id\nok-1\nx,y\nbad/slash\n" + b"z" * 300 + b"\nok-2\nctl\x01char\n"

    parsed = parse(data)

    assert parsed.ids == ["ok-1", "ok-2"]
    assert [(b.line, b.problem) for b in parsed.bad_lines] == [
        (3, "more than one value on the line (one external id per line)"),
        (4, "contains '/' or a control character"),
        (5, "longer than 255 characters"),
        (7, "contains '/' or a control character"),
    ]
    assert parsed.bad_lines[2].text == "z" * 120  # the echo is bounded


def test_report_is_json_friendly_and_bounded():
    parsed = parse("\n".join(f"id-{i}" for i in range(80)).encode() + b"\na,b\n")

    report = csv_audience.report(parsed, unknown=[f"id-{i}" for i in range(60)], recipients=20)

    assert report["recipients"] == 20 and report["unknown_count"] == 60 and report["bad_count"] == 1
    assert len(report["unknown"]) == csv_audience.REPORT_SAMPLE
    assert report["bad_lines"] == [
        {"line": 81, "text": "a,b", "problem": "more than one value on the line (one external id per line)"}
    ]


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "no external ids"),
        (b"\n\n", "no external ids"),
        (b"external_id\n", "no external ids"),
        (b"a,b\nc/d\n", "No line of the file holds a usable external id"),
        (b"caf\xe9\n", "not UTF-8"),
        (b"x" * (csv_audience.MAX_BYTES + 1), "larger than"),
    ],
)
def test_unusable_files_are_refused_as_a_whole(data, message):
    with pytest.raises(ListError, match=message):
        parse(data)


def test_too_many_ids_are_refused(monkeypatch):
    monkeypatch.setattr(csv_audience, "MAX_IDS", 3)

    with pytest.raises(ListError, match="more than 3 ids"):
        parse(b"a\nb\nc\nd\n")
