"""The file import loses nothing the HTTP ingest keeps: the same microsecond rule, the same cap.

The database's key is (vehicle, microsecond). A file's fixes less than 1 µs apart, or repeating a
stored fix's microsecond with other values, were dropped by ``copy_fixes`` as "already stored";
a quarantined cell of megabytes went whole into ``rejected_fixes``.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import Connection, text
from sqlalchemy.orm import Session

import db.tracking.store
from db.tracking.store import MAX_RAW_CHARS, copy_rejected, store_fixes
from tracking.ingest import read_pings, reread_rejected
from tracking.validate import merge_microseconds, validate_pings

NOW = pd.Timestamp("2026-11-30T12:00:00Z")
HEADER = "vehicle_id,timestamp,lat,lon,speed_kmh\n"


@pytest.fixture
def conn(db_session: Session) -> Connection:
    return db_session.connection()


def _pings(body: str) -> pd.DataFrame:
    raw = pd.read_csv(io.StringIO(HEADER + body), dtype=str, keep_default_na=False)
    raw["row"] = np.arange(1, len(raw) + 1)
    pings, rejected = validate_pings(raw, now=NOW)
    assert rejected.empty
    return pings


def _stored(conn: Connection, vehicle: str) -> list[tuple[Any, ...]]:
    query = (
        "SELECT (extract(epoch FROM ts) * 1000000)::int8 % 1000000, lat, lon, speed_kmh "
        "FROM fixes WHERE vehicle_id = :v ORDER BY ts"
    )
    return [tuple(r) for r in conn.execute(text(query), {"v": vehicle})]


def _verdicts(refused: pd.DataFrame) -> list[tuple[int, str]]:
    return list(zip(refused["row"].tolist(), refused["reason"].tolist(), strict=True))


class TestMergeMicroseconds:
    def test_earliest_row_kept_the_others_judged_by_their_values(self) -> None:
        """Of fixes in one microsecond, the earliest row stays; equal values duplicate, others
        conflict; a fix in the next microsecond stays."""
        pings = _pings(
            "V1,2026-11-30T10:00:00.000000400Z,-30.04,-51.23,20\n"
            "V1,2026-11-30T10:00:00.000000100Z,-30.03,-51.22,10\n"
            "V1,2026-11-30T10:00:00.000000700Z,-30.04,-51.23,20\n"
            "V1,2026-11-30T10:00:00.000001Z,-30.04,-51.23,20\n"
            "V2,2026-11-30T10:00:00.000000100Z,-30.03,-51.22,10\n"
        )
        kept, refused = merge_microseconds(pings)
        assert sorted(kept["row"].tolist()) == [1, 4, 5]
        assert _verdicts(refused) == [(2, "conflicting_duplicate"), (3, "duplicate")]

    def test_whole_microseconds_are_left_alone(self) -> None:
        """Fixes at whole microseconds come back as they are, nothing refused."""
        pings = _pings("V1,2026-11-30T10:00:00.000001Z,-30.03,-51.22,\n")
        kept, refused = merge_microseconds(pings)
        assert kept is pings and refused.empty and "reason" in refused.columns

    def test_speed_flag_of_the_next_fix_is_computed_again(self) -> None:
        """A fix flagged for its step from a refused fix is judged from the kept one."""
        pings = _pings(
            "V1,2026-11-30T10:00:00.0000001Z,-30.03,-51.22,\n"
            "V1,2026-11-30T10:00:00.0000005Z,-29.90,-51.22,\n"  # 14 km away: refused
            "V1,2026-11-30T10:00:15Z,-30.03,-51.22,\n"
        )
        assert pings["speed_flag"].tolist() == [False, True, True]
        kept, _ = merge_microseconds(pings)
        assert kept["row"].tolist() == [1, 3]
        assert kept["speed_flag"].tolist() == [False, False]


class TestStoreFixes:
    def test_rows_300_ns_apart_with_other_values_conflict(self, conn: Connection) -> None:
        """Two rows 300 ns apart with other positions: the first stored, the second refused."""
        pings = _pings(
            "PAR_A,2026-11-30T10:00:00.000000100Z,-30.03,-51.22,10\n"
            "PAR_A,2026-11-30T10:00:00.000000400Z,-30.04,-51.23,20\n"
        )
        done = store_fixes(conn, pings, source="a.csv")
        assert (done.inserted, done.existing) == (1, 0)
        assert _verdicts(done.refused) == [(2, "conflicting_duplicate")]
        assert _stored(conn, "PAR_A") == [(0, -30.03, -51.22, 10.0)]

    def test_rows_300_ns_apart_with_equal_values_duplicate(self, conn: Connection) -> None:
        """The same values 300 ns apart: one fix stored, the later row a duplicate."""
        pings = _pings(
            "PAR_B,2026-11-30T10:00:00.000000100Z,-30.03,-51.22,10\n"
            "PAR_B,2026-11-30T10:00:00.000000400Z,-30.03,-51.22,10\n"
        )
        done = store_fixes(conn, pings, source="b.csv")
        assert (done.inserted, done.existing) == (1, 0)
        assert _verdicts(done.refused) == [(2, "duplicate")]

    def test_stored_microsecond_with_other_values_conflicts(self, conn: Connection) -> None:
        """A later import repeating a stored (vehicle, µs) with other values is refused; with
        the same values it is already there; the stored fix stays."""
        store_fixes(
            conn, _pings("PAR_C,2026-11-30T10:00:00.000001Z,-30.03,-51.22,10\n"), source="1"
        )
        again = _pings(
            "PAR_C,2026-11-30T10:00:00.000001Z,-30.05,-51.25,30\n"
            "PAR_C,2026-11-30T10:00:05Z,-30.03,-51.22,10\n"
        )
        done = store_fixes(conn, again, source="2")
        assert (done.inserted, done.existing) == (1, 0)
        assert _verdicts(done.refused) == [(1, "conflicting_duplicate")]
        same = store_fixes(conn, again.iloc[[1]], source="3")
        assert (same.inserted, same.existing, len(same.refused)) == (0, 1, 0)
        assert _stored(conn, "PAR_C") == [(1, -30.03, -51.22, 10.0), (0, -30.03, -51.22, 10.0)]

    @pytest.mark.parametrize("path", ["race", "wide_span"])
    def test_staged_paths_find_the_conflicts_too(
        self, conn: Connection, monkeypatch: pytest.MonkeyPatch, path: str
    ) -> None:
        """Stored keys missed by the pre-check (a concurrent import) or a span too wide for it
        go through the staging table: conflicts are still found, nothing is counted twice."""
        store_fixes(conn, _pings("PAR_D,2026-11-30T10:00:00Z,-30.03,-51.22,10\n"), source="1")
        if path == "race":
            monkeypatch.setattr(db.tracking.store, "_any_stored", lambda *args: False)
        else:
            monkeypatch.setattr(db.tracking.store, "_keys_fit", lambda *args: False)
        pings = _pings(
            "PAR_D,2026-11-30T10:00:00Z,-30.04,-51.22,10\n"
            "PAR_D,2026-11-30T10:00:15Z,-30.03,-51.22,10\n"
        )
        done = store_fixes(conn, pings, source="2")
        assert (done.inserted, done.existing) == (1, 0)
        assert _verdicts(done.refused) == [(1, "conflicting_duplicate")]

    def test_every_fix_is_accounted_for(self, conn: Connection) -> None:
        """inserted + existing + refused is the number of fixes given, on a mixed batch."""
        store_fixes(conn, _pings("PAR_E,2026-11-30T10:00:00Z,-30.03,-51.22,\n"), source="1")
        pings = _pings(
            "PAR_E,2026-11-30T10:00:00Z,-30.03,-51.22,\n"  # stored, same values
            "PAR_E,2026-11-30T10:00:00.0000003Z,-30.03,-51.22,\n"  # its µs, same values
            "PAR_E,2026-11-30T10:00:01.0000001Z,-30.03,-51.22,\n"
            "PAR_E,2026-11-30T10:00:01.0000009Z,-30.02,-51.22,\n"  # conflicts in the file
            "PAR_E,2026-11-30T10:00:02Z,-30.03,-51.22,\n"
        )
        done = store_fixes(conn, pings, source="2")
        assert done.inserted + done.existing + len(done.refused) == len(pings)
        assert (done.inserted, done.existing) == (2, 1)
        assert _verdicts(done.refused) == [(2, "duplicate"), (4, "conflicting_duplicate")]


class TestParityWithHttpIngest:
    def test_same_fixes_and_verdicts_as_the_live_ingest(self, conn: Connection) -> None:
        """The same rows sent to the HTTP ingest and imported from a file: the same fixes stored
        and the same verdict for each row (a file's duplicate row is quarantined, as validation
        does with identical rows)."""
        from api.ingest import ingest_batch

        second = "2026-11-30T11:00:0"
        rows: list[dict[str, Any]] = [
            {"timestamp": f"{second}0.0000004Z", "lat": -30.04, "lon": -51.23},
            {"timestamp": f"{second}0.0000001Z", "lat": -30.03, "lon": -51.22},
            {"timestamp": f"{second}0.0000007Z", "lat": -30.04, "lon": -51.23},
            {"timestamp": f"{second}1Z", "lat": -30.03, "lon": -51.22, "speed_kmh": 5.0},
            {"timestamp": f"{second}2Z", "lat": -30.03, "lon": -51.22},
        ]
        first = [rows[3] | {"speed_kmh": 6.0}, rows[4]]  # stored before: one other, one same
        live = ingest_batch(conn=conn, rows=first, vehicle_id="PAR_H", source="h", now=NOW)
        assert [r.status for r in live] == ["accepted"] * 2
        answers = ingest_batch(conn=conn, rows=rows, vehicle_id="PAR_H", source="h", now=NOW)
        http = [(r.status, r.reason) for r in answers]

        def csv_line(vehicle: str, r: dict[str, Any]) -> str:
            speed = r.get("speed_kmh", "")
            return f"{vehicle},{r['timestamp']},{r['lat']},{r['lon']},{speed}\n"

        store_fixes(conn, _pings("".join(csv_line("PAR_F", r) for r in first)), source="f1")
        pings = _pings("".join(csv_line("PAR_F", r) for r in rows))
        done = store_fixes(conn, pings, source="f2")
        refused = dict(_verdicts(done.refused))
        sources = dict(
            conn.execute(
                text(
                    "SELECT (extract(epoch FROM ts) * 1000000)::int8, source FROM fixes "
                    "WHERE vehicle_id = 'PAR_F'"
                )
            ).all()
        )
        instant_us = dict(
            zip(pings["row"], pings["timestamp"].astype("int64") // 1000, strict=True)
        )
        file = [
            ("rejected", refused[i])
            if refused.get(i) == "conflicting_duplicate"
            else ("duplicate", None)
            if i in refused or sources[instant_us[i]] == "f1"
            else ("accepted", None)
            for i in range(1, len(rows) + 1)
        ]
        assert http == [
            ("accepted", None),
            ("rejected", "conflicting_duplicate"),
            ("duplicate", None),
            ("rejected", "conflicting_duplicate"),
            ("duplicate", None),
        ]
        assert file == http
        assert _stored(conn, "PAR_F") == _stored(conn, "PAR_H")


class TestRereadRejected:
    def test_cells_as_written_after_a_malformed_row(self, tmp_path: Path) -> None:
        """Refused rows come back with their cells as written and their data row, a malformed
        record before them notwithstanding."""
        path = tmp_path / "p.csv"
        path.write_text(
            HEADER + "V1,1764496800,-30.03,-51.22,10\n"
            "V1,oops\n"
            "V1,2026-11-30T10:00:00.0000004Z,-30.040,-51.23,20\n",
            encoding="utf-8",
        )
        pings, rejected = read_pings(path, now=NOW)
        assert _verdicts(rejected) == [(2, "malformed_row")]
        refused = pd.DataFrame({"row": [3], "reason": ["conflicting_duplicate"]})
        again = reread_rejected(path, refused, chunk_rows=1)
        assert again.to_dict("records") == [
            {
                "row": 3,
                "reason": "conflicting_duplicate",
                "vehicle_id": "V1",
                "timestamp": "2026-11-30T10:00:00.0000004Z",
                "lat": "-30.040",
                "lon": "-51.23",
                "speed_kmh": "20",
            }
        ]
        assert list(again.columns) == list(rejected.columns)


class TestQuarantineCap:
    def test_a_two_megabyte_cell_is_cut(self, conn: Connection) -> None:
        """A rejected row's 2 MB cell (and a long column name) is kept as 1,000 characters."""
        rejected = pd.DataFrame(
            {
                "row": [1],
                "reason": ["invalid_speed"],
                "speed_kmh": ["x" * 2_000_000],
                "n" * 5000: ["y"],
            }  # fmt: skip
        )
        assert copy_rejected(conn, rejected, source="cap.csv") == 1
        raw = conn.execute(
            text("SELECT raw FROM rejected_fixes WHERE source = 'cap.csv'")
        ).scalar_one()
        assert raw == {"speed_kmh": "x" * MAX_RAW_CHARS, "n" * MAX_RAW_CHARS: "y"}

    def test_one_limit_for_files_and_devices(self) -> None:
        """The HTTP ingest caps with the same constant the store applies."""
        from api import ingest

        assert ingest.MAX_RAW_CHARS is MAX_RAW_CHARS == 1000
