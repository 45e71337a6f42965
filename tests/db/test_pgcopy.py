"""Binary COPY payloads built with numpy: they load into PostgreSQL as given, in order."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import Connection, text
from sqlalchemy.orm import Session

from db import pgcopy as pcp


@pytest.fixture
def conn(db_session: Session) -> Connection:
    return db_session.connection()


def _load(conn: Connection, columns: list[pcp.Column], ddl: str) -> list[tuple[object, ...]]:
    conn.execute(text(f"CREATE TEMP TABLE t ({ddl}) ON COMMIT DROP"))
    dbapi = conn.connection.driver_connection
    assert dbapi is not None
    names = ", ".join(part.split()[0] for part in ddl.split(","))
    with (
        dbapi.cursor() as cur,
        cur.copy(f"COPY t ({names}) FROM STDIN (FORMAT BINARY)") as copy,
    ):
        for block in pcp.copy_payload(columns, chunk_rows=7):
            copy.write(block)
    return [tuple(r) for r in conn.execute(text("SELECT * FROM t")).all()]


class TestCopyPayload:
    def test_mixed_nulls_and_lengths_keep_row_order(self, conn: Connection) -> None:
        """Rows with varying string lengths and NULLs arrive intact and in the order given."""
        rng = np.random.default_rng(1)
        n = 50
        words = pd.Series(
            rng.choice(np.array(["", "a", "ção", "longer text", None], dtype=object), n)
        )
        values = np.where(rng.random(n) < 0.3, np.nan, rng.normal(size=n))
        flags = rng.random(n) < 0.5
        small = rng.integers(-5, 5, n).astype(">i2")
        columns: list[pcp.Column] = [
            pcp.FixedColumn(np.arange(n, dtype=">i8")),
            pcp.text_column(words),
            pcp.float8_column(values),
            pcp.FixedColumn(small, flags),
            pcp.constant_text_column("fonte", n),
            pcp.null_column(n),
        ]
        rows = _load(conn, columns, "i int8, w text, v float8, s int2, src text, z text")
        assert [r[0] for r in rows] == list(range(n))
        assert [r[1] for r in rows] == [None if pd.isna(w) else w for w in words]
        got = np.array([np.nan if r[2] is None else r[2] for r in rows])
        np.testing.assert_array_equal(got, values)
        assert [r[3] for r in rows] == [
            None if f else int(v) for f, v in zip(flags, small, strict=True)
        ]
        assert {r[4] for r in rows} == {"fonte"}
        assert {r[5] for r in rows} == {None}

    def test_lengths_must_match(self) -> None:
        """Columns of different lengths are refused."""
        columns: list[pcp.Column] = [pcp.null_column(2), pcp.null_column(3)]
        with pytest.raises(ValueError, match="números de linhas"):
            list(pcp.copy_rows(columns))


class TestTextColumn:
    def test_null_empty_and_non_strings(self) -> None:
        """None is NULL (-1), '' has length 0, numbers are written as their text."""
        col = pcp.text_column(pd.Series(["ab", None, "", 7], dtype=object))
        assert col.lengths().tolist() == [2, -1, 0, 1]
        assert col.gather()[[0, 3]].tolist() == [b"ab", b"7"]
