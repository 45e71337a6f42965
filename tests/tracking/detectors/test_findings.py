import json

import numpy as np
import pandas as pd
import pytest
import shapely

from tracking.detectors.findings import (
    FindingsFrameError,
    finding_name,
    findings_name,
    make_findings,
    read_findings_geojson,
    write_findings_geojson,
)


def _findings():
    rows = pd.DataFrame(
        {
            "kind": ["tracking_gap", "illegal_stand_formation"],
            "vehicle_id": ["V1", None],
            "stand_id": [None, None],
            "started_at": ["2024-03-04T12:00:00Z", "2024-03-05T12:00:00Z"],
            "ended_at": ["2024-03-04T12:20:00Z", "2024-03-06T12:00:00Z"],
            "confidence": [0.9, 0.6],
            "details": [{"gap_s": 1200, "fixes": [{"row": 3}]}, {"vehicles": ["A", "B"]}],
        }
    )
    geoms = [shapely.Point(-51.2, -30.0), shapely.Point(-51.2, -30.0).buffer(0.001)]
    return make_findings(rows, geoms)


class TestReadFindingsGeojson:
    def test_round_trip(self, tmp_path) -> None:
        """What write_findings_geojson writes reads back to the same findings."""
        path = tmp_path / "findings.geojson"
        before = _findings()
        write_findings_geojson(before, path)
        after = read_findings_geojson(path)
        assert list(after["finding_id"]) == list(before["finding_id"])
        assert list(after["details"]) == list(before["details"])
        assert after["started_at"].equals(before["started_at"])
        assert after.geometry.geom_equals_exact(before.geometry, 1e-9).all()
        assert after["vehicle_id"].tolist() == before["vehicle_id"].tolist()
        assert None in after["vehicle_id"].tolist()

    def test_details_values_as_json_has_them(self, tmp_path) -> None:
        """numpy values, NaN, infinity and instants in ``details`` are written as JSON has
        them (NaN and infinity as null, instants in ISO UTC); a key that is not text, or an
        integer beyond 64 bits, is written too (by the slower path), keys as text."""
        path = tmp_path / "findings.geojson"
        before = _findings()
        before.at[0, "details"] = {
            "n": np.int64(7),
            "ok": np.bool_(True),
            "ratios": np.array([1.5, np.nan]),
            "gap_s": np.float64("nan"),
            "speed": float("inf"),
            "at": pd.Timestamp("2024-03-04T09:00:00-03:00"),
            "fixes": ({"row": 3},),
        }
        before.at[1, "details"] = {1: "um", "big": 2**70}
        write_findings_geojson(before, path)
        after = read_findings_geojson(path)
        assert after["details"].tolist() == [
            {
                "n": 7,
                "ok": True,
                "ratios": [1.5, None],
                "gap_s": None,
                "speed": None,
                "at": "2024-03-04T12:00:00Z",
                "fixes": [{"row": 3}],
            },
            {"1": "um", "big": 2**70},
        ]

    def test_not_findings(self, tmp_path) -> None:
        """A GeoJSON without the contract's properties is a named error, not a traceback."""
        path = tmp_path / "x.geojson"
        path.write_text(json.dumps({"type": "FeatureCollection", "features": [
            {"type": "Feature", "geometry": None, "properties": {"kind": "x"}}]}))  # fmt: skip
        with pytest.raises(FindingsFrameError, match="faltam as propriedades finding_id"):
            read_findings_geojson(path)


class TestFindingName:
    def test_a_pattern_with_its_own_name(self) -> None:
        """Two receivers under one prefix are not called an impossible jump."""
        assert finding_name("gps_anomaly", {"pattern": "two_tracks"}) == (
            "Dois rastreadores no mesmo prefixo"
        )

    def test_a_gap_for_review_is_named_as_what_it_is(self) -> None:
        """A silence the car stood through, or after the ride, is not called a tracking
        failure (an alert or a list would read as the infraction)."""
        assert finding_name("tracking_gap", {"still": True}) == (
            "Silêncio do rastreador com o veículo parado"
        )
        assert finding_name("tracking_gap", {"still": False, "after_ride": True}) == (
            "Silêncio do rastreador depois da corrida"
        )
        assert finding_name("tracking_gap", {"still": False}) == "Falha de rastreamento"

    def test_an_accessible_wait_is_no_boarding(self) -> None:
        """A Táxi Acessível's wait, or a use under suspension, is not called a boarding; a
        proposal of several findings takes their shared name, else the kind's."""
        wait = {"subtype": "accessible_wait"}
        assert finding_name("unlicensed_stand_use", wait) == (
            "Espera de táxi acessível em ponto sem licença"
        )
        suspended = {"subtype": "suspended_use", "use": "wait"}
        assert finding_name("unlicensed_stand_use", suspended) == "Uso de ponto durante suspensão"
        boarding = {"subtype": "boarding"}
        assert finding_name("unlicensed_stand_use", boarding) == "Embarque em ponto sem licença"
        assert findings_name("unlicensed_stand_use", [wait, wait]) == finding_name(
            "unlicensed_stand_use", wait
        )
        assert findings_name("unlicensed_stand_use", [wait, boarding]) == (
            "Embarque em ponto sem licença"
        )

    @pytest.mark.parametrize("details", [{"pattern": "jump"}, {"pattern": "outlier"}, {}, None])
    def test_otherwise_the_kinds_name(self, details) -> None:
        assert finding_name("gps_anomaly", details) == "Salto de GPS impossível"
        assert finding_name("tracking_gap", details) == "Falha de rastreamento"
        assert finding_name("not_a_kind", details) == "not_a_kind"
