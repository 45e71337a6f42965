"""The 90-day rule of POA art. 50, III over hand-made frames."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd
import pytest

from stands._errors import MissingColumnError, ThresholdError
from stands.supervisors import LAPSE_COLUMNS, PROVISION, supervisor_lapses

AS_OF = dt.date(2024, 5, 1)
LAW = Path(__file__).resolve().parents[2] / "enforcement" / "laws"


def _stands(*rows: tuple[str, str | None]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["stand_id", "kind"])


def _sups(*rows: tuple[str, str, str | None, str | None]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["stand_id", "elected_on", "homologated_on", "until"])


def _lic(*rows: tuple[str, str, str | None, str | None]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["vehicle_id", "stand_id", "valid_from", "valid_until"])


def _until(days_before: int) -> str:
    return (AS_OF - dt.timedelta(days=days_before)).isoformat()


class TestSupervisorLapses:
    def test_lapsed_91_days_ago_is_overdue_90_is_not(self) -> None:
        """A term that ended 91 days before as_of is overdue, listing the licensed prefixos;
        one that ended 90 days before is still within the period."""
        stands = _stands(("A", "fixo"), ("B", "fixo"))
        sups = _sups(("A", "2020-01-01", "2020-02-01", _until(91)),
                     ("B", "2020-01-01", "2020-02-01", _until(90)))  # fmt: skip
        lic = _lic(("P2", "A", None, None), ("P1", "A", "2023-01-01", None),
                   ("P3", "A", None, "2024-04-30"), ("P4", "B", None, None))  # fmt: skip
        out = supervisor_lapses(stands, sups, lic, as_of=AS_OF)
        assert list(out.columns) == list(LAPSE_COLUMNS)
        (row,) = out.to_dict(orient="records")
        assert row["stand_id"] == "A" and row["days_without"] == 91 and row["overdue"]
        assert row["prefixos"] == ("P1", "P2")  # P3's licence ended before as_of
        assert row["last_supervised_on"] == pd.Timestamp(_until(91))
        assert row["provision"] == PROVISION
        every = supervisor_lapses(stands, sups, lic, as_of=AS_OF, only_overdue=False)
        assert every.set_index("stand_id")["overdue"].to_dict() == {"A": True, "B": False}

    def test_supervised_stands_are_not_listed(self) -> None:
        """A stand with a homologated supervisor in office on as_of is never listed."""
        sups = _sups(("A", "2020-01-01", "2020-02-01", None),
                     ("B", "2020-01-01", "2020-02-01", AS_OF.isoformat()))  # fmt: skip
        out = supervisor_lapses(_stands(("A", "fixo"), ("B", "fixo")), sups, _lic(), as_of=AS_OF,
                                only_overdue=False)  # fmt: skip
        assert out.empty and list(out.columns) == list(LAPSE_COLUMNS)

    def test_pending_election_does_not_count(self) -> None:
        """An election not yet homologated leaves the stand overdue but is shown."""
        sups = _sups(("A", "2020-01-01", "2020-02-01", "2023-12-31"),
                     ("A", "2024-04-01", None, None))  # fmt: skip
        (row,) = supervisor_lapses(_stands(("A", "fixo")), sups, _lic(), as_of=AS_OF).to_dict(
            orient="records"
        )
        assert row["overdue"] and row["pending_elected_on"] == pd.Timestamp("2024-04-01")

    def test_homologation_after_as_of_does_not_count(self) -> None:
        """A supervisor homologated after as_of did not supervise on as_of."""
        sups = _sups(("A", "2020-01-01", "2020-02-01", "2023-12-31"),
                     ("A", "2024-04-01", "2024-05-02", None))  # fmt: skip
        out = supervisor_lapses(_stands(("A", "fixo")), sups, _lic(), as_of=AS_OF)
        assert out["stand_id"].tolist() == ["A"]

    def test_only_active_pontos_fixos(self) -> None:
        """Pontos livres, stands of unknown kind and stands retired by as_of are left out."""
        stands = _stands(("L", "livre"), ("U", None), ("R", "fixo"), ("F", "fixo"))
        stands["retired_at"] = pd.to_datetime(
            [None, None, "2024-04-01T03:00:00Z", "2024-06-01T03:00:00Z"], utc=True
        )
        sups = _sups(*[(s, "2020-01-01", "2020-01-02", "2020-12-31") for s in "LURF"])
        out = supervisor_lapses(stands, sups, _lic(), as_of=AS_OF)
        assert out["stand_id"].tolist() == ["F"]

    def test_unrecorded_only_on_request(self) -> None:
        """A ponto fixo with no homologated supervisor ever is listed only on request, last,
        without days and not overdue (the start of the gap is unknown)."""
        stands = _stands(("N", "fixo"), ("A", "fixo"))
        sups = _sups(("A", "2020-01-01", "2020-02-01", "2020-12-31"))
        assert supervisor_lapses(stands, sups, _lic(), as_of=AS_OF)["stand_id"].tolist() == ["A"]
        out = supervisor_lapses(stands, sups, _lic(), as_of=AS_OF, include_unrecorded=True)
        assert out["stand_id"].tolist() == ["A", "N"]
        assert pd.isna(out.loc[1, "days_without"]) and not out.loc[1, "overdue"]

    def test_empty_inputs_give_typed_empty_frame(self) -> None:
        """No stands: an empty frame with the lapse columns."""
        out = supervisor_lapses(_stands(), _sups(), _lic(), as_of=AS_OF)
        assert out.empty and list(out.columns) == list(LAPSE_COLUMNS)

    def test_bad_arguments(self) -> None:
        """A negative period or a frame without its columns raise named errors."""
        with pytest.raises(ThresholdError, match="max_days"):
            supervisor_lapses(_stands(), _sups(), _lic(), as_of=AS_OF, max_days=-1)
        with pytest.raises(MissingColumnError, match="homologated_on"):
            supervisor_lapses(_stands(), pd.DataFrame({"stand_id": []}), _lic(), as_of=AS_OF)

    def test_period_is_the_decree_s(self) -> None:
        """The 90 days and the provision come from art. 50, III of the bundled decree."""
        law = (LAW / "porto_alegre_decreto_taxi_2019.txt").read_text(encoding="utf-8")
        art50 = law[law.index("Art. 50.") : law.index("Art. 51.")]
        assert "III - por ausência de supervisor devidamente eleito, por prazo superior a 90" in (
            art50
        )
