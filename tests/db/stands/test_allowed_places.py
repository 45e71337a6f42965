"""Allowed places into PostGIS: the current list (retiring what a file omits), audited."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from api.inputs import read_stands_file
from db.stands.queries import allowed_places_frame
from db.stands.store import load_allowed_places
from stands._errors import StandsError


def _file(path: Path, *ids: str) -> Path:
    features = [
        {
            "type": "Feature",
            "geometry": {"type": "Point", "coordinates": [-51.21 + k * 0.01, -30.04]},
            "properties": {"stand_id": pid, "name": f"Estacionamento {pid}", "radius_m": 25},
        }
        for k, pid in enumerate(ids)
    ]
    path.write_text(json.dumps({"type": "FeatureCollection", "features": features}))
    return path


def _load(session: Session, path: Path, actor: str = "t-1"):
    frame = read_stands_file(path, radius_m=None, flag="FILE")
    return load_allowed_places(conn=session.connection(), places=frame, actor=actor, source="f")


def test_the_file_is_the_current_list(db_session: Session, tmp_path: Path) -> None:
    """Two places stored; a file with one of them retires the other; again, it comes back.
    Each import is audited; the frame holds the places not retired."""
    assert allowed_places_frame(session=db_session) is None
    report = _load(db_session, _file(tmp_path / "a.geojson", "E1", "E2"))
    assert (report.created, report.updated, report.unchanged, report.retired) == (2, 0, 0, 0)
    frame = allowed_places_frame(session=db_session)
    assert frame["place_id"].tolist() == ["E1", "E2"] and frame.crs.to_epsg() == 4326
    assert frame.geometry.iloc[0].geom_type == "MultiPolygon"
    area_m2 = frame.to_crs(32722).area.iloc[0]
    assert 1800 < area_m2 < 2000  # a 25 m circle
    report = _load(db_session, _file(tmp_path / "b.geojson", "E1"))
    assert (report.unchanged, report.retired) == (1, 1)
    assert allowed_places_frame(session=db_session)["place_id"].tolist() == ["E1"]
    report = _load(db_session, _file(tmp_path / "c.geojson", "E1", "E2"))
    assert (report.updated, report.unchanged) == (1, 1)
    audits = db_session.execute(
        text("SELECT count(*) FROM audit_log WHERE entity = 'allowed_places' AND actor = 't-1'")
    ).scalar_one()
    assert audits == 3


def test_no_actor_nothing_stored(db_session: Session, tmp_path: Path) -> None:
    with pytest.raises(StandsError, match="actor"):
        _load(db_session, _file(tmp_path / "a.geojson", "E1"), actor=" ")
    assert allowed_places_frame(session=db_session) is None
