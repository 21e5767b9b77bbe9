"""Keyset pagination (app/pagination.py): cursors survive a round trip, garbage means the first page."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.pagination import MAX_ID, Cursor, Page, id_cursor, parse_id_cursor, time_cursor

T0 = datetime(2026, 9, 1, 12, 0, tzinfo=UTC)


def test_cursor_round_trip_and_rejects_garbage():
    position = Cursor(T0 + timedelta(microseconds=123), 42)
    assert Cursor.decode(position.encode()) == position
    naive = Cursor(datetime(2026, 1, 1), 1).encode()
    for token in ("", None, "!!!", "bm90IGpzb24", "WzFd", naive):
        assert Cursor.decode(token) is None


def test_a_page_keeps_limit_rows_and_points_after_the_last_one_kept():
    rows = [{"id": n, "created_at": T0 - timedelta(minutes=n)} for n in range(1, 5)]  # limit 3, fetched 4
    page = Page.of(rows, 3, time_cursor())
    assert [r["id"] for r in page.rows] == [1, 2, 3]
    assert Cursor.decode(page.next_cursor) == Cursor(rows[2]["created_at"], 3)
    assert Page.of(rows[:3], 3, time_cursor()).next_cursor is None  # no extra row: the last page
    assert Page.of([], 3, id_cursor) == Page([], None)
    assert Page.of(rows, 2, id_cursor).next_cursor == "2"


def test_id_cursors_are_positive_bigints():
    assert parse_id_cursor("17") == 17
    for text in (None, "", "x", "0", "-3", "1.5", str(MAX_ID + 1)):
        assert parse_id_cursor(text) is None
    assert parse_id_cursor(str(MAX_ID)) == MAX_ID
