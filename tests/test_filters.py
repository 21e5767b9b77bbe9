"""A log's filters as SQL (app/filters.py): empty means any, windows are half-open, keyset pages cover each row once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from app.extensions import db
from app.filters import Where, keyset_page
from app.pagination import Cursor, id_cursor, time_cursor

T0 = datetime(2026, 9, 1, 12, 0, tzinfo=UTC)
ROWS_SQL = "SELECT id, created_at, label FROM filter_rows {where} ORDER BY {order} LIMIT :limit"


def _table(labels: list[str]) -> None:
    """A temporary table of rows one minute apart (ids 1, 2, …; row n at T0 + n minutes)."""
    db.session.execute(sa.text("CREATE TEMP TABLE filter_rows (id bigint, created_at timestamptz, label text)"))
    db.session.execute(
        sa.text("INSERT INTO filter_rows VALUES (:id, :at, :label)"),
        [{"id": n, "at": T0 + timedelta(minutes=n), "label": label} for n, label in enumerate(labels, 1)],
    )


def _ids(where: Where, order: str = "id DESC", limit: int = 100) -> list[int]:
    page = keyset_page(ROWS_SQL.format(where=where.sql, order=order), where.params, limit, id_cursor)
    return [row["id"] for row in page.rows]


def test_empty_values_add_nothing():
    where = Where().equal("label", "label", "").window("created_at", None, None).before_id("id", None)
    assert (where.sql, where.params) == ("", {})
    assert Where().before_time("created_at", "id", None).sql == ""


def test_equal_and_a_half_open_window_narrow_with_bound_parameters():
    _table(["a", "b", "a", "a'; DROP TABLE filter_rows; --"])
    assert _ids(Where().equal("label", "label", "a")) == [3, 1]
    # The value is a parameter, never SQL text.
    assert _ids(Where().equal("label", "label", "a'; DROP TABLE filter_rows; --")) == [4]
    # since <= created_at < until: row 2 is in, row 3 (at until) is out.
    window = Where().window("created_at", T0 + timedelta(minutes=2), T0 + timedelta(minutes=3))
    assert _ids(window) == [2]
    assert window.params == {"since": T0 + timedelta(minutes=2), "until": T0 + timedelta(minutes=3)}
    assert _ids(Where("label = 'a'").window("created_at", T0 + timedelta(minutes=2), None)) == [3]


def test_id_keyset_pages_cover_every_row_once():
    _table(["x"] * 7)
    seen, cursor = [], None
    while True:
        where = Where().equal("label", "label", "x").before_id("id", cursor)
        page = keyset_page(ROWS_SQL.format(where=where.sql, order="id DESC"), where.params, 3, id_cursor)
        seen += [row["id"] for row in page.rows]
        if page.next_cursor is None:
            break
        cursor = int(page.next_cursor)
    assert seen == [7, 6, 5, 4, 3, 2, 1]


def test_time_keyset_pages_cover_every_row_once():
    _table(["y"] * 5)
    seen, cursor = [], None
    while True:
        where = Where().before_time("created_at", "id", Cursor.decode(cursor))
        sql = ROWS_SQL.format(where=where.sql, order="created_at DESC, id DESC")
        page = keyset_page(sql, where.params, 2, time_cursor())
        seen += [row["id"] for row in page.rows]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == [5, 4, 3, 2, 1]


def test_parts_are_copies_for_statements_that_place_them_themselves():
    where = Where("a = 1").equal("b", "b", 2)
    conditions, params = where.parts()
    conditions.append("c = 3")
    params["c"] = 3
    assert (where.conditions, where.params) == (["a = 1", "b = :b"], {"b": 2})
