"""The stand-suspensions file (POA art. 45 § único, and stand closures): strict reading, every
bad row named; a closure sanctions no one in the detectors."""

from __future__ import annotations

import datetime as dt
import inspect
from pathlib import Path

import geopandas as gpd
import pandas as pd
import pytest
import shapely
from factories import make_pings, make_track, offset_m

from engines.pipeline import analyze_pings
from stands._errors import StandSuspensionFileError
from stands.suspensions import check_suspension, read_stand_suspensions
from tracking.detectors.operating_while_barred import detect_operating_while_barred

HEADER = "stand_id,prefixo,driver_id,starts_on,ends_on,kind,reason,process_ref\n"


def _file(tmp_path: Path, body: str, header: str = HEADER) -> Path:
    path = tmp_path / "suspensoes.csv"
    path.write_text(header + body, encoding="utf-8")
    return path


class TestRead:
    def test_reads_prefixo_and_driver_rows(self, tmp_path: Path) -> None:
        """A prefixo's suspension and an open-ended barring of a driver; ``prefixo`` read as id."""
        path = _file(
            tmp_path,
            "S1,P7,,2024-03-01,2024-03-20,suspension,desacato,EPTC 1/2024\n"
            "S1,,AUX9,2024-03-02,,BARRED,agressão física,EPTC 2/2024\n",
        )
        frame = read_stand_suspensions(path)
        assert frame["vehicle_id"].tolist() == ["P7", None]
        assert frame["driver_id"].tolist() == [None, "AUX9"]
        assert frame["kind"].tolist() == ["suspension", "barred"]
        assert frame["ends_on"].tolist() == [dt.date(2024, 3, 20), None]
        assert frame["days"].tolist() == [20, None]

    def test_a_short_suspension_is_kept_as_decided(self, tmp_path: Path) -> None:
        """Ten days recorded as a suspension: read as given (the registry does not invent dates)."""
        path = _file(tmp_path, "S1,P7,,2024-03-01,2024-03-10,suspension,,\n")
        assert read_stand_suspensions(path)["days"].tolist() == [10]

    def test_every_bad_row_is_named(self, tmp_path: Path) -> None:
        """Four bad rows give one error naming each row and column; nothing is returned."""
        path = _file(
            tmp_path,
            "S1,P7,AUX9,2024-03-01,2024-03-20,suspension,,\n"  # both subjects
            "S1,P7,,2024-03-20,2024-03-01,suspension,,\n"  # end before start
            "S1,P7,,2024-03-01,,suspension,,\n"  # suspension without end
            "S1,P7,,2024/03/01,2024-03-20,multa,,\n"  # bad date and kind
            "S1,P8,,2024-03-01,2024-03-20,suspension,,\n",  # fine
        )
        with pytest.raises(StandSuspensionFileError) as err:
            read_stand_suspensions(path)
        text = str(err.value)
        assert "5 erro(s); nada foi importado" in text
        assert "linha 2, coluna 'vehicle_id'/'driver_id'" in text
        assert "linha 3, coluna 'ends_on': 2024-03-01 antes" in text
        assert "linha 4, coluna 'ends_on': vazio" in text
        assert "linha 5, coluna 'starts_on': era '2024/03/01'" in text
        assert "linha 5, coluna 'kind': era 'multa'" in text
        assert "linha 6" not in text

    def test_a_file_saved_by_excel_in_pt_br_is_read(self, tmp_path: Path) -> None:
        """';' and Windows-1252, as Excel in pt-BR saves it (the fleet's files read so too)."""
        row = "S1,P7,,2024-03-01,2024-03-20,suspension,Decisão nº 3,PA-1\n"
        path = tmp_path / "suspensoes.csv"
        path.write_bytes((HEADER + row).replace(",", ";").encode("cp1252"))
        (rec,) = read_stand_suspensions(path).to_dict("records")
        assert (rec["stand_id"], rec["vehicle_id"], rec["reason"]) == ("S1", "P7", "Decisão nº 3")

    def test_repeated_row_and_unknown_column_are_refused(self, tmp_path: Path) -> None:
        """The same decision twice is named; an unknown column refuses the file."""
        row = "S1,P7,,2024-03-01,2024-03-20,suspension,,\n"
        with pytest.raises(StandSuspensionFileError, match="linha 3: repete a linha 2"):
            read_stand_suspensions(_file(tmp_path, row + row))
        with pytest.raises(StandSuspensionFileError, match="coluna desconhecida 'placa'"):
            read_stand_suspensions(_file(tmp_path, "S1,X\n", header="stand_id,placa\n"))


class TestCheck:
    def test_barred_may_be_open_suspension_may_not(self) -> None:
        """Only ``barred`` (art. 45 § único II a) may have no end."""
        d = dt.date(2024, 3, 1)
        assert (
            check_suspension(
                vehicle_id=None, driver_id="A", starts_on=d, ends_on=None, kind="barred"
            )
            == []
        )
        assert check_suspension(
            vehicle_id="P", driver_id=None, starts_on=d, ends_on=None, kind="suspension"
        )

    def test_suspension_and_barred_keep_their_subject_rule(self) -> None:
        """Outside ``closed``, neither or both subjects stay refused, as before."""
        d = dt.date(2024, 3, 1)
        for kind in ("suspension", "barred"):
            for vehicle, driver in ((None, None), ("P", "A")):
                problems = check_suspension(
                    vehicle_id=vehicle, driver_id=driver, starts_on=d, ends_on=d, kind=kind
                )
                assert problems == [
                    "'vehicle_id'/'driver_id': informe exatamente um (o prefixo suspenso ou o "
                    "condutor)"
                ]

    @pytest.mark.parametrize(
        ("vehicle", "driver", "named"),
        [
            ("P", None, "'vehicle_id':"),
            (None, "A", "'driver_id':"),
            ("P", "A", "'vehicle_id'/'driver_id':"),
        ],
    )
    def test_closed_names_no_subject(
        self, vehicle: str | None, driver: str | None, named: str
    ) -> None:
        """A closure of the whole stand with a prefixo or a driver is refused, naming it."""
        problems = check_suspension(
            vehicle_id=vehicle,
            driver_id=driver,
            starts_on=dt.date(2024, 3, 1),
            ends_on=None,
            kind="closed",
        )
        assert len(problems) == 1
        assert problems[0].startswith(named) and "interdição do ponto" in problems[0]

    def test_closed_needs_a_start_and_may_be_open(self) -> None:
        """A closure without subject is valid open-ended; it still needs ``starts_on``."""
        d = dt.date(2024, 3, 1)
        closed = {"vehicle_id": None, "driver_id": None, "kind": "closed"}
        assert check_suspension(starts_on=d, ends_on=None, **closed) == []
        assert check_suspension(starts_on=d, ends_on=d, **closed) == []
        assert check_suspension(starts_on=None, ends_on=d, **closed) == [
            "'starts_on': vazio; esperado data AAAA-MM-DD"
        ]
        assert check_suspension(starts_on=d, ends_on=d - dt.timedelta(days=1), **closed)


class TestReadClosures:
    def test_closed_rows_without_subject_are_read(self, tmp_path: Path) -> None:
        """A closure for road works (dated) and one for an event (open) read with no subject."""
        path = _file(
            tmp_path,
            "S1,,,2024-03-01,2024-03-15,closed,obras na via,SMMU 7/2024\n"
            "S2,,,2024-04-01,,Closed,evento,\n"
            "S1,P7,,2024-03-01,2024-03-20,suspension,desacato,EPTC 1/2024\n",
        )
        frame = read_stand_suspensions(path)
        assert frame["kind"].tolist() == ["closed", "closed", "suspension"]
        assert frame["vehicle_id"].tolist() == [None, None, "P7"]
        assert frame["driver_id"].tolist() == [None, None, None]
        assert frame["ends_on"].tolist() == [dt.date(2024, 3, 15), None, dt.date(2024, 3, 20)]
        assert frame["days"].tolist() == [15, None, 20]

    def test_closed_row_with_a_subject_is_named(self, tmp_path: Path) -> None:
        """A closure naming a prefixo (row 2) or a driver (row 3) refuses the file, row and
        column named; a repeated closure (row 4) too."""
        path = _file(
            tmp_path,
            "S1,,,2024-03-01,,closed,obras,\n"
            "S1,P7,,2024-03-05,,closed,obras,\n"
            "S1,,AUX9,2024-03-06,,closed,obras,\n"
            "S1,,,2024-03-01,2024-03-09,closed,obras,\n",
        )
        with pytest.raises(StandSuspensionFileError) as err:
            read_stand_suspensions(path)
        text = str(err.value)
        assert "3 erro(s); nada foi importado" in text
        assert "suspensoes.csv, linha 3, coluna 'vehicle_id': a interdição do ponto" in text
        assert "linha 4, coluna 'driver_id': a interdição do ponto" in text
        assert "linha 5: repete a linha 2" in text
        assert "linha 2," not in text

    def test_a_file_of_closures_may_omit_the_subject_columns(self, tmp_path: Path) -> None:
        """Closures only: no prefixo/driver columns needed; a suspension still needs them."""
        header = "stand_id,starts_on,ends_on,kind\n"
        frame = read_stand_suspensions(_file(tmp_path, "S1,2024-03-01,,closed\n", header))
        assert frame["vehicle_id"].tolist() == [None]
        assert frame["kind"].tolist() == ["closed"]
        body = "S1,2024-03-01,,closed\nS1,2024-03-01,2024-03-20,suspension\n"
        with pytest.raises(StandSuspensionFileError, match="faltam as colunas vehicle_id ou"):
            read_stand_suspensions(_file(tmp_path, body, header))


# ------------------------------------------------------------- a closure sanctions no one

STAND_BOXES = {"S1": (0.0, 0.0), "S2": (2000.0, 0.0)}  # centre (north_m, east_m), 60 m boxes


def _stands() -> gpd.GeoDataFrame:
    rows = []
    for stand, (north, east) in STAND_BOXES.items():
        lat0, lon0 = offset_m(north - 30.0, east - 30.0)
        lat1, lon1 = offset_m(north + 30.0, east + 30.0)
        rows.append(
            {
                "stand_id": stand,
                "name": stand,
                "capacity": 4,
                "municipality": "4314902",
                "geometry": shapely.box(lon0, lat0, lon1, lat1),
            }
        )
    frame = gpd.GeoDataFrame(rows, crs=4326)
    frame["capacity"] = frame["capacity"].astype("Int64")
    return frame


def _fleet() -> pd.DataFrame:
    """v1 licensed at S2; vb, suspended in the fleet registry from 03-01 to 03-10."""
    return pd.DataFrame(
        {
            "vehicle_id": ["v1", "vb"],
            "accessible": [False, False],
            "stands": [("S2",), ()],
            "stand_names": [(), ()],
            "status": ["active", "suspended"],
            "status_since": [None, dt.date(2024, 3, 1)],
            "status_until": [None, dt.date(2024, 3, 10)],
            "alvara_valid_until": [None, None],
            "inspection_valid_until": [None, None],
        }
    )


def _wait_then_board(vehicle: str, north: float, t0: int) -> list[dict]:
    """Arrive free at ``north``, wait 300 s, board inside, drive north."""
    points = [(t0 - 120 + 30 * k, north - 400 + 100 * k, 0.0) for k in range(4)]
    points += [(t0 + t, north + 2.0 * (t % 60 == 0), 0.0) for t in range(0, 301, 30)]
    meters = ["free"] * len(points)
    points += [(t0 + 300 + 30 * k, north + 150 * k, 0.0) for k in range(1, 6)]
    meters[-1] = "occupied"
    meters += ["occupied"] * 5
    return make_track(vehicle, points, meter=meters)


def _pings() -> pd.DataFrame:
    """v1 boards at S1 (no licence) and at S2 (its own, suspended); vb carries a passenger."""
    rows = _wait_then_board("v1", 0.0, 0) + _wait_then_board("v1", 2000.0, 3600)
    rows += make_track(
        "vb",
        [(7200 + 30 * k, -5000.0 + 100 * k, 3000.0) for k in range(-1, 22)],
        meter=["free"] + ["occupied"] * 21 + ["free"],
    )
    return make_pings(rows)


def _registry_rows(*rows: tuple[int, str, str | None, str, str | None, str]) -> pd.DataFrame:
    """Rows as :func:`db.stands.store.suspensions_frame` gives them (id, stand, vehicle, dates)."""
    return pd.DataFrame(
        {
            "suspension_id": [r[0] for r in rows],
            "stand_id": [r[1] for r in rows],
            "vehicle_id": pd.Series([r[2] for r in rows], dtype=object),
            "driver_id": pd.Series([None] * len(rows), dtype=object),
            "starts_on": pd.to_datetime([r[3] for r in rows]),
            "ends_on": pd.to_datetime([r[4] for r in rows]),
            "kind": [r[5] for r in rows],
            "reason": pd.Series([None] * len(rows), dtype=object),
            "process_ref": pd.Series([None] * len(rows), dtype=object),
        }
    )


SUSPENDED_V1 = (7, "S2", "v1", "2024-03-01", "2024-03-20", "suspension")
CLOSURES = (
    (5, "S2", None, "2024-03-01", None, "closed"),  # before the suspension: rows are compacted
    (9, "S1", None, "2024-03-04", "2024-03-04", "closed"),
)


class TestClosureInDetectors:
    KINDS = ("unlicensed_stand_use", "operating_while_barred")

    def _findings(self, suspensions: pd.DataFrame) -> pd.DataFrame:
        result = analyze_pings(
            _pings(),
            pd.DataFrame(),
            _stands(),
            fleet=_fleet(),
            kinds=self.KINDS,
            stand_suspensions=suspensions,
        )
        return result.findings

    def test_closures_change_no_finding(self) -> None:
        """Closures of both stands (one open) beside v1's suspension: the same findings."""
        without = self._findings(_registry_rows(SUSPENDED_V1))
        subtypes = sorted(
            (k, d.get("subtype")) for k, d in zip(without["kind"], without["details"], strict=True)
        )
        assert subtypes == [
            ("operating_while_barred", None),
            ("unlicensed_stand_use", "boarding"),
            ("unlicensed_stand_use", "suspended_use"),
        ]
        used = without[without["kind"] == "unlicensed_stand_use"]["details"]
        assert [d.get("suspension", {}).get("suspension_id") for d in used] in (
            [None, 7],
            [7, None],
        )
        with_closures = self._findings(_registry_rows(CLOSURES[0], SUSPENDED_V1, CLOSURES[1]))
        pd.testing.assert_frame_equal(with_closures, without)

    def test_closures_alone_accuse_no_one(self) -> None:
        """Closures only: v1's own stand is lawful again, as with no registry at all."""
        alone = self._findings(_registry_rows(*CLOSURES))
        pd.testing.assert_frame_equal(alone, self._findings(_registry_rows()))
        assert "suspended_use" not in [d.get("subtype") for d in alone["details"]]

    def test_barred_detector_reads_no_suspensions(self) -> None:
        """operating_while_barred judges the fleet registry only: no suspensions parameter."""
        params = inspect.signature(detect_operating_while_barred).parameters
        assert "suspensions" not in params
