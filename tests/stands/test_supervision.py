"""The supervisor's view over hand-made frames: scoped to their stands, nothing of the others."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from stands._errors import MissingColumnError, StandScopeError
from stands.supervision import (
    CONTACT_COLUMNS,
    INTRUDER_COLUMNS,
    in_scope,
    intruders,
    licensee_contacts,
    licensee_presence,
    queue_now,
    scope,
)

T0 = pd.Timestamp("2024-03-04T12:00:00Z")  # 09:00 in Porto Alegre


def _t(minutes: float) -> pd.Timestamp:
    return T0 + pd.Timedelta(minutes=minutes)


def _visits(*rows: tuple[str, str, float, float, bool]) -> pd.DataFrame:
    """Visits (vehicle, stand, arrival min, departure min, boarded)."""
    frame = pd.DataFrame(
        {
            "vehicle_id": [r[0] for r in rows],
            "stand_id": [r[1] for r in rows],
            "arrived_at": pd.to_datetime([_t(r[2]) for r in rows], utc=True),
            "departed_at": pd.to_datetime([_t(r[3]) for r in rows], utc=True),
            "boarded": pd.array([r[4] for r in rows], dtype="boolean"),
        }
    )
    frame["dwell_s"] = (frame["departed_at"] - frame["arrived_at"]).dt.total_seconds()
    return frame.astype({"vehicle_id": "str", "stand_id": "str"})


LICENCES = pd.DataFrame(
    {
        "vehicle_id": ["A1", "A2", "B1"],
        "stand_id": ["S1", "S1", "S2"],
        "valid_from": [None, None, None],
        "valid_until": [None, "2024-03-03", None],
    }
)
# S2's vehicles are at S2 and one of them (B1) also at S1, unlicensed there.
VISITS = _visits(
    ("A1", "S1", 0, 30, False),
    ("X9", "S1", 5, 40, True),
    ("A2", "S1", 10, 20, False),
    ("B1", "S2", 0, 60, False),
    ("B2", "S2", 1, 50, False),
    ("B1", "S1", 70, 75, True),
)
PEOPLE = pd.DataFrame(
    {
        "vehicle_id": ["A1", "A1", "B1"],
        "role": ["auxiliar", "autorizatario", "autorizatario"],
        "name": ["Caio", "Ana", "Bruno"],
        "address": [None, "Rua A, 1", "Rua B, 2"],
        "phone": [None, "51 9000", "51 9111"],
    }
)


class TestScope:
    @pytest.mark.parametrize("bad", [[], "S1", set()])
    def test_empty_or_string_scope_refused(self, bad: object) -> None:
        """An empty scope, or one id given as a bare string, is refused."""
        with pytest.raises(StandScopeError):
            scope(bad)  # type: ignore[arg-type]

    def test_ids_as_strings(self) -> None:
        """The scope is the set of ids as text."""
        assert scope(["S1", "S1", "S2"]) == frozenset({"S1", "S2"})


class TestInScope:
    def test_keeps_only_own_stands(self) -> None:
        """Rows of other stands are dropped; a frame without stand_id is refused."""
        assert set(in_scope(VISITS, ["S1"])["stand_id"]) == {"S1"}
        with pytest.raises(MissingColumnError, match="stand_id"):
            in_scope(pd.DataFrame({"vehicle_id": ["A1"]}), ["S1"])


class TestQueueNow:
    def test_queue_order_and_licence(self) -> None:
        """At 09:15 S1 has A1, X9, A2 in arrival order; X9 has no licence, A2's expired."""
        out = queue_now(VISITS, LICENCES, stand_ids=["S1"], at=_t(15))
        assert out[["position", "vehicle_id"]].values.tolist() == [[1, "A1"], [2, "X9"], [3, "A2"]]
        assert out["licensed"].tolist() == [True, False, False]

    def test_unknown_licence_is_no_intruder(self) -> None:
        """X9's licence names a stand the registry could not place: not known, not false."""
        out = queue_now(VISITS, LICENCES, stand_ids=["S1"], at=_t(15), unknown_licences={"X9"})
        assert out["licensed"].tolist() == [True, pd.NA, False]

    def test_simultaneous_arrivals_by_vehicle_id(self) -> None:
        """Two vehicles arriving at the same instant queue by vehicle_id."""
        visits = _visits(("Z", "S1", 0, 10, False), ("M", "S1", 0, 10, False))
        out = queue_now(visits, None, stand_ids=["S1"], at=_t(5))
        assert out["vehicle_id"].tolist() == ["M", "Z"]

    def test_nothing_of_other_stands(self) -> None:
        """Scoped to S1, S2's queue (B1, B2 present at the same instant) does not appear."""
        out = queue_now(VISITS, LICENCES, stand_ids=["S1"], at=_t(15))
        assert set(out["stand_id"]) == {"S1"} and not {"B1", "B2"} & set(out["vehicle_id"])


class TestIntruders:
    def test_unlicensed_visits(self) -> None:
        """X9 (no licence), A2 (licence expired the day before) and B1 (licensed at S2 only)
        are intruders at S1; A1 is not."""
        out = intruders(VISITS, LICENCES, stand_ids=["S1"])
        assert list(out.columns) == list(INTRUDER_COLUMNS)
        assert out["vehicle_id"].tolist() == ["X9", "A2", "B1"]
        assert out["boarded"].tolist() == [True, False, True]

    def test_where_the_meter_came_on_is_kept(self) -> None:
        """The visits' boarding distance (0 inside, metres past the edge) is carried; a frame
        without it gives NaN."""
        visits = VISITS.assign(boarding_distance_m=[None, 0.0, None, None, None, 20.0])
        out = intruders(visits, LICENCES, stand_ids=["S1"])
        assert out["boarding_distance_m"].tolist()[::2] == [0.0, 20.0]
        assert intruders(VISITS, LICENCES, stand_ids=["S1"])["boarding_distance_m"].isna().all()

    def test_unknown_licence_is_not_listed(self) -> None:
        """A vehicle whose licences are not known is never listed as an intruder."""
        out = intruders(VISITS, LICENCES, stand_ids=["S1"], unknown_licences=["X9"])
        assert out["vehicle_id"].tolist() == ["A2", "B1"]

    def test_nothing_of_other_stands(self) -> None:
        """Scoped to S1, S2's visits never appear, even with S2's licences given."""
        out = intruders(VISITS, LICENCES, stand_ids=["S1"])
        assert set(out["stand_id"]) == {"S1"} and "B2" not in set(out["vehicle_id"])

    def test_no_visits(self) -> None:
        """No visits: an empty frame with the intruder columns."""
        out = intruders(VISITS.iloc[:0], LICENCES, stand_ids=["S1"])
        assert out.empty and list(out.columns) == list(INTRUDER_COLUMNS)


class TestLicenseePresence:
    def test_presence_of_own_licensees_without_positions(self) -> None:
        """A1 present on the day at S1; when and where it was seen elsewhere are not shown."""
        pings = pd.DataFrame(
            {
                "vehicle_id": ["A1", "A1", "B1"],
                "timestamp": pd.to_datetime([_t(-60), _t(300), _t(0)], utc=True),
                "lat": [-30.1, -30.2, -30.3],
                "lon": [-51.1, -51.2, -51.3],
            }
        )
        out = licensee_presence(
            VISITS, LICENCES, pings, stand_ids=["S1"], start=dt.date(2024, 3, 4),
            end=dt.date(2024, 3, 4),
        )  # fmt: skip
        assert set(out["stand_id"]) == {"S1"} and set(out["vehicle_id"]) == {"A1"}
        (row,) = out.to_dict(orient="records")
        assert row["operated"] and row["present"]
        assert not [c for c in out.columns if "_seen_" in c]

    def test_nothing_of_other_stands(self) -> None:
        """Scoped to S1, S2's licensee B1 is absent from the table."""
        out = licensee_presence(
            VISITS, LICENCES, None, stand_ids=["S1"], start=dt.date(2024, 3, 1),
            end=dt.date(2024, 3, 7),
        )  # fmt: skip
        assert "B1" not in set(out["vehicle_id"]) and set(out["stand_id"]) == {"S1"}


class TestLicenseeContacts:
    def test_contacts_of_licensed_prefixos(self) -> None:
        """Autorizatário first, then auxiliaries; A2 (licence expired) is not listed."""
        out = licensee_contacts(LICENCES, PEOPLE, stand_ids=["S1"], on=dt.date(2024, 3, 4))
        assert list(out.columns) == list(CONTACT_COLUMNS)
        assert out[["vehicle_id", "role", "name"]].values.tolist() == [
            ["A1", "autorizatario", "Ana"], ["A1", "auxiliar", "Caio"],
        ]  # fmt: skip

    def test_prefixo_without_people_has_a_row(self) -> None:
        """A licensed prefixo without registered people still appears, with nulls."""
        out = licensee_contacts(LICENCES, PEOPLE, stand_ids=["S1"], on=dt.date(2024, 3, 3))
        row = out[out["vehicle_id"] == "A2"].iloc[0]
        assert pd.isna(row["name"]) and pd.isna(row["phone"])

    def test_nothing_of_other_stands(self) -> None:
        """Scoped to S1, Bruno (S2's autorizatário) is not in the list."""
        out = licensee_contacts(LICENCES, PEOPLE, stand_ids=["S1"], on=dt.date(2024, 3, 4))
        assert "Bruno" not in set(out["name"]) and set(out["stand_id"]) == {"S1"}

    def test_people_frame_checked(self) -> None:
        """A people frame without its columns is refused."""
        with pytest.raises(MissingColumnError, match="phone"):
            licensee_contacts(LICENCES, PEOPLE.drop(columns="phone"), stand_ids=["S1"],
                              on=dt.date(2024, 3, 4))  # fmt: skip
