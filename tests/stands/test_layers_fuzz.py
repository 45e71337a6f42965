"""Property-based fuzzing of GeoJSON stands (read_stands): a frame or a named error."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
import shapely
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stands._errors import InvalidGeometryError, NullGeometryError, StandsError
from stands.frames import STAND_COLUMNS
from stands.layers import invalid_reason, read_stands

FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
LON, LAT = -51.2287, -30.0277

_NUMBER = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, min_value=-200, max_value=200),
    st.integers(-200, 200),
)
_NEAR = st.tuples(st.floats(LON - 0.001, LON + 0.001), st.floats(LAT - 0.001, LAT + 0.001)).map(
    list
)
_POSITION = st.one_of(
    _NEAR,
    st.lists(_NUMBER, min_size=0, max_size=4),
    st.just(["a", "b"]),
    st.just([None, None]),
)
_RING = st.one_of(
    st.lists(_NEAR, min_size=3, max_size=7).map(lambda r: [*r, r[0]]),  # closed, maybe twisted
    st.lists(_POSITION, max_size=6),
)
_GEOMETRY = st.one_of(
    st.none(),
    st.fixed_dictionaries({"type": st.just("Polygon"), "coordinates": st.lists(_RING, max_size=3)}),
    st.fixed_dictionaries(
        {
            "type": st.just("MultiPolygon"),
            "coordinates": st.lists(st.lists(_RING, max_size=2), max_size=2),
        }
    ),
    st.fixed_dictionaries({"type": st.just("Point"), "coordinates": _POSITION}),
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["LineString", "Polygonn", "", "GeometryCollection"]),
            "coordinates": st.lists(_POSITION, max_size=3),
        }
    ),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
    st.text(max_size=5),
)
_VALUE = st.one_of(st.none(), st.text(max_size=8), _NUMBER, st.booleans(), st.just([1, 2]))
_PROPERTIES = st.one_of(
    st.fixed_dictionaries(
        {"stand_id": st.one_of(st.sampled_from(["P1", "P2", "P3"]), _VALUE)},
        optional={
            "name": _VALUE,
            "capacity": st.one_of(st.integers(-3, 20), _VALUE),
            "municipality": st.one_of(st.just("4314902"), _VALUE),
            "radius_m": st.one_of(st.floats(allow_nan=True, allow_infinity=True), _VALUE),
        },
    ),
    st.none(),
    st.just([]),
)
_FEATURE = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("Feature"), "properties": _PROPERTIES, "geometry": _GEOMETRY}
    ),
    _VALUE,
)


def _read(doc: Any) -> Any:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pontos.geojson"
        path.write_text(json.dumps(doc), encoding="utf-8")
        return read_stands(path, default_radius_m=None)


class TestReadStandsFuzz:
    @FUZZ
    @given(features=st.lists(_FEATURE, max_size=5))
    def test_any_feature_collection(self, features: list[Any]) -> None:
        """Any FeatureCollection: a valid stands frame, or a StandsError with a pt-BR message."""
        try:
            frame = _read({"type": "FeatureCollection", "features": features})
        except StandsError as exc:
            assert str(exc)
            return
        assert tuple(frame.columns) == STAND_COLUMNS
        assert frame.geometry.is_valid.all() and not frame.geometry.is_empty.any()
        assert set(frame.geometry.geom_type) <= {"Polygon", "MultiPolygon"}
        assert frame["stand_id"].is_unique

    @FUZZ
    @given(
        doc=st.recursive(_VALUE, lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner))
    )
    def test_any_json(self, doc: Any) -> None:
        """Any JSON document: a frame or a StandsError, never another exception."""
        try:
            _read(doc)
        except StandsError as exc:
            assert str(exc)


def _feature(geometry: dict[str, Any]) -> dict[str, Any]:
    return {"type": "Feature", "properties": {"stand_id": "X1"}, "geometry": geometry}


def _ring(*corners: tuple[float, float]) -> list[list[float]]:
    ring = [[LON + dx * 1e-4, LAT + dy * 1e-4] for dx, dy in corners]
    return [*ring, ring[0]]


class TestMalformedGeometry:
    @pytest.mark.parametrize(
        ("geometry", "error", "reason"),
        [
            (
                {"type": "Polygon", "coordinates": [_ring((0, 0), (1, 1), (1, 0), (0, 1))]},
                InvalidGeometryError,
                "auto-interseção",
            ),
            (
                {
                    "type": "Polygon",
                    "coordinates": [
                        _ring((0, 0), (4, 0), (4, 4), (0, 4)),
                        _ring((9, 9), (10, 9), (10, 10)),
                    ],
                },
                InvalidGeometryError,
                "buraco fora do contorno externo",
            ),
            ({"type": "Polygon", "coordinates": []}, NullGeometryError, "sem geometria"),
            ({"type": "MultiPolygon", "coordinates": []}, NullGeometryError, "sem geometria"),
        ],
    )
    def test_rejected_with_reason(
        self, geometry: dict[str, Any], error: type[Exception], reason: str
    ) -> None:
        """Self-intersecting, hole outside, empty: a named error with the stand and the reason."""
        with pytest.raises(error, match=reason) as info:
            _read({"type": "FeatureCollection", "features": [_feature(geometry)]})
        assert "X1" in str(info.value)


class TestInvalidReason:
    def test_reason_in_portuguese_with_place(self) -> None:
        """GEOS's reason is translated and keeps the place it names."""
        bowtie = shapely.Polygon([(0, 0), (1, 1), (1, 0), (0, 1)])
        assert (
            invalid_reason(bowtie) == "auto-interseção (o contorno cruza a si mesmo) em (0.5 0.5)"
        )
