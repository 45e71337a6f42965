"""Database reads of the stands room and the supervisor's view on stored fixes (real PostGIS)."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest
from factories import ORIGIN, offset_m
from sqlalchemy import text
from sqlalchemy.orm import Session

from db.stands.queries import (
    licence_frame,
    licensee_people,
    operation_sightings,
    overdue_stands,
    stands_frame,
    supervisor_contacts,
    supervisor_intruders,
    supervisor_presence,
    supervisor_queue,
    supervisors_frame,
    visits_from_fixes,
)
from db.stands.registry import (
    create_stand,
    elect_supervisor,
    end_supervisor_term,
    grant_licence,
    homologate_supervisor,
)
from db.tracking.store import H3_RESOLUTION
from geo.h3 import latlng_to_cells
from stands._errors import NaiveTimestampError, StandScopeError, ThresholdError
from stands.licences import LICENCE_COLUMNS

T0 = dt.datetime(2024, 3, 4, 12, 0, tzinfo=dt.UTC)  # 09:00 in Porto Alegre
DAY = dt.date(2024, 3, 4)
S2_NORTH_M = 500.0


def _square(north_m: float, half_m: float = 30.0) -> dict:
    (s, w), (n, e) = offset_m(north_m - half_m, -half_m), offset_m(north_m + half_m, half_m)
    return {"type": "Polygon", "coordinates": [[[w, s], [e, s], [e, n], [w, n], [w, s]]]}


def _fixes(
    session: Session, vehicle: str, points: list[tuple[float, float, str]], *, cell: bool = True
) -> None:
    """Store fixes (minutes after T0, metres north of ORIGIN, meter), with their place cell as
    the product stores it (``cell=False``: without, as a row written by other means)."""
    for minute, north, meter in points:
        lat, lon = offset_m(north, 0.0)
        h3 = latlng_to_cells([lat], [lon], resolution=H3_RESOLUTION).view("int64")[0]
        session.execute(
            text(
                "INSERT INTO fixes (vehicle_id, ts, lat, lon, geom, meter, h3_r9, speed_flag, "
                "source) VALUES (:v, :ts, :lat, :lon, ST_Point(:lon, :lat, 4326), :m, :h3, "
                "false, 'test')"
            ),
            {"v": vehicle, "ts": T0 + dt.timedelta(minutes=minute), "lat": lat, "lon": lon,
             "m": meter, "h3": int(h3) if cell else None},
        )  # fmt: skip


def _run(minutes: range, north: float, meter: str = "free") -> list[tuple[float, float, str]]:
    return [(m, north, meter) for m in minutes]


@pytest.fixture
def db(db_session: Session) -> Session:
    """Stands S1 (at ORIGIN) and S2 (500 m north), licensees, people and one morning of fixes.

    A1 (S1's licensee) waits at S1 09:00–09:20 then drives off; X9 (no licence) waits at S1
    09:05–09:25 and boards 1.5 minutes after leaving, 20 m from S1's edge; B1 and B2 wait at S2
    (B1 licensed there).
    """
    s = db_session
    s.execute(
        text(
            "INSERT INTO permit_holders (holder_id, name, address, phone) OVERRIDING SYSTEM VALUE "
            "VALUES (9001, 'Ana Souza', 'Rua A, 1', '51 9000'), "
            "(9002, 'Bruno Lima', 'Rua B, 2', '51 9111');"
            "INSERT INTO vehicles (vehicle_id, prefixo, holder_id) VALUES "
            "('A1', 'A1', 9001), ('B1', 'B1', 9002), ('B2', 'B2', NULL), ('X9', 'X9', NULL);"
            "INSERT INTO drivers (driver_id, name) VALUES ('D1', 'Caio Auxiliar'), "
            "('D2', 'Dora Antiga'), ('D3', 'Eva Titular'), ('D4', 'Fábio Titular');"
            "INSERT INTO driver_assignments (driver_id, vehicle_id, role, valid_from, valid_until) "
            "VALUES ('D1', 'A1', 'auxiliar', '2024-01-01', NULL), "
            "('D2', 'A1', 'auxiliar', '2023-01-01', '2023-12-31'), "
            "('D3', 'B2', 'autorizatario_condutor', '2024-01-01', NULL), "
            "('D4', 'A1', 'autorizatario_condutor', '2024-01-01', NULL)"
        )
    )
    create_stand(session=s, stand_id="S1", actor="t", area=_square(0), kind="fixo", capacity=1)
    create_stand(
        session=s, stand_id="S2", actor="t", area=_square(S2_NORTH_M), kind="fixo", capacity=2
    )
    grant_licence(session=s, stand_id="S1", vehicle_id="A1", valid_from=DAY, actor="t")
    grant_licence(session=s, stand_id="S2", vehicle_id="B1", valid_from=DAY, actor="t")
    _fixes(s, "A1", _run(range(0, 21), 0) + _run(range(21, 40), 300))
    _fixes(s, "X9", _run(range(5, 26), 0) + [(26, 45, "free"), (26.5, 50, "occupied")])
    _fixes(s, "X9", [(27, 250, "occupied")])
    _fixes(s, "B1", _run(range(0, 31), S2_NORTH_M) + [(200, 2000, "free")])
    _fixes(s, "B2", _run(range(0, 31), S2_NORTH_M))
    return s


class TestStandsFrame:
    def test_active_stands_with_attributes(self, db: Session) -> None:
        """Stands come back as a GeoDataFrame in EPSG:4326, retired ones only on request."""
        db.execute(text("UPDATE stands SET retired_at = now() WHERE stand_id = 'S2'"))
        frame = stands_frame(session=db)
        assert frame["stand_id"].tolist() == ["S1"] and frame.crs.to_epsg() == 4326
        assert frame["capacity"].dtype == "Int64" and frame.geometry.iloc[0].contains(
            __import__("shapely").Point(ORIGIN[1], ORIGIN[0])
        )
        assert len(stands_frame(session=db, include_retired=True)) == 2


class TestLicenceFrame:
    def test_licence_frame_contract(self, db: Session) -> None:
        """Licences come back in the licence-frame contract with their ids."""
        frame = licence_frame(session=db, stand_ids=["S1"])
        assert list(frame.columns) == ["licence_id", *LICENCE_COLUMNS]
        assert frame["vehicle_id"].tolist() == ["A1"]
        assert frame["valid_from"].tolist() == [pd.Timestamp(DAY)]
        assert frame["valid_until"].isna().all() and frame["valid_from"].dtype == "datetime64[ns]"


class TestSupervisorsFrame:
    def test_history(self, db: Session) -> None:
        """Every record of the stand, with dates as datetime64."""
        elect_supervisor(session=db, stand_id="S1", person_name="Ana", elected_on=DAY,
                         minutes_ref="ata", actor="t")  # fmt: skip
        frame = supervisors_frame(session=db, stand_ids=["S1"])
        assert frame["person_name"].tolist() == ["Ana"]
        assert frame["elected_on"].tolist() == [pd.Timestamp(DAY)]
        assert frame["homologated_on"].isna().all()
        assert supervisors_frame(session=db, stand_ids=["S2"]).empty


class TestOverdueStands:
    def test_lapsed_91_days(self, db: Session) -> None:
        """S1's supervisor left 91 days before as_of: S1 is overdue and would lose A1."""
        rec = elect_supervisor(
            session=db, stand_id="S1", person_name="Ana", elected_on=dt.date(2023, 1, 1),
            minutes_ref="ata", actor="t",
        )  # fmt: skip
        homologate_supervisor(session=db, supervisor_id=rec.supervisor_id,
                              on=dt.date(2023, 1, 10), actor="t")  # fmt: skip
        as_of = dt.date(2024, 6, 1)
        end_supervisor_term(session=db, supervisor_id=rec.supervisor_id,
                            until=as_of - dt.timedelta(days=91), actor="t")  # fmt: skip
        out = overdue_stands(session=db, as_of=as_of)
        (row,) = out.to_dict(orient="records")
        assert (row["stand_id"], row["days_without"], row["prefixos"]) == ("S1", 91, ("A1",))
        assert row["name"] is None
        assert overdue_stands(session=db, as_of=as_of - dt.timedelta(days=1)).empty


class TestVisitsFromFixes:
    def test_visits_of_the_stands_only(self, db: Session) -> None:
        """Visits at S1: A1 09:00–09:20 and X9 09:05–09:25, boarded 1.5 min after leaving,
        20 m from the stand's edge."""
        visits = visits_from_fixes(session=db, stand_ids=["S1"], start=T0,
                                   end=T0 + dt.timedelta(hours=4))  # fmt: skip
        assert visits["stand_id"].unique().tolist() == ["S1"]
        got = visits[["vehicle_id", "arrived_at", "departed_at", "boarded"]].values.tolist()
        assert got == [
            ["A1", pd.Timestamp(T0), pd.Timestamp(T0 + dt.timedelta(minutes=20)), False],
            ["X9", pd.Timestamp(T0 + dt.timedelta(minutes=5)),
             pd.Timestamp(T0 + dt.timedelta(minutes=25)), True],
        ]  # fmt: skip
        assert pd.Timestamp(visits.attrs["latest"]["A1"]) == T0 + dt.timedelta(minutes=39)
        assert visits["boarding_distance_m"].iloc[1] == pytest.approx(20.0, abs=0.5)

    def test_a_fix_in_overlapping_stands_visits_each(self, db: Session) -> None:
        """S1b overlaps S1's northern half: A1's waits there are visits to both stands, and
        X9's to both, at the same instants."""
        create_stand(session=db, stand_id="S1b", actor="t", area=_square(20, 25), kind="fixo",
                     capacity=1)  # fmt: skip
        visits = visits_from_fixes(session=db, stand_ids=["S1", "S1b"], start=T0,
                                   end=T0 + dt.timedelta(hours=4))  # fmt: skip
        got = visits.groupby("stand_id")["vehicle_id"].apply(sorted).to_dict()
        assert got == {"S1": ["A1", "X9"], "S1b": ["A1", "X9"]}
        pairs = visits.pivot(index="vehicle_id", columns="stand_id", values="arrived_at")
        assert (pairs["S1"] == pairs["S1b"]).all()

    def test_far_fixes_do_not_join_visits(self, db: Session) -> None:
        """A vehicle away for an hour (fixes not read) comes back as a second visit."""
        _fixes(db, "A1", _run(range(100, 110), 0))
        visits = visits_from_fixes(session=db, stand_ids=["S1"], start=T0,
                                   end=T0 + dt.timedelta(hours=4))  # fmt: skip
        assert (visits["vehicle_id"] == "A1").sum() == 2

    def test_fixes_read_are_those_near_an_inside_fix(self, db: Session) -> None:
        """Of a vehicle seen inside, the fixes within the grace before and after an inside fix
        are read (an approach, a departure), and no others."""
        _fixes(
            db, "C3", _run(range(60, 80), 300) + _run(range(80, 85), 0) + _run(range(85, 99), 300)
        )
        assert _minutes_read(db, "C3") == list(range(75, 90))

    def test_two_stays_read_apart(self, db: Session) -> None:
        """Two stays 16 min apart (more than twice the grace): the fixes between them, farther
        than the grace from both, are not read."""
        _fixes(db, "C3", [(m, 0 if 60 <= m < 65 or 80 <= m < 85 else 300, "free")
                          for m in range(50, 96)])  # fmt: skip
        assert _minutes_read(db, "C3") == [*range(55, 70), *range(75, 90)]

    def test_fixes_without_their_cell_are_tested(self, db: Session) -> None:
        """A fix stored without its place cell (a row written by other means) is still tested
        against the stands: the same visit as with the cell."""
        _fixes(db, "C3", _run(range(60, 70), 0), cell=False)
        assert _minutes_read(db, "C3") == list(range(60, 70))
        visits = visits_from_fixes(session=db, stand_ids=["S1"], start=T0,
                                   end=T0 + dt.timedelta(hours=4))  # fmt: skip
        (c3,) = visits.loc[visits["vehicle_id"] == "C3", "arrived_at"]
        assert c3 == pd.Timestamp(T0 + dt.timedelta(minutes=60))

    def test_naive_bounds_refused(self, db: Session) -> None:
        """Naive bounds are refused."""
        with pytest.raises(NaiveTimestampError):
            visits_from_fixes(session=db, stand_ids=["S1"], start=T0.replace(tzinfo=None), end=T0)


def _minutes_read(db: Session, vehicle: str) -> list[float]:
    """Minutes after T0 of ``vehicle``'s fixes the visits read at S1 (grace 5 min)."""
    from db.stands.queries import _VISIT_FIXES_SQL, place_cells

    rows = db.execute(
        text(_VISIT_FIXES_SQL),
        {"ids": ["S1"], "lo": T0, "hi": T0 + dt.timedelta(hours=4),
         "keep": dt.timedelta(minutes=5),
         "cells": place_cells(stands_frame(session=db, stand_ids=["S1"]))},
    ).all()  # fmt: skip
    return [(r.ts - T0).total_seconds() / 60 for r in rows if r.vehicle_id == vehicle]


class TestOperationSightings:
    def test_first_and_last_fix_per_local_day(self, db: Session) -> None:
        """B1's first and last fix of the local day; vehicles not asked for are not read."""
        frame = operation_sightings(session=db, vehicle_ids=["B1"], start=DAY, end=DAY)
        assert frame["vehicle_id"].unique().tolist() == ["B1"]
        assert frame["timestamp"].tolist() == [
            pd.Timestamp(T0), pd.Timestamp(T0 + dt.timedelta(minutes=200)),
        ]  # fmt: skip


class TestLicenseePeople:
    def test_holder_and_current_auxiliaries(self, db: Session) -> None:
        """A1's autorizatária with contact (its titular driver is not a second one), and its
        current auxiliary (a former one is not)."""
        frame = licensee_people(session=db, vehicle_ids=["A1"], on=DAY)
        assert sorted(map(tuple, frame[["role", "name", "phone"]].values.tolist())) == [
            ("autorizatario", "Ana Souza", "51 9000"), ("auxiliar", "Caio Auxiliar", None),
        ]  # fmt: skip

    def test_without_a_permit_holder_the_titular_driver_is_the_autorizatario(
        self, db: Session
    ) -> None:
        """B2 has no permit holder: its driver linked as autorizatário condutor is named."""
        frame = licensee_people(session=db, vehicle_ids=["B2"], on=DAY)
        assert frame[["role", "name", "phone"]].values.tolist() == [
            ["autorizatario", "Eva Titular", None]
        ]


class TestSupervisorQueue:
    def test_queue_now(self, db: Session) -> None:
        """At 09:15 S1 has A1 then X9 (unlicensed); at 09:23 only X9; S2's vehicles never."""
        now = T0 + dt.timedelta(minutes=15)
        out = supervisor_queue(session=db, stand_ids=["S1"], now=now)
        assert out[["position", "vehicle_id"]].values.tolist() == [[1, "A1"], [2, "X9"]]
        assert out["licensed"].tolist() == [True, False]
        later = supervisor_queue(session=db, stand_ids=["S1"], now=T0 + dt.timedelta(minutes=23))
        assert later["vehicle_id"].tolist() == ["X9"]

    def test_latest_fixes_on_and_between_whole_seconds(self, db: Session) -> None:
        """A1's latest fix falls between two seconds (09:15:15.5), X9's on one (09:15:00): the
        queue is read all the same."""
        _fixes(db, "A1", [(15 + 15.5 / 60, 0, "free")])
        out = supervisor_queue(session=db, stand_ids=["S1"], now=T0 + dt.timedelta(minutes=15.5))
        assert out[["position", "vehicle_id"]].values.tolist() == [[1, "A1"], [2, "X9"]]

    def test_unplaced_licence_is_not_known(self, db: Session) -> None:
        """X9's fleet import named a stand the registry could not place: licence unknown."""
        db.execute(text("UPDATE vehicles SET unplaced_stands = '{P01}' WHERE vehicle_id = 'X9'"))
        now = T0 + dt.timedelta(minutes=15)
        out = supervisor_queue(session=db, stand_ids=["S1"], now=now)
        assert out["licensed"].tolist() == [True, pd.NA]
        assert supervisor_intruders(session=db, stand_ids=["S1"], start=DAY, end=DAY).empty

    def test_empty_stand_and_bad_window(self, db: Session) -> None:
        """Before anyone arrives the queue is empty; a non-positive window is refused."""
        assert supervisor_queue(session=db, stand_ids=["S1"], now=T0 - dt.timedelta(hours=1)).empty
        with pytest.raises(ThresholdError):
            supervisor_queue(session=db, stand_ids=["S1"], now=T0, window_s=0)


class TestSupervisorIntruders:
    def test_unlicensed_visit(self, db: Session) -> None:
        """X9 is S1's only intruder that day."""
        out = supervisor_intruders(session=db, stand_ids=["S1"], start=DAY, end=DAY)
        assert out[["stand_id", "vehicle_id", "boarded"]].values.tolist() == [["S1", "X9", True]]


class TestSupervisorPresence:
    def test_licensee_present(self, db: Session) -> None:
        """A1 operated and was present at S1 on the day."""
        out = supervisor_presence(session=db, stand_ids=["S1"], start=DAY, end=DAY)
        assert out[["vehicle_id", "operated", "present"]].values.tolist() == [["A1", True, True]]

    def test_queue_beyond_the_stand_is_presence(self, db: Session) -> None:
        """B1 waits 20 min 60 m north of S2's square (30 m beyond its edge), next day: present
        there, as habitual_absence counts it (``stands/near.py``); 150 m away it is not."""
        next_day = DAY + dt.timedelta(days=1)
        start = 24 * 60
        _fixes(db, "B1", _run(range(start, start + 21), S2_NORTH_M + 60))
        _fixes(db, "B1", _run(range(start + 21, start + 30), 3000))
        out = supervisor_presence(session=db, stand_ids=["S2"], start=next_day, end=next_day)
        assert out[["vehicle_id", "operated", "present"]].values.tolist() == [["B1", True, True]]
        assert out.iloc[0]["visits"][0]["how"] == "perto"
        later = next_day + dt.timedelta(days=1)
        start += 24 * 60
        _fixes(db, "B1", _run(range(start, start + 21), S2_NORTH_M + 150))
        out = supervisor_presence(session=db, stand_ids=["S2"], start=later, end=later)
        assert out[["vehicle_id", "operated", "present"]].values.tolist() == [["B1", True, False]]

    def test_a_fix_away_between_two_near_ones_breaks_the_dwell(self, db: Session) -> None:
        """Two fixes 60 m north of S2 a minute apart, with one 2 km away between them (not
        read: outside the box near the stand): no dwell joins them, so no presence; without
        the fix away they are a minute's dwell."""
        day = DAY + dt.timedelta(days=3)
        t = 3 * 24 * 60
        _fixes(db, "B1", [(t, S2_NORTH_M + 60, "free"), (t + 0.5, 2500, "free")])
        _fixes(db, "B1", [(t + 1, S2_NORTH_M + 60, "free")])
        out = supervisor_presence(session=db, stand_ids=["S2"], start=day, end=day)
        assert out[["vehicle_id", "operated", "present"]].values.tolist() == [["B1", True, False]]
        db.execute(
            text("DELETE FROM fixes WHERE vehicle_id = 'B1' AND ts = :ts"),
            {"ts": T0 + dt.timedelta(minutes=t + 0.5)},
        )
        out = supervisor_presence(session=db, stand_ids=["S2"], start=day, end=day)
        assert out[["vehicle_id", "operated", "present"]].values.tolist() == [["B1", True, True]]

    def test_meter_off_is_not_operating(self, db: Session) -> None:
        """A1 drives the next day with the meter off only (private use): not a day operated."""
        next_day = DAY + dt.timedelta(days=1)
        _fixes(db, "A1", _run(range(24 * 60, 24 * 60 + 30), 3000, meter="off"))
        out = supervisor_presence(session=db, stand_ids=["S1"], start=next_day, end=next_day)
        assert out[["vehicle_id", "operated", "present"]].values.tolist() == [["A1", False, False]]
        assert operation_sightings(
            session=db, vehicle_ids=["A1"], start=next_day, end=next_day
        ).empty


class TestStandMapFrames:
    """The stand map reads what the supervisor's views read (``api.map_data.stand_frames``)."""

    def _frames(self, db: Session, since_min: float, now_min: float) -> dict:
        from api.map_data import stand_frames

        return stand_frames(
            db,
            stands=stands_frame(session=db, stand_ids=["S1"]),
            since=T0 + dt.timedelta(minutes=since_min),
            now=T0 + dt.timedelta(minutes=now_min),
            timezone="America/Sao_Paulo",
        )

    def test_queue_now_as_the_supervisors(self, db: Session) -> None:
        """At 09:15 the map's visits in progress depart at that instant and are the queue."""
        now = T0 + dt.timedelta(minutes=15)
        visits = self._frames(db, -60, 15)["visits"]
        here = visits.loc[visits["departed_at"] == pd.Timestamp(now)]
        queue = supervisor_queue(session=db, stand_ids=["S1"], now=now)
        assert sorted(here["vehicle_id"]) == sorted(queue["vehicle_id"]) == ["A1", "X9"]
        assert here.set_index("vehicle_id")["licensed"].to_dict() == {"A1": True, "X9": False}

    def test_presence_of_the_whole_local_day(self, db: Session) -> None:
        """A window from 09:30 still shows A1 present that day (at S1 09:00–09:20), as the
        supervisor's table does: the presence of a day is not cut at the window's start."""
        frames = self._frames(db, 30, 60)
        assert frames["presence"][["vehicle_id", "date", "present"]].values.tolist() == [
            ["A1", pd.Timestamp(DAY), True]
        ]
        table = supervisor_presence(session=db, stand_ids=["S1"], start=DAY, end=DAY)
        pd.testing.assert_frame_equal(frames["presence"], table)

    def test_no_stands(self, db: Session) -> None:
        """A supervisor whose stands are all retired gets an empty map, not an error."""
        from api.map_data import stand_frames

        empty = stands_frame(session=db, stand_ids=["nenhum"])
        frames = stand_frames(db, stands=empty, since=T0, now=T0, timezone="America/Sao_Paulo")
        assert frames["visits"].empty and frames["presence"] is None


class TestSupervisorContacts:
    def test_contacts(self, db: Session) -> None:
        """S1's list has A1's autorizatária and auxiliary."""
        out = supervisor_contacts(session=db, stand_ids=["S1"], on=DAY)
        assert out["name"].tolist() == ["Ana Souza", "Caio Auxiliar"]


class TestSupervisorScope:
    """A supervisor scoped to S1 learns nothing about S2, through every view."""

    def test_nothing_of_s2(self, db: Session) -> None:
        """No S2 id, vehicle, licensee or person appears in any S1 view; no scope: refused."""
        s2_things = {"S2", "B1", "B2", "Bruno Lima", "Rua B, 2", "51 9111"}
        views = [
            supervisor_queue(session=db, stand_ids=["S1"], now=T0 + dt.timedelta(minutes=15)),
            supervisor_intruders(session=db, stand_ids=["S1"], start=DAY, end=DAY),
            supervisor_presence(session=db, stand_ids=["S1"], start=DAY, end=DAY),
            supervisor_contacts(session=db, stand_ids=["S1"], on=DAY),
        ]
        for view in views:
            seen = {str(v) for v in view.astype("object").to_numpy().ravel()}
            assert not seen & s2_things, view
        # the same calls on S2 do see S2: the scope, not the data, hides it
        assert set(supervisor_queue(session=db, stand_ids=["S2"], now=T0 + dt.timedelta(
            minutes=15))["vehicle_id"]) == {"B1", "B2"}  # fmt: skip
        with pytest.raises(StandScopeError):
            supervisor_contacts(session=db, stand_ids=[], on=DAY)
