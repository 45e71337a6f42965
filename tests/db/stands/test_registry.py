"""Registry operations on stands, licences, exclusions and supervisors, on a real PostGIS."""

from __future__ import annotations

import datetime as dt

import geopandas as gpd
import pytest
import shapely
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from db.enforcement.models import AuditEntry
from db.stands.models import LicenceExclusion, ParkingLicence, Stand, StandSupervisor
from db.stands.registry import (
    EXCLUSION_GROUNDS,
    create_stand,
    edit_stand,
    elect_supervisor,
    end_licence,
    end_supervisor_term,
    exclude_prefixo,
    exclusion_reason,
    get_stand,
    grant_licence,
    homologate_supervisor,
    licence_on,
    list_supervisors,
    retire_stand,
    stand_area,
)
from geo.crs import utm_crs_for_frame
from stands._errors import (
    InvalidAttributeError,
    InvalidGeometryError,
    InvalidRadiusError,
    LicenceOverlapError,
    StandExistsError,
    SupervisorError,
    UnknownLicenceError,
    UnknownStandError,
    UnknownVehicleError,
    UnsupportedGeometryError,
)

LAT, LON = -30.0277, -51.2287
SQUARE = {
    "type": "Polygon",
    "coordinates": [
        [[-51.2290, -30.0280], [-51.2284, -30.0280], [-51.2284, -30.0274], [-51.2290, -30.0274],
         [-51.2290, -30.0280]]
    ],
}  # fmt: skip
BOWTIE = {
    "type": "Polygon",
    "coordinates": [[[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]],
}
D = dt.date


def _audit(session: Session, entity: str, entity_id: str) -> list[AuditEntry]:
    return list(
        session.scalars(
            select(AuditEntry)
            .where(AuditEntry.entity == entity, AuditEntry.entity_id == entity_id)
            .order_by(AuditEntry.entry_id)
        )
    )


@pytest.fixture
def db(db_session: Session) -> Session:
    """A municipality, two vehicles and a ponto fixo S1 (polygon) in the rolled-back session."""
    db_session.execute(
        text(
            "INSERT INTO municipalities (code, name, uf) VALUES ('4314902', 'Porto Alegre', 'RS');"
            "INSERT INTO vehicles (vehicle_id, prefixo) VALUES ('P1', 'P1'), ('P2', 'P2')"
        )
    )
    create_stand(session=db_session, stand_id="S1", actor="t", area=SQUARE, kind="fixo", capacity=3)
    return db_session


class TestStandArea:
    def test_point_and_radius_make_a_circle(self) -> None:
        """A point with radius_m becomes a circle of that radius (area π r² within 1 %)."""
        geom, radius = stand_area(lat=LAT, lon=LON, radius_m=30)
        frame = gpd.GeoDataFrame(geometry=[geom], crs=4326)
        metric = frame.to_crs(utm_crs_for_frame(frame))
        assert radius == 30.0
        assert metric.geometry.iloc[0].area == pytest.approx(3.14159 * 900, rel=0.01)

    def test_polygon_kept(self) -> None:
        """A GeoJSON polygon comes back as a MultiPolygon, no radius."""
        geom, radius = stand_area(area=SQUARE)
        assert geom.geom_type == "MultiPolygon" and radius is None
        assert geom.equals(shapely.MultiPolygon([shapely.geometry.shape(SQUARE)]))

    @pytest.mark.parametrize(
        ("kwargs", "error", "match"),
        [
            ({}, InvalidGeometryError, "um dos dois"),
            ({"area": SQUARE, "lat": LAT, "lon": LON}, InvalidGeometryError, "um dos dois"),
            ({"area": BOWTIE}, InvalidGeometryError, "polígono inválido: auto-interseção"),
            ({"area": {"type": "Point", "coordinates": [0, 0]}}, UnsupportedGeometryError, "Point"),
            ({"area": {"type": "Polygon"}}, InvalidGeometryError, "GeoJSON inválida"),
            ({"lat": LAT, "lon": LON}, InvalidRadiusError, "sem radius_m"),
            ({"lat": LAT, "lon": LON, "radius_m": 0}, InvalidRadiusError, "raio de 0 m"),
            ({"lat": LAT, "lon": LON, "radius_m": 5000}, InvalidRadiusError, "1000"),
            ({"lat": 95, "lon": LON, "radius_m": 30}, InvalidGeometryError, "posição inválida"),
            ({"lat": LAT, "radius_m": 30}, InvalidGeometryError, "lat e lon"),
            ({"area": SQUARE, "radius_m": 30}, InvalidRadiusError, "só vale"),
        ],
    )
    def test_bad_geometry_is_named(self, kwargs: dict, error: type, match: str) -> None:
        """Bad or ambiguous geometry input raises a named error saying what is wrong."""
        with pytest.raises(error, match=match):
            stand_area(**kwargs)


class TestGetStand:
    def test_retired_refused_when_active_needed(self, db: Session) -> None:
        """A retired stand is found, but not as an active one; an unknown id is named."""
        retire_stand(session=db, stand_id="S1", actor="t", on=D(2024, 5, 1))
        assert get_stand(session=db, stand_id="S1").retired_at is not None
        with pytest.raises(UnknownStandError, match="desativado"):
            get_stand(session=db, stand_id="S1", active=True)
        with pytest.raises(UnknownStandError, match="'X9' não encontrado"):
            get_stand(session=db, stand_id="X9")


class TestCreateStand:
    def test_point_stand_with_all_attributes_and_audit(self, db: Session) -> None:
        """A point+radius stand is stored with its attributes, and the creation is audited."""
        create_stand(
            session=db, stand_id="S2", actor="fiscal-1", lat=LAT, lon=LON, radius_m=25,
            name="Matriz", capacity=4, order_number=12, kind="livre",
            address="Praça da Matriz, s/n", municipality_code="4314902",
        )  # fmt: skip
        db.expire_all()
        stand = db.get(Stand, "S2")
        assert stand is not None
        assert (stand.capacity, stand.order_number, stand.kind, stand.radius_m) == (
            4, 12, "livre", 25.0,
        )  # fmt: skip
        assert stand.address == "Praça da Matriz, s/n" and stand.municipality_code == "4314902"
        covers = db.scalar(
            text("SELECT ST_Covers(geometry, ST_Point(:lon, :lat, 4326)) FROM stands "
                 "WHERE stand_id = 'S2'"), {"lat": LAT, "lon": LON},
        )  # fmt: skip
        assert covers
        (entry,) = _audit(db, "stand", "S2")
        assert (entry.actor, entry.action, entry.details["order_number"]) == (
            "fiscal-1", "create", 12,
        )  # fmt: skip

    @pytest.mark.parametrize(
        ("kwargs", "error", "match"),
        [
            ({"stand_id": "S1"}, StandExistsError, "já existe"),
            ({"stand_id": " "}, InvalidAttributeError, "vazio"),
            ({"kind": "móvel"}, InvalidAttributeError, "fixo, livre"),
            ({"capacity": -1}, InvalidAttributeError, "capacity"),
            ({"order_number": 0}, InvalidAttributeError, "order_number"),
            ({"municipality_code": "9999999"}, InvalidAttributeError, "não cadastrado"),
            ({"actor": ""}, InvalidAttributeError, "actor"),
        ],
    )
    def test_bad_input_is_named(self, db: Session, kwargs: dict, error: type, match: str) -> None:
        """Duplicate ids and bad attributes raise named errors; nothing is stored."""
        args = {"stand_id": "S3", "actor": "t", "area": SQUARE} | kwargs
        with pytest.raises(error, match=match):
            create_stand(session=db, **args)
        assert db.get(Stand, "S3") is None


class TestInItsMunicipality:
    @pytest.fixture
    def bounded(self, db: Session) -> Session:
        """Porto Alegre with a boundary: a box of about 10 km around the centre."""
        db.execute(
            text(
                "UPDATE municipalities SET boundary = ST_Multi(ST_MakeEnvelope("
                "-51.28, -30.08, -51.18, -29.98, 4326)) WHERE code = '4314902'"
            )
        )
        return db

    def test_a_stand_far_from_its_municipality_is_refused(self, bounded: Session) -> None:
        """Created with latitude and longitude swapped, or moved 5 km out: refused with the
        reason; at the border (500 m out) and with no municipality: accepted."""
        with pytest.raises(InvalidGeometryError, match="fora do município 4314902"):
            create_stand(
                session=bounded, stand_id="T1", actor="t", lat=10.0, lon=10.0, radius_m=20,
                municipality_code="4314902",
            )  # fmt: skip
        create_stand(
            session=bounded, stand_id="T2", actor="t", lat=-29.9755, lon=-51.2, radius_m=20,
            municipality_code="4314902",
        )  # fmt: skip
        create_stand(session=bounded, stand_id="T3", actor="t", lat=10.0, lon=10.0, radius_m=20)
        with pytest.raises(InvalidGeometryError, match="fora do município"):
            edit_stand(
                session=bounded, stand_id="T2", actor="t", lat=-29.93, lon=-51.2, radius_m=20
            )
        with pytest.raises(InvalidGeometryError, match="fora do município"):
            edit_stand(session=bounded, stand_id="T3", actor="t", municipality_code="4314902")


class TestEditStand:
    def test_changes_clears_and_audits_from_to(self, db: Session) -> None:
        """Edited fields change, cleared ones become null, the audit has from/to of each."""
        edit_stand(session=db, stand_id="S1", actor="a", capacity=5, address="Rua A, 1")
        edit_stand(session=db, stand_id="S1", actor="a", clear=["address"], name="Novo")
        stand = db.get(Stand, "S1")
        assert (stand.capacity, stand.address, stand.name) == (5, None, "Novo")
        first, second = _audit(db, "stand", "S1")[1:]
        assert first.details["capacity"] == {"from": 3, "to": 5}
        assert second.details["address"] == {"from": "Rua A, 1", "to": None}

    def test_new_area_from_point_sets_radius(self, db: Session) -> None:
        """Replacing the polygon by a point+radius stores the circle and its radius."""
        edit_stand(session=db, stand_id="S1", actor="a", lat=-30.0, lon=-51.2, radius_m=40)
        db.expire_all()
        assert db.get(Stand, "S1").radius_m == 40.0
        assert db.scalar(
            text("SELECT ST_Covers(geometry, ST_Point(-51.2, -30.0, 4326)) FROM stands "
                 "WHERE stand_id = 'S1'")
        )  # fmt: skip
        assert "geometry" in _audit(db, "stand", "S1")[-1].details

    @pytest.mark.parametrize(
        ("kwargs", "error", "match"),
        [
            ({"stand_id": "NOPE", "capacity": 1}, UnknownStandError, "não encontrado"),
            ({"capacity": 3}, InvalidAttributeError, "nada a alterar"),
            ({"clear": ["geometry"]}, InvalidAttributeError, "desconhecidos"),
            ({"clear": ["name"], "name": "x"}, InvalidAttributeError, "ao mesmo tempo"),
            ({"area": BOWTIE}, InvalidGeometryError, "inválido"),
        ],
    )
    def test_bad_edit_is_named(self, db: Session, kwargs: dict, error: type, match: str) -> None:
        """Unknown stand, no change, unknown or contradictory fields, bad area: named errors."""
        args = {"stand_id": "S1", "actor": "a"} | kwargs
        with pytest.raises(error, match=match):
            edit_stand(session=db, **args)


class TestRetireStand:
    def test_retire_ends_licences_the_day_before(self, db: Session) -> None:
        """Licences valid on the retirement day end the day before; later ones stay."""
        grant_licence(
            session=db, stand_id="S1", vehicle_id="P1", valid_from=D(2024, 1, 1), actor="a"
        )
        later = grant_licence(
            session=db, stand_id="S1", vehicle_id="P2", valid_from=D(2024, 7, 1), actor="a"
        )
        ended = retire_stand(session=db, stand_id="S1", actor="a", on=D(2024, 6, 1), reason="obra")
        assert len(ended) == 1
        assert db.get(ParkingLicence, ended[0]).valid_until == D(2024, 5, 31)
        assert db.get(ParkingLicence, later.licence_id).valid_until is None
        stand = db.get(Stand, "S1")
        assert stand.retired_at == dt.datetime(2024, 6, 1, 3, tzinfo=dt.UTC)
        entry = _audit(db, "stand", "S1")[-1]
        assert entry.details["licences_starting_later"] == [later.licence_id]
        with pytest.raises(UnknownStandError, match="desativado"):
            retire_stand(session=db, stand_id="S1", actor="a", on=D(2024, 6, 2))


class TestGrantLicence:
    def test_grant_and_audit(self, db: Session) -> None:
        """A licence is stored with its period and audited with prefixo and stand."""
        lic = grant_licence(
            session=db, stand_id="S1", vehicle_id="P1", valid_from=D(2024, 1, 1),
            valid_until=D(2024, 12, 31), actor="a",
        )  # fmt: skip
        (entry,) = _audit(db, "parking_licence", str(lic.licence_id))
        assert entry.details == {
            "stand_id": "S1", "vehicle_id": "P1", "valid_from": "2024-01-01",
            "valid_until": "2024-12-31",
        }  # fmt: skip

    @pytest.mark.parametrize(
        ("existing", "new"),
        [
            ((D(2024, 1, 1), None), (D(2025, 1, 1), None)),
            ((D(2024, 1, 1), D(2024, 3, 31)), (D(2024, 3, 31), None)),
            ((None, D(2024, 3, 31)), (D(2023, 1, 1), D(2023, 1, 1))),
            ((D(2024, 5, 1), None), (D(2024, 1, 1), D(2024, 5, 1))),
        ],
    )
    def test_overlap_refused(self, db: Session, existing: tuple, new: tuple) -> None:
        """A period sharing a day with another licence of the prefixo at the stand is refused."""
        db.add(ParkingLicence(vehicle_id="P1", stand_id="S1", valid_from=existing[0],
                              valid_until=existing[1]))  # fmt: skip
        db.flush()
        with pytest.raises(LicenceOverlapError, match="já tem licença no ponto S1"):
            grant_licence(session=db, stand_id="S1", vehicle_id="P1", valid_from=new[0],
                          valid_until=new[1], actor="a")  # fmt: skip

    def test_adjacent_periods_and_other_prefixo_allowed(self, db: Session) -> None:
        """A licence starting the day after another ends, or of another prefixo, is fine."""
        grant_licence(session=db, stand_id="S1", vehicle_id="P1", valid_from=D(2024, 1, 1),
                      valid_until=D(2024, 3, 31), actor="a")  # fmt: skip
        grant_licence(
            session=db, stand_id="S1", vehicle_id="P1", valid_from=D(2024, 4, 1), actor="a"
        )
        grant_licence(
            session=db, stand_id="S1", vehicle_id="P2", valid_from=D(2024, 1, 1), actor="a"
        )
        assert db.scalar(text("SELECT count(*) FROM parking_licences")) == 3

    @pytest.mark.parametrize(
        ("kwargs", "error", "match"),
        [
            ({"stand_id": "NOPE"}, UnknownStandError, "não encontrado"),
            ({"vehicle_id": "P9"}, UnknownVehicleError, "prefixo 'P9'"),
            ({"valid_until": D(2023, 12, 31)}, InvalidAttributeError, "antes do início"),
        ],
    )
    def test_bad_grant_is_named(self, db: Session, kwargs: dict, error: type, match: str) -> None:
        """Unknown stand or prefixo, inverted period: named errors."""
        args = {"stand_id": "S1", "vehicle_id": "P1", "valid_from": D(2024, 1, 1)} | kwargs
        with pytest.raises(error, match=match):
            grant_licence(session=db, actor="a", **args)


class TestLicenceOn:
    def test_finds_the_valid_licence(self, db: Session) -> None:
        """The licence valid on the day is returned; none on another day is a named error."""
        lic = grant_licence(session=db, stand_id="S1", vehicle_id="P1", valid_from=D(2024, 2, 1),
                            actor="a")  # fmt: skip
        assert licence_on(session=db, stand_id="S1", vehicle_id="P1", on=D(2024, 2, 1)) is lic
        with pytest.raises(UnknownLicenceError, match="válida em 2024-01-31"):
            licence_on(session=db, stand_id="S1", vehicle_id="P1", on=D(2024, 1, 31))


class TestEndLicence:
    def test_end_sets_last_day(self, db: Session) -> None:
        """Ending sets valid_until and audits the change; a day outside the licence fails."""
        lic = grant_licence(session=db, stand_id="S1", vehicle_id="P1", valid_from=D(2024, 1, 1),
                            actor="a")  # fmt: skip
        end_licence(session=db, stand_id="S1", vehicle_id="P1", until=D(2024, 6, 30), actor="b")
        assert lic.valid_until == D(2024, 6, 30)
        entry = _audit(db, "parking_licence", str(lic.licence_id))[-1]
        assert (entry.action, entry.details["valid_until"]) == (
            "end", {"from": None, "to": "2024-06-30"},
        )  # fmt: skip
        with pytest.raises(UnknownLicenceError):
            end_licence(session=db, stand_id="S1", vehicle_id="P1", until=D(2024, 7, 1), actor="b")


class TestExclusionReason:
    @pytest.mark.parametrize("ground", sorted(EXCLUSION_GROUNDS))
    def test_reason_quotes_the_law(self, ground: str) -> None:
        """The reason cites art. 50 and its inciso, in the law's words, with the note."""
        reason = exclusion_reason(ground, "processo 12")
        provision, words = EXCLUSION_GROUNDS[ground]
        assert reason == f"{provision}: {words} — processo 12"

    def test_words_match_the_decree(self) -> None:
        """Each ground's words appear verbatim in art. 50 of the bundled decree."""
        from pathlib import Path  # noqa: PLC0415

        law = (
            Path(__file__).resolve().parents[3]
            / "enforcement" / "laws" / "porto_alegre_decreto_taxi_2019.txt"
        ).read_text(encoding="utf-8")  # fmt: skip
        art50 = law[law.index("Art. 50.") : law.index("Art. 51.")]
        for provision, words in EXCLUSION_GROUNDS.values():
            inciso = provision.split(", ")[1]
            assert f"{inciso} - {words}" in art50

    def test_unknown_ground(self) -> None:
        """An unknown ground names the allowed ones."""
        with pytest.raises(InvalidAttributeError, match="solicitacao, penalidade, sem_supervisor"):
            exclusion_reason("capricho")


class TestExcludePrefixo:
    def test_exclusion_ends_licence_and_records_reason(self, db: Session) -> None:
        """The licence ends the day before, the exclusion keeps the art. 50 reason, audited."""
        lic = grant_licence(session=db, stand_id="S1", vehicle_id="P1", valid_from=D(2024, 1, 1),
                            actor="a")  # fmt: skip
        exc = exclude_prefixo(session=db, stand_id="S1", vehicle_id="P1", on=D(2024, 5, 10),
                              ground="sem_supervisor", actor="eptc-3")  # fmt: skip
        assert lic.valid_until == D(2024, 5, 9)
        stored = db.get(LicenceExclusion, exc.exclusion_id)
        assert stored.reason.startswith("art. 50, III: por ausência de supervisor")
        (entry,) = _audit(db, "licence_exclusion", str(exc.exclusion_id))
        assert (entry.actor, entry.details["ground"], entry.details["licence_id"]) == (
            "eptc-3", "sem_supervisor", lic.licence_id,
        )  # fmt: skip

    def test_no_licence_or_same_day_start(self, db: Session) -> None:
        """Excluding without a licence, or on its first day, is a named error."""
        with pytest.raises(UnknownLicenceError, match="não tem licença"):
            exclude_prefixo(session=db, stand_id="S1", vehicle_id="P2", on=D(2024, 5, 10),
                            ground="solicitacao", actor="a")  # fmt: skip
        grant_licence(session=db, stand_id="S1", vehicle_id="P1", valid_from=D(2024, 5, 10),
                      actor="a")  # fmt: skip
        with pytest.raises(UnknownLicenceError, match="começa em 2024-05-10"):
            exclude_prefixo(session=db, stand_id="S1", vehicle_id="P1", on=D(2024, 5, 10),
                            ground="penalidade", actor="a")  # fmt: skip


class TestElectSupervisor:
    def test_election_recorded_pending(self, db: Session) -> None:
        """An election is stored without homologation, with its ata, and audited."""
        rec = elect_supervisor(
            session=db, stand_id="S1", person_name=" Ana Souza ", elected_on=D(2024, 3, 1),
            minutes_ref="ata 7/2024", actor="a",
        )  # fmt: skip
        assert (rec.person_name, rec.homologated_on, rec.minutes_ref) == (
            "Ana Souza", None, "ata 7/2024",
        )  # fmt: skip
        (entry,) = _audit(db, "stand_supervisor", str(rec.supervisor_id))
        assert entry.action == "elect" and entry.details["elected_on"] == "2024-03-01"

    @pytest.mark.parametrize(
        ("kwargs", "error", "match"),
        [
            ({"person_name": ""}, SupervisorError, "art. 42, I"),
            ({"minutes_ref": " "}, SupervisorError, "art. 42, II"),
            ({"stand_id": "NOPE"}, UnknownStandError, "não encontrado"),
        ],
    )
    def test_bad_election(self, db: Session, kwargs: dict, error: type, match: str) -> None:
        """Missing name or ata, unknown stand: named errors citing art. 42."""
        args = {"stand_id": "S1", "person_name": "Ana", "minutes_ref": "ata 1"} | kwargs
        with pytest.raises(error, match=match):
            elect_supervisor(session=db, elected_on=D(2024, 3, 1), actor="a", **args)

    def test_ponto_livre_has_no_supervisor(self, db: Session) -> None:
        """A ponto livre refuses a supervisor (art. 42 is about pontos fixos)."""
        create_stand(session=db, stand_id="L1", actor="a", area=SQUARE, kind="livre")
        with pytest.raises(SupervisorError, match="livre"):
            elect_supervisor(session=db, stand_id="L1", person_name="X", elected_on=D(2024, 1, 1),
                             minutes_ref="ata", actor="a")  # fmt: skip


class TestHomologateSupervisor:
    def test_homologation_replaces_previous(self, db: Session) -> None:
        """Homologating a new supervisor ends the previous one's term the day before."""
        old = elect_supervisor(session=db, stand_id="S1", person_name="Ana", minutes_ref="ata 1",
                               elected_on=D(2022, 1, 10), actor="a")  # fmt: skip
        homologate_supervisor(
            session=db, supervisor_id=old.supervisor_id, on=D(2022, 2, 1), actor="a"
        )
        new = elect_supervisor(session=db, stand_id="S1", person_name="Bia", minutes_ref="ata 2",
                               elected_on=D(2024, 1, 10), actor="a")  # fmt: skip
        ended = homologate_supervisor(
            session=db, supervisor_id=new.supervisor_id, on=D(2024, 2, 1), actor="eptc"
        )
        assert ended == [old.supervisor_id]
        assert old.until == D(2024, 1, 31) and new.homologated_on == D(2024, 2, 1)
        entry = _audit(db, "stand_supervisor", str(new.supervisor_id))[-1]
        assert entry.details["terms_ended"] == [old.supervisor_id]

    def test_bad_homologation(self, db: Session) -> None:
        """Before the election, twice, or an unknown record: named errors."""
        rec = elect_supervisor(session=db, stand_id="S1", person_name="Ana", minutes_ref="ata",
                               elected_on=D(2024, 3, 1), actor="a")  # fmt: skip
        with pytest.raises(SupervisorError, match="antes da eleição"):
            homologate_supervisor(session=db, supervisor_id=rec.supervisor_id, on=D(2024, 2, 1),
                                  actor="a")  # fmt: skip
        homologate_supervisor(
            session=db, supervisor_id=rec.supervisor_id, on=D(2024, 3, 5), actor="a"
        )
        with pytest.raises(SupervisorError, match="já homologado"):
            homologate_supervisor(session=db, supervisor_id=rec.supervisor_id, on=D(2024, 3, 6),
                                  actor="a")  # fmt: skip
        with pytest.raises(SupervisorError, match="não encontrado"):
            homologate_supervisor(session=db, supervisor_id=10**9, on=D(2024, 3, 6), actor="a")


class TestEndSupervisorTerm:
    def test_end_term(self, db: Session) -> None:
        """A term ends on the given day; ending it again or before it began fails."""
        rec = elect_supervisor(session=db, stand_id="S1", person_name="Ana", minutes_ref="ata",
                               elected_on=D(2024, 3, 1), actor="a")  # fmt: skip
        with pytest.raises(SupervisorError, match="antes do início"):
            end_supervisor_term(session=db, supervisor_id=rec.supervisor_id, until=D(2024, 2, 1),
                                actor="a")  # fmt: skip
        end_supervisor_term(session=db, supervisor_id=rec.supervisor_id, until=D(2024, 9, 1),
                            actor="a", reason="renúncia")  # fmt: skip
        assert db.get(StandSupervisor, rec.supervisor_id).until == D(2024, 9, 1)
        with pytest.raises(SupervisorError, match="já terminou"):
            end_supervisor_term(session=db, supervisor_id=rec.supervisor_id, until=D(2024, 9, 2),
                                actor="a")  # fmt: skip


class TestListSupervisors:
    def test_history_in_order(self, db: Session) -> None:
        """Every term of the stand, by election date; other stands only when asked."""
        create_stand(session=db, stand_id="S2", actor="a", area=SQUARE, kind="fixo")
        for stand, name, day in (("S1", "B", 2024), ("S1", "A", 2020), ("S2", "C", 2021)):
            elect_supervisor(session=db, stand_id=stand, person_name=name, minutes_ref="ata",
                             elected_on=D(day, 1, 1), actor="a")  # fmt: skip
        assert [r.person_name for r in list_supervisors(session=db, stand_ids=["S1"])] == ["A", "B"]
        assert len(list_supervisors(session=db)) == 3
