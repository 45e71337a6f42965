import io
import re
from pathlib import Path
from typing import Any

import pytest
from document_factories import sample_document
from pypdf import PdfReader

from enforcement._errors import DocumentError
from enforcement.documents import (
    IRREGULARITIES,
    MAP_STYLE,
    MARK_RING,
    MAX_DOTS,
    MAX_MEASURES,
    NO_DRIVER,
    NOT_GIVEN,
    Document,
    document_fields,
    evidence_summary,
    fit_map,
    map_primitives,
    render_auto_html,
    render_auto_pdf,
    render_html,
    render_notificacao_html,
    render_notificacao_pdf,
    render_pdf,
)
from enforcement.proposals import sanction
from enforcement.rulebook import bundled_rulebooks, normalize_whitespace

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "documents"


def pdf_text(data: bytes) -> str:
    """Text of every page, whitespace collapsed (lines wrap anywhere between words)."""
    reader = PdfReader(io.BytesIO(data))
    return normalize_whitespace(" ".join(page.extract_text() for page in reader.pages))


def html_text(page: str) -> str:
    return normalize_whitespace(page)


def auto_values(doc: Document) -> list[str]:
    """Values the auto must show (Pinto Bandeira art. 37), plus sanction and deadlines."""
    v = doc["vehicle"]
    return [
        str(v["driver_name"]),
        str(v["plate"]),
        str(v["make_model"]),
        str(doc["place"]["text"]),
        "Pinto Bandeira",
        "14/03/2025, das 21:40:05 às 21:45:50",  # local time: the UTC day is 15/03
        "horário de Brasília, UTC-03:00",
        IRREGULARITIES["longer_route"],
        "art. 25, III",
        "Agente Exemplo Bertolini (F-0123)",
        "AI-4314548-2025-000012",
        "R$ 1.015,00",
        "até 16/04/2025",  # notification: 30 calendar days (PB art. 36 § 1º)
        "até 08/05/2025",  # defence: 30 business days (PB art. 53, CPC counting)
    ]


def notificacao_values(doc: Document) -> list[str]:
    """Art. 38 adds the holder, the provision with its description and the permit number."""
    return [
        *auto_values(doc),
        str(doc["vehicle"]["holder_name"]),
        str(doc["vehicle"]["permit_number"]),
        normalize_whitespace(str(doc["proposal"]["excerpt"])),
    ]


def labelled(doc: Document, kind: str = "auto") -> dict[str, str]:
    """The field table as label → value."""
    return {label: value for _, label, value in document_fields(doc, kind=kind)}  # type: ignore[arg-type]


def bare_document() -> Document:
    """The sample without any optional datum: no plate, people, permit, place or geometry."""
    doc = sample_document()
    finding = dict(doc["findings"][0])
    finding["details"] = {"ratio": 1.9}
    return sample_document(
        vehicle={
            "prefixo": "07",
            "plate": None,
            "make_model": None,
            "permit_number": None,
            "holder_name": None,
            "driver_name": None,
        },
        place={"text": None, "municipality_name": "Pinto Bandeira"},
        findings=[finding],
        geometry={},
    )


def track_only_document() -> Document:
    doc = sample_document()
    finding = dict(doc["findings"][0])
    finding["details"] = {"ratio": 1.9}
    return sample_document(findings=[finding], geometry={"track": doc["geometry"]["track"]})


def hostile_document() -> Document:
    doc = sample_document()
    vehicle = dict(doc["vehicle"], holder_name="<script>alert(1)</script>", plate="A&B<1>")
    return sample_document(vehicle=vehicle)


class TestDocumentFields:
    def test_auto_holds_the_art_37_fields_only(self) -> None:
        """The auto lists operator, plate, make/model, place, time, irregularity and agent."""
        doc = sample_document()
        rows = document_fields(doc, kind="auto")
        labels = [label for _, label, _ in rows]
        text = " ".join(value for _, _, value in rows)
        for value in auto_values(doc):
            assert value in text
        assert "Nome do permissionário" not in labels
        assert "Nº da permissão" not in labels
        assert "Descrição do dispositivo" not in labels

    def test_notificacao_adds_holder_provision_excerpt_and_permit(self) -> None:
        """The notificação adds the art. 38 fields, the holder named as the rulebook's payer."""
        doc = sample_document()
        rows = labelled(doc, "notificacao")
        assert rows["Nome do permissionário"] == "Maria Exemplo Rossi"
        assert rows["Nº da permissão"] == "007/2016"
        assert rows["Nome do infrator (condutor)"] == "Carlos Exemplo da Silva"
        assert rows["Descrição do dispositivo"] == doc["proposal"]["excerpt"]
        assert rows["Dispositivo infringido"].startswith(
            "art. 25, III da Lei Municipal nº 169/2015"
        )

    def test_rows_are_grouped_by_section_in_order(self) -> None:
        """Sections appear once each, in the documents' order."""
        sections = [s for s, _, _ in document_fields(sample_document(), kind="notificacao")]
        seen = list(dict.fromkeys(sections))
        assert seen == [
            "Identificação",
            "Veículo e responsáveis",
            "Local, data e hora da constatação",
            "Infração",
            "Penalidade e medida administrativa",
            "Prazos",
        ]
        assert sections == sorted(sections, key=seen.index)

    def test_times_follow_the_given_zone(self) -> None:
        """The same instant reads 20:40:05 in Porto Velho (UTC−04:00)."""
        doc = sample_document(timezone="America/Porto_Velho")
        rows = labelled(doc, "auto")
        assert rows["Data e hora"].startswith("14/03/2025, das 20:40:05 às 20:45:50")
        assert "UTC-04:00" in rows["Data e hora"]

    def test_a_place_beyond_the_municipality_says_so(self) -> None:
        """A ride begun beyond the limit (POA art. 19): the auto does not place it in the
        municipality whose body issues it."""
        place = {"text": "-29.91222, -51.18144", "municipality_name": "Porto Alegre"}
        rows = labelled(sample_document(place=place | {"outside": True}), "auto")
        assert rows["Município"] == "fora de Porto Alegre"
        assert labelled(sample_document(place=place), "auto")["Município"] == "Porto Alegre"

    def test_missing_values_say_so(self) -> None:
        """Absent optional data reads "não informado" ("não informada" for a feminine noun);
        an unknown driver "não identificado"."""
        rows = labelled(bare_document(), "notificacao")
        assert rows["Placa do veículo"] == "não informada"
        assert rows["Marca/modelo"] == NOT_GIVEN
        assert rows["Nº da permissão"] == NOT_GIVEN
        assert rows["Nome do permissionário"] == NOT_GIVEN
        assert rows["Local"] == NOT_GIVEN
        assert rows["Nome do infrator (condutor)"] == NO_DRIVER

    @pytest.mark.parametrize(
        ("incidence", "expected"),
        [
            (0, "sem multa na 1ª incidência (art. 22)"),
            (1, "R$ 1.015,00"),
        ],
    )
    def test_fine_by_incidence(self, incidence: int, expected: str) -> None:
        """Pinto Bandeira charges the grave fine only from the 2nd incidence (art. 22)."""
        book = bundled_rulebooks()[("4314548", "taxi")]
        rule = book.rule_for("longer_route", {"reference_may_be_wrong": False})
        assert rule is not None
        doc = sample_document()
        proposal = {**doc["proposal"], **sanction(book, rule, incidence)}
        fine = labelled(sample_document(proposal=proposal))["Multa"]
        assert fine == expected

    def test_fine_without_amount_in_the_text(self) -> None:
        """A fine the text does not quantify says so, with the rulebook's note."""
        doc = sample_document()
        note = "valor não consta deste decreto"
        proposal = {**doc["proposal"], "fine": None, "fine_note": note, "penalty": "multa"}
        fine = labelled(sample_document(proposal=proposal))["Multa"]
        assert fine == f"valor não fixado neste texto legal ({note})"

    def test_deadline_without_due_date_names_its_start(self) -> None:
        """A deadline not yet running tells when it starts; a running one its start date."""
        doc = sample_document()
        deadlines = {k: {**d, "due": None} for k, d in doc["proposal"]["deadlines"].items()}
        proposal = {**doc["proposal"], "deadlines": deadlines, "notified_at": None}
        rows = labelled(sample_document(proposal=proposal))
        notice = rows["Prazo de notificação"]
        assert "contados de 17/03/2025" in notice and "11:05" not in notice  # a day, no hour
        assert "vencimento fixado quando o prazo começar" in rows["Prazo de defesa"]
        assert "com efeito suspensivo" in rows["Prazo de defesa"]

    def test_no_payer_is_named_without_a_fine(self) -> None:
        """Art. 49's cassação carries no fine: the notice names no one to pay one."""
        doc = sample_document()
        doc["proposal"] = {
            **doc["proposal"],
            "fine": None,
            "fine_note": "sem multa: a penalidade é a cassação da licença de estacionamento",
            "penalty": "cassação da licença de estacionamento",
        }
        rows = labelled(doc, "notificacao")
        assert rows["Multa"].startswith("sem multa")
        assert "Responsável pela multa" not in rows
        assert "Responsável pela multa" in labelled(sample_document(), "notificacao")

    def test_business_days_are_named(self) -> None:
        """A period counted in business days says so (PB art. 53: 30 dias úteis, CPC)."""
        rows = labelled(sample_document())
        assert rows["Prazo de defesa"].startswith("30 dias úteis da notificação (art. 53)")
        assert rows["Prazo de notificação"].startswith("30 dias da lavratura do auto")

    def test_a_law_without_periods_does_not_deny_them(self) -> None:
        """A decree that fixes no period (Porto Alegre's taxi decree) does not tell the accused
        there is none: the municipal administrative procedure applies."""
        doc = sample_document()
        doc["proposal"] = {**doc["proposal"], "deadlines": {}, "law": "Decreto nº 20.740/2020"}
        assert labelled(doc, "notificacao")["Prazos"] == (
            "não fixados no texto legal aplicado (Decreto nº 20.740/2020): a defesa e o recurso "
            "seguem os prazos da legislação municipal de processo administrativo"
        )

    def test_unknown_kind(self) -> None:
        """Only auto and notificacao are documents."""
        with pytest.raises(DocumentError, match="'kind' foi 'multa'; esperado um de auto"):
            document_fields(sample_document(), kind="multa")  # type: ignore[arg-type]

    def test_missing_key(self) -> None:
        """A document without its vehicle is refused by name."""
        doc: dict[str, Any] = dict(sample_document())
        del doc["vehicle"]
        with pytest.raises(DocumentError, match="não tem 'vehicle'"):
            document_fields(doc, kind="auto")  # type: ignore[arg-type]

    def test_unknown_timezone(self) -> None:
        """The zone must be an IANA name."""
        with pytest.raises(DocumentError, match="'timezone' foi 'Brasília'"):
            document_fields(sample_document(timezone="Brasília"), kind="auto")

    @pytest.mark.parametrize(
        ("value", "match"),
        [("2025-03-15T00:40:05", "sem fuso horário"), ("ontem", "data/hora inválida: ontem")],
    )
    def test_bad_time(self, value: str, match: str) -> None:
        """A time without offset, or not ISO 8601, is refused rather than guessed."""
        doc = sample_document()
        proposal = {**doc["proposal"], "committed_at": value}
        with pytest.raises(DocumentError, match=match):
            document_fields(sample_document(proposal=proposal), kind="auto")


class TestEvidenceSummary:
    def test_longer_route_measures_and_thresholds(self) -> None:
        """Measures and thresholds in pt-BR with units; the time in the local zone."""
        finding = sample_document()["findings"][0]
        head, measures, thresholds = evidence_summary(finding, timezone="America/Sao_Paulo")
        assert head.startswith("F-6c1d0e2a9b7f4a31: Itinerário mais extenso que o necessário")
        assert "14/03/2025 21:40:05 a 14/03/2025 21:45:50" in head
        assert head.endswith("confiança 83 %")  # as the console says it
        assert "referência: malha viária" in measures
        assert "duração: 5 min 45 s" in measures
        assert "razão mínima: 1,4" in thresholds
        assert "excesso mínimo: 1.000 m" in thresholds
        assert not any("cell" in m or "driven_line" in m for m in measures)

    def test_a_live_findings_state_is_no_measure(self) -> None:
        """'provisional' and 'withdrawn' are the page's badge, not an English line among the
        measures ("provisional: sim")."""
        finding = sample_document()["findings"][0]
        live = {**finding, "details": {**finding["details"], "provisional": True}}
        _, measures, _ = evidence_summary(live, timezone="America/Sao_Paulo")
        assert not any("provisional" in m or "withdrawn" in m for m in measures)

    def test_a_reference_from_peers_shows_them(self) -> None:
        """Without a network, the agent reads how many peers the reference came from and their
        reference ratio; a network finding does not list its peers."""
        finding = dict(sample_document()["findings"][0])
        peers = {"count": 7, "reference_straight_line_ratio": 1.2831, "trip_ids": ["a"] * 7}
        finding["details"] = {
            "method": "peer_trips",
            "driven_m": 4317.4,
            "ratio_straight_line": 2.3645,
            "peer_trips": peers,
        }
        _, measures, _ = evidence_summary(finding, timezone="UTC")  # type: ignore[arg-type]
        assert measures == [
            "referência: corridas semelhantes",
            "distância percorrida: 4.317 m",
            "razão percorrida/linha reta: 2,365",
            "corridas semelhantes comparadas: 7",
            "3/4 das semelhantes percorreram até (× linha reta): 1,283",
        ]
        finding["details"] = {"method": "road_network", "peer_trips": peers}
        _, measures, _ = evidence_summary(finding, timezone="UTC")  # type: ignore[arg-type]
        assert measures == ["referência: malha viária"]

    def test_the_registry_record_a_finding_rests_on_is_shown(self) -> None:
        """A use of the stand during a suspension shows the suspension (its kind, dates, reason
        and process) first; a boarding after a licence ended shows that licence's dates."""
        finding = dict(sample_document()["findings"][0])
        finding["kind"] = "unlicensed_stand_use"
        suspension = {
            "suspension_id": 3, "kind": "barred", "stand_id": "S1", "vehicle_id": None,
            "driver_id": "D1", "starts_on": "2024-03-01", "ends_on": None,
            "reason": "decisão 12/2024", "process_ref": "PA-77",
        }  # fmt: skip
        finding["details"] = {
            "subtype": "suspended_use", "use": "wait", "wait_s": 600.0, "accessible": False,
            "suspension": suspension, "suspension_kind": "barred",
        }  # fmt: skip
        _, measures, _ = evidence_summary(finding, timezone="UTC")  # type: ignore[arg-type]
        assert measures[:7] == [
            "espera: 10 min 00 s",
            "uso do ponto: espera na fila",
            "registro no cadastro: impedimento",
            "início da suspensão ou do impedimento: 01/03/2024",
            "fim da suspensão ou do impedimento: em aberto",
            "motivo registrado: decisão 12/2024",
            "processo: PA-77",
        ]
        assert "táxi acessível: não" in measures
        ended = {"licence_id": 4, "valid_from": "2023-01-01", "valid_until": "2024-02-01"}
        finding["details"] = {"licensed": False, "licence_ended": ended, "licence_end": "ended"}
        _, measures, _ = evidence_summary(finding, timezone="UTC")  # type: ignore[arg-type]
        assert measures == [
            "licença encerrada: fim do período",
            "licença válida desde: 01/01/2023",
            "licença válida até: 01/02/2024",
            "com permissão: não",
        ]

    def test_codes_of_the_evidence_are_read_in_pt_br(self) -> None:
        """A driver's document and inactivity's last operation are named, not their codes."""
        finding = dict(sample_document()["findings"][0])
        finding["details"] = {"reason": "cnh_expired", "document": "cnh"}
        _, measures, _ = evidence_summary(finding, timezone="UTC")  # type: ignore[arg-type]
        assert measures == ["motivo: CNH vencida", "documento: CNH"]
        finding["details"] = {"last_operation_source": "fix"}
        _, measures, _ = evidence_summary(finding, timezone="UTC")  # type: ignore[arg-type]
        assert measures == [
            "fonte da última operação: posição em serviço (taxímetro Livre, Ocupado ou não "
            "informado)"
        ]

    def test_every_threshold_has_a_label(self) -> None:
        """Every threshold a detector takes is named in pt-BR in the documents and pages."""
        from enforcement.documents import LABELS
        from tracking.detectors.detect import _DETECTORS, threshold_names

        missing = [(k, n) for k in _DETECTORS for n in threshold_names(k) if n not in LABELS]
        assert missing == []

    def test_a_decree_is_cited_with_do(self) -> None:
        """ "art. 58, XII do Decreto …", "art. 25, III da Lei …"."""
        doc = sample_document()
        doc["proposal"]["law"] = "Decreto de 23 de dezembro de 2019"
        rows = labelled(doc, "notificacao")
        assert rows["Dispositivo infringido"].startswith("art. 25, III do Decreto de 23")

    def test_boarding_distance_and_lag_are_labelled(self) -> None:
        """A boarding's distance and lag and their thresholds are named in pt-BR, with units."""
        finding = dict(sample_document()["findings"][0])
        finding["kind"] = "unlicensed_stand_use"
        finding["details"] = {
            "boarding_lag_s": 30.0,
            "boarding_distance_m": 19.96,
            "thresholds": {"boarding_grace_s": 120.0, "boarding_grace_m": 30.0},
        }
        _, measures, thresholds = evidence_summary(finding, timezone="UTC")  # type: ignore[arg-type]
        assert measures == [
            "distância do taxímetro ligado ao ponto: 20 m",
            "tempo da saída do ponto ao taxímetro ligado: 30 s",
        ]
        assert "distância máxima ao ponto: 30 m" in thresholds

    def test_code_words_and_days_in_pt_br(self) -> None:
        """A detector's code words (pattern, meter state, reason) and ISO days read in pt-BR."""
        finding = dict(sample_document()["findings"][0])
        finding["kind"] = "gps_anomaly"
        finding["details"] = {
            "pattern": "two_tracks",
            "n_anomalous_steps": 39,
            "meter_before": "occupied",
            "local_date": "2024-03-05",
            "thresholds": {"min_jump_m": 500.0, "max_excursion_s": 300.0},
        }
        _, measures, thresholds = evidence_summary(finding, timezone="UTC")  # type: ignore[arg-type]
        assert measures == [
            "padrão: dois trajetos alternados (dois rastreadores)",
            "taxímetro antes: ocupado",
            "passos impossíveis: 39",
            "dia: 05/03/2024",
        ]
        assert thresholds == ["salto mínimo: 500 m", "desvio máximo (ida e volta): 5 min 00 s"]

    def test_every_reason_of_the_registry_kinds_reads_in_pt_br(self) -> None:
        """Each reason ``operating_while_barred`` and ``driver_not_allowed`` may write is
        shown in Portuguese, not as its code."""
        from tracking.detectors.driver_not_allowed import REASONS as DRIVER_REASONS
        from tracking.detectors.operating_while_barred import REASONS as VEHICLE_REASONS

        finding = dict(sample_document()["findings"][0])
        raw = []
        for reason in VEHICLE_REASONS + DRIVER_REASONS:
            finding["details"] = {"reason": reason}
            (shown,) = evidence_summary(finding, timezone="UTC")[1]  # type: ignore[arg-type]
            if shown == f"motivo: {reason}":
                raw.append(reason)
        assert raw == []

    def test_the_main_reasons_registry_dates_are_shown(self) -> None:
        """An expired alvará shows its date and the days expired; a suspension its period (the
        main reason's evidence, kept in ``details.reasons``)."""
        finding = dict(sample_document()["findings"][0])
        finding["kind"] = "operating_while_barred"
        alvara = {"reason": "alvara_expired", "alvara_valid_until": "2024-01-31", "days_expired": 5}
        finding["details"] = {"reason": "alvara_expired", "reasons": [alvara], "n_trips": 3}
        _, measures, _ = evidence_summary(finding, timezone="UTC")  # type: ignore[arg-type]
        assert "alvará válido até: 31/01/2024" in measures and "dias vencido: 5" in measures
        status = {"reason": "suspended", "status_since": "2024-03-25", "status_until": None}
        finding["details"] = {"reason": "suspended", "reasons": [status, alvara]}
        _, measures, _ = evidence_summary(finding, timezone="UTC")  # type: ignore[arg-type]
        assert "situação desde: 25/03/2024" in measures
        assert not any("alvará" in m for m in measures)  # only the main reason's

    def test_measures_are_capped(self) -> None:
        """At most MAX_MEASURES measures, then how many more the finding holds."""
        finding = dict(sample_document()["findings"][0])
        finding["details"] = {f"x{i}_m": float(i) for i in range(MAX_MEASURES + 3)}
        _, measures, _ = evidence_summary(finding, timezone="UTC")  # type: ignore[arg-type]
        assert len(measures) == MAX_MEASURES + 1
        assert measures[-1] == "mais 3 no registro da constatação"


class TestFitMap:
    def test_same_scale_on_both_axes_north_up(self) -> None:
        """1 km east and 1 km north span the same length in the box; north is up."""
        lat = -29.1
        dlon = 1000 / (111_195.08 * 0.8738)  # cos(29.1°)
        dlat = 1000 / 111_195.08
        fitted = fit_map(
            {"track": [(-51.45, lat), (-51.45 + dlon, lat), (-51.45, lat + dlat)]},
            width=400,
            height=300,
        )
        assert fitted is not None
        (x0, y0), (x1, y1), (x2, y2) = fitted["layers"]["track"]
        assert abs(x1 - x0) == pytest.approx(abs(y2 - y0), rel=0.01)
        assert y2 > y0
        assert (x1 - x0) * fitted["metres_per_unit"] == pytest.approx(1000, rel=0.01)

    def test_fits_inside_the_margin(self) -> None:
        """Every projected point lies inside the box less its margin."""
        doc = sample_document()
        fitted = fit_map({"track": doc["geometry"]["track"]}, width=300, height=200, margin=10)
        assert fitted is not None
        for x, y in fitted["layers"]["track"]:
            assert 10 - 1e-9 <= x <= 290 + 1e-9
            assert 10 - 1e-9 <= y <= 190 + 1e-9

    def test_single_point_is_centred(self) -> None:
        """One position sits in the middle of a map at least MIN_EXTENT_M wide."""
        fitted = fit_map({"point": [(-51.45, -29.1)]}, width=200, height=100)
        assert fitted is not None
        assert fitted["layers"]["point"] == [pytest.approx((100.0, 50.0))]

    def test_nothing_to_draw(self) -> None:
        """No position: no map."""
        assert fit_map({"track": [], "route": []}, width=200, height=100) is None


class TestMapPrimitives:
    def test_sample_draws_every_layer(self) -> None:
        """Track, dots, dashed route, stand, north arrow, scale bar and legend."""
        prims = map_primitives(sample_document())
        texts = [p["text"] for p in prims if p["shape"] == "text"]
        dashed = [p for p in prims if p["shape"] == "polyline" and p["dash"]]
        assert len(dashed) == 2  # the route and its legend sample
        assert "N" in texts
        assert any(re.fullmatch(r"\d+ m|\d+ km", t) for t in texts)
        for label in ("Trajeto registrado (posições GPS)", "Rota de referência", "Ponto de táxi"):
            assert label in texts
        assert sum(p["shape"] == "circle" for p in prims) >= len(
            sample_document()["geometry"]["track"]
        )

    def test_absent_layers_are_not_drawn(self) -> None:
        """Without route or stand, neither is drawn nor in the legend."""
        prims = map_primitives(track_only_document())
        texts = [p["text"] for p in prims if p["shape"] == "text"]
        assert not [p for p in prims if p["dash"]]
        assert "Rota de referência" not in texts
        assert "Ponto de táxi" not in texts

    def test_a_stand_too_small_to_see_gets_a_ring_over_the_point(self) -> None:
        """A stand a few metres across beside a 5 km track is a speck: a ring in the stand's
        colour marks it, drawn after the finding's point (which would cover a smaller mark)."""
        stand = [(-51.45, -29.1), (-51.4499, -29.1), (-51.4499, -29.0999), (-51.45, -29.0999)]
        track = [(-51.45 + i * 1e-3, -29.1) for i in range(50)]
        geometry = {"track": track, "stand": stand, "point": (-51.44995, -29.09995)}
        prims = map_primitives(sample_document(geometry=geometry))
        colour = MAP_STYLE["stand"]["stroke"]
        rings = [
            k
            for k, p in enumerate(prims)
            if p["shape"] == "circle" and p["fill"] is None and p["stroke"] == colour
        ]
        point = [k for k, p in enumerate(prims) if p["fill"] == MAP_STYLE["point"]["fill"]]
        assert len(rings) == 1 and prims[rings[0]]["r"] == MARK_RING
        assert rings[0] > point[0]
        assert not [
            p
            for p in map_primitives(sample_document())
            if p["fill"] is None and p["shape"] == "circle"
        ]

    def test_no_geometry(self) -> None:
        """Without any position the map says so."""
        texts = [p["text"] for p in map_primitives(bare_document()) if p["shape"] == "text"]
        assert texts == ["Sem geometria para o mapa"]

    def test_long_tracks_are_thinned(self) -> None:
        """A long track draws at most about MAX_DOTS fix dots."""
        track = [(-51.45 + i * 1e-5, -29.1) for i in range(5 * MAX_DOTS)]
        prims = map_primitives(sample_document(geometry={"track": track}))
        assert sum(p["shape"] == "circle" for p in prims) == MAX_DOTS + 5  # start, end, legend


class TestRenderHtml:
    def test_unknown_kind(self) -> None:
        """The kind is checked before anything is drawn."""
        with pytest.raises(DocumentError, match="'kind' foi"):
            render_html(sample_document(), kind="aviso")  # type: ignore[arg-type]

    def test_draft_is_marked(self) -> None:
        """A proposal not yet confirmed renders as a minuta."""
        doc = sample_document()
        page = render_html(
            sample_document(proposal={**doc["proposal"], "status": "proposta"}), kind="auto"
        )
        assert "MINUTA" in page


class TestRenderPdf:
    def test_same_document_same_bytes(self) -> None:
        """No clock inside: rendering is reproducible."""
        doc = sample_document()
        assert render_pdf(doc, kind="auto") == render_pdf(doc, kind="auto")

    def test_draft_is_marked(self) -> None:
        """A proposal not yet confirmed renders as a minuta."""
        doc = sample_document()
        data = render_pdf(
            sample_document(proposal={**doc["proposal"], "status": "proposta"}), kind="auto"
        )
        assert "MINUTA" in pdf_text(data)


class TestRenderAutoPdf:
    def test_opens_and_holds_the_fields(self) -> None:
        """pypdf opens the PDF; its text holds every art. 37 value, accents intact."""
        doc = sample_document()
        data = render_auto_pdf(doc)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / "auto-de-infracao.pdf").write_bytes(data)
        reader = PdfReader(io.BytesIO(data))
        assert reader.metadata is not None
        assert reader.metadata.title == "Auto de Infração AI-4314548-2025-000012"
        text = pdf_text(data)
        assert "AUTO DE INFRAÇÃO" in text
        for value in auto_values(doc):
            assert value in text, value
        assert "Mapa da evidência" in text
        assert "Rota de referência" in text

    def test_missing_optional_data(self) -> None:
        """No plate, people, place or geometry still renders, saying what is missing."""
        text = pdf_text(render_auto_pdf(bare_document()))
        assert "Placa do veículo não informada" in text
        assert f"Nome do operador (condutor) {NO_DRIVER}" in text
        assert "Sem geometria para o mapa" in text

    def test_markup_in_values_is_text(self) -> None:
        """Values with markup are printed as typed, not interpreted."""
        text = pdf_text(render_notificacao_pdf(hostile_document()))
        assert "<script>alert(1)</script>" in text
        assert "A&B<1>" in text


class TestRenderNotificacaoPdf:
    def test_opens_and_holds_the_fields(self) -> None:
        """The notificação's text also holds holder, permit number and the excerpt verbatim."""
        doc = sample_document()
        data = render_notificacao_pdf(doc)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / "notificacao-de-penalidade.pdf").write_bytes(data)
        text = pdf_text(data)
        assert "NOTIFICAÇÃO DE PENALIDADE" in text
        for value in notificacao_values(doc):
            assert value in text, value


class TestRenderAutoHtml:
    def test_holds_the_fields_and_the_map(self) -> None:
        """The page holds every art. 37 value and an inline SVG map with the track polyline."""
        doc = sample_document()
        page = render_auto_html(doc)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / "auto-de-infracao.html").write_text(page, encoding="utf-8")
        assert page.startswith("<!DOCTYPE html>")
        assert '<html lang="pt-BR">' in page
        text = html_text(page)
        for value in auto_values(doc):
            assert value in text, value
        svg = page[page.index("<svg") : page.index("</svg>")]
        assert svg.count("<polyline") >= 2
        assert 'stroke="#1f5fbf"' in svg  # the track
        assert "stroke-dasharray" in svg  # the reference route

    def test_missing_optional_data(self) -> None:
        """No plate, people, place or geometry still renders, saying what is missing."""
        page = render_auto_html(bare_document())
        assert "<th>Placa do veículo</th><td>não informada</td>" in page
        assert f"<td>{NO_DRIVER}</td>" in page
        assert "Sem geometria para o mapa" in page

    def test_no_route_no_stand(self) -> None:
        """A track alone draws no dashed route."""
        page = render_auto_html(track_only_document())
        assert "<polyline" in page
        assert "stroke-dasharray" not in page


class TestRenderNotificacaoHtml:
    def test_holds_the_fields(self) -> None:
        """The page also holds holder, permit number and the excerpt."""
        doc = sample_document()
        text = html_text(render_notificacao_html(doc))
        for value in notificacao_values(doc):
            assert value in text, value

    def test_values_are_escaped(self) -> None:
        """Markup in a value is escaped, never emitted."""
        page = render_notificacao_html(hostile_document())
        assert "<script>" not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
        assert "A&amp;B&lt;1&gt;" in page


def _with(doc: Document, **proposal: Any) -> Document:
    return sample_document(proposal={**doc["proposal"], **proposal})


class TestWhatTheAgentAnswered:
    def test_auto_prints_the_exception_and_the_answer(self) -> None:
        """PB art. 25 III's "salvo com autorização do usuário" is printed with the answer."""
        rows = labelled(sample_document())
        text = rows["Exceção prevista no dispositivo"]
        assert "'salvo com autorização do usuário' (art. 25, III)" in text
        assert "Resposta do agente: Usuária ouvida em 17/03/2025" in text

    def test_issued_auto_with_unanswered_exception_is_refused(self) -> None:
        """An issued auto never prints an unresolved exception: rendering it is an error."""
        doc = sample_document()
        bad = _with(doc, exception={**doc["proposal"]["exception"], "answer": None})
        with pytest.raises(DocumentError, match="exceção não resolvida"):
            render_html(bad, kind="auto")
        with pytest.raises(DocumentError, match="exceção não resolvida"):
            render_pdf(bad, kind="notificacao")

    def test_draft_says_the_exception_is_to_be_answered(self) -> None:
        """A minuta may show the exception still open, saying the agent answers it."""
        doc = sample_document()
        draft = _with(
            doc, status="proposta", exception={**doc["proposal"]["exception"], "answer": None}
        )
        assert labelled(draft)["Exceção prevista no dispositivo"].endswith(
            "A responder pelo agente na confirmação."
        )

    def test_pontuacao_chosen_by_the_agent(self) -> None:
        """Where the text leaves it to the case (POA 57 XI), the auto prints the choice."""
        doc = _with(
            sample_document(),
            pontuacao="autorizatário",
            pontuacao_choices=["condutor", "autorizatário"],
        )
        assert (
            labelled(doc)["Pontuação"] == "autorizatário (escolhida pelo agente, conforme o caso)"
        )
        draft = _with(doc, pontuacao=None, status="proposta")
        assert labelled(draft)["Pontuação"] == (
            "a definir pelo agente: condutor ou autorizatário, conforme o caso"
        )

    def test_reincidence_names_the_earlier_autos(self) -> None:
        """The incidence names each earlier auto counted, with its date (local)."""
        text = labelled(sample_document())["Incidência"]
        assert text.endswith(
            "na janela de reincidência: auto AI-4314548-2024-000031 de 12/08/2024)"
        )

    def test_uncertain_citation_is_flagged(self) -> None:
        """A citation to check (PV art. 9) says so beside the provision and in its own row."""
        book = bundled_rulebooks()[("1100205", "taxi")]
        rule = book.rule_for("operating_while_barred", {"reason": "alvara_expired"})
        assert rule is not None and rule.citation_uncertain
        doc = _with(sample_document(), citation_uncertain=rule.citation_uncertain)
        rows = labelled(doc, "notificacao")
        assert rows["Dispositivo infringido"].endswith(
            "(numeração do inciso a confirmar no texto oficial)"
        )
        assert rows["Citação a conferir"] == rule.citation_uncertain


class TestSubtypeIrregularity:
    def test_suspended_use_is_not_called_use_without_licence(self) -> None:
        """A use during a registered suspension is not stated as a use without a licence."""
        from enforcement.documents import irregularity

        suspended = irregularity("unlicensed_stand_use", {"subtype": "suspended_use"})
        assert "suspensão" in suspended and "sem licença" not in suspended
        boarding = irregularity("unlicensed_stand_use", {"subtype": "boarding"})
        assert boarding == IRREGULARITIES["unlicensed_stand_use"]


class TestEveryKindHasAnIrregularity:
    def test_every_finding_kind_has_an_entry(self) -> None:
        """Each kind the detectors write has its irregularity in the documents."""
        from tracking.detectors.findings import KINDS

        assert [k for k in KINDS if k not in IRREGULARITIES] == []

    def test_no_kind_is_stated_by_its_code(self) -> None:
        """No irregularity, of any kind or reason, shows a detector's code."""
        from enforcement.documents import irregularity
        from tracking.detectors.driver_not_allowed import REASONS
        from tracking.detectors.findings import KINDS

        cases = [(k, {}) for k in KINDS] + [("driver_not_allowed", {"reason": r}) for r in REASONS]
        shown = {(k, str(d)): irregularity(k, d) for k, d in cases}
        codes = re.compile("|".join([*KINDS, *REASONS]))
        assert {c: text for c, text in shown.items() if codes.search(text)} == {}

    def test_driver_not_allowed_names_its_reason(self) -> None:
        """The auto states the driver case in pt-BR, with the article; never the code."""
        doc = sample_document()
        doc["findings"][0]["kind"] = "driver_not_allowed"
        doc["findings"][0]["details"] = {"reason": "ictp_suspended", "driver_id": "D7"}
        doc["proposal"] = {**doc["proposal"], "kind": "driver_not_allowed"}
        value = labelled(doc)["Irregularidade constatada"]
        assert value.startswith(IRREGULARITIES["driver_not_allowed"] + ": ICTP suspensa (art.")
        assert "driver_not_allowed" not in render_auto_html(doc)

    def test_unknown_kind_reads_its_name(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A kind missing from the table falls back to its pt-BR name, not the code."""
        from enforcement import documents

        monkeypatch.delitem(documents.IRREGULARITIES, "queue_jump")
        assert documents.irregularity("queue_jump", None) == "Desrespeito à fila"


class TestDriverAndAgent:
    def _doc(self, drivers: list[dict[str, Any]], name: str | None) -> Document:
        doc = sample_document()
        doc["vehicle"] = {**doc["vehicle"], "driver_name": name, "drivers": drivers}  # type: ignore[typeddict-item]
        return doc

    def test_registered_driver_by_name_and_id(self) -> None:
        """A driver the registry holds: their name and id, on the auto and the notificação."""
        doc = self._doc(
            [{"driver_id": "D7", "name": "Ana Exemplo", "registered": True}], "Ana Exemplo"
        )
        assert labelled(doc)["Nome do operador (condutor)"] == "Ana Exemplo (condutor D7)"
        rows = labelled(doc, "notificacao")
        assert rows["Nome do infrator (condutor)"] == "Ana Exemplo (condutor D7)"
        assert "Ana Exemplo (condutor D7)" in pdf_text(render_auto_pdf(doc))

    def test_unregistered_driver_by_id(self) -> None:
        """An id the registry lacks: the id, said not registered; no name invented."""
        doc = self._doc([{"driver_id": "X9", "name": None, "registered": False}], None)
        assert labelled(doc)["Nome do operador (condutor)"] == "condutor X9 (não cadastrado)"

    def test_several_drivers(self) -> None:
        """Findings naming two drivers: both are shown."""
        doc = self._doc(
            [
                {"driver_id": "D7", "name": "Ana Exemplo", "registered": True},
                {"driver_id": "X9", "name": None, "registered": False},
            ],
            "Ana Exemplo",
        )
        assert labelled(doc)["Nome do operador (condutor)"] == (
            "Ana Exemplo (condutor D7); condutor X9 (não cadastrado)"
        )

    def test_no_driver(self) -> None:
        """No driver named: "não identificado"."""
        doc = self._doc([], None)
        assert labelled(doc)["Nome do operador (condutor)"] == NO_DRIVER

    @pytest.mark.parametrize(
        ("name", "agent_id", "expected"),
        [
            ("Fiscal (demonstração)", "demo_fiscal", "Fiscal (demonstração) (demo_fiscal)"),
            (None, "demo_fiscal", "demo_fiscal"),
            (None, None, NOT_GIVEN),
        ],
    )
    def test_agent_by_name_and_login(
        self, name: str | None, agent_id: str | None, expected: str
    ) -> None:
        """The agent: their name with the login, the login alone without a name."""
        doc = sample_document(agent_name=name)
        doc["proposal"] = {**doc["proposal"], "agent_id": agent_id}
        assert labelled(doc)["Agente autuador"] == expected
