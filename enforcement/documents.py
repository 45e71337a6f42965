"""The auto de infração and the notificação de penalidade, in pt-BR, to HTML and PDF (pure).

Both documents are rendered from one plain-data :class:`Document` (no database, no clock): the
proposal record (:func:`enforcement.proposals.proposal_record`, plus ``auto_number``,
``agent_id``, ``confirmed_at`` and ``notified_at`` once reviewed), the vehicle and the people
responsible, the place, the findings it rests on and their geometry. One field table
(:func:`document_fields`) feeds both formats; what each document holds follows Pinto Bandeira's
Lei 169/2015, the strictest of the bundled texts on the matter:

auto de infração (art. 37)
    operator's name when possible, plate, make or model, place, date and time, the irregularity
    found, the agent.
notificação de penalidade (art. 38)
    adds the holder's name, the infringed provision and its description (the verbatim excerpt)
    and the permit number.

Both also carry what the agent answered on confirming: the provision's own exception ("salvo
com autorização do usuário") with the agent's answer — an issued document with an unanswered
exception is refused (:class:`DocumentError`) — and the pontuação the agent chose where the text
leaves it to the case; the earlier autos a reincidence counted (number and date); a warning
where the citation must be checked in the official text. They carry the sanction (penalty,
measure, fine or why there is none), the procedural deadlines (with due dates once the workflow
has set them), a concise summary of the evidence (measures and the thresholds they were
compared with) and a map of the evidence drawn without tiles: the GPS track, the stand, the
reference route and the place of the finding, in a local equirectangular frame
(:func:`fit_map`), as inline SVG in HTML and a reportlab ``Drawing`` in PDF. Times are shown
in the municipality's zone (``document["timezone"]``). A proposal not yet confirmed renders as
a draft (minuta).
"""

from __future__ import annotations

import datetime as dt
import html
import io
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, NotRequired, TypedDict
from xml.sax.saxutils import escape as xml_escape
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from reportlab.graphics.shapes import Circle, Drawing, Polygon, PolyLine, Rect, String
from reportlab.lib import colors
from reportlab.lib.enums import TA_CENTER
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
from reportlab.lib.units import mm
from reportlab.pdfbase.pdfmetrics import stringWidth
from reportlab.pdfgen.canvas import Canvas
from reportlab.platypus import KeepTogether, Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

from enforcement._errors import DocumentError
from enforcement.proposals import findings_count, format_fine
from geo.calendar import brasilia_time
from geo.crs import EARTH_RADIUS_M
from tracking.detectors.findings import kind_name

DocumentKind = Literal["auto", "notificacao"]
DOCUMENT_KINDS: tuple[DocumentKind, ...] = ("auto", "notificacao")
Coord = Sequence[float]
"""A position ``(lon, lat)`` in EPSG:4326."""

NOT_GIVEN = "não informado"
NOT_GIVEN_F = "não informada"
"""The same for a field named by a feminine noun (placa, legislação, gravidade…)."""
NO_DRIVER = "não identificado"
NOT_REGISTERED = "não cadastrado"
"""Said of a driver id the findings name that the registry of drivers does not hold."""
NO_FINE_AMOUNT = "valor não fixado neste texto legal"
FONT = "Helvetica"
"""Built-in PDF font: its WinAnsi encoding covers every pt-BR letter and ``º ª § °``."""
FONT_BOLD = "Helvetica-Bold"


class DriverRef(TypedDict):
    """A driver the findings name (``details.driver_id``), as the registry of drivers has them."""

    driver_id: str
    name: str | None
    """Registered name; None when not registered (never guessed)."""
    registered: bool


class Vehicle(TypedDict):
    """The vehicle and the people responsible for it (any may be None when unknown)."""

    prefixo: str
    plate: str | None
    make_model: str | None
    permit_number: str | None
    holder_name: str | None
    """Autorizatário / permissionário."""
    driver_name: str | None
    """Condutor (operador): the registered name(s); None renders "não identificado"."""
    drivers: NotRequired[list[DriverRef]]
    """The drivers the findings name, in order: shown with their id (an id the registry does
    not hold as "não cadastrado"); absent or empty, ``driver_name`` alone is shown."""


class Place(TypedDict):
    """Where the infraction was found."""

    text: str | None
    """Stand name or address, or ``"lat, lon"``."""
    municipality_name: str
    """The rulebook's municipality (the issuing body's)."""
    outside: NotRequired[bool]
    """True when the place is beyond that municipality (a ride begun outside it)."""


def place_municipality(place: Place) -> str:
    """Return the municipality of the place as a document states it (pt-BR)."""
    name = _given(place.get("municipality_name"))
    return f"fora de {name}" if place.get("outside") else name


class EvidenceFinding(TypedDict):
    """One finding the proposal rests on (the ``findings.geojson`` properties)."""

    finding_id: str
    kind: str
    started_at: str | dt.datetime
    ended_at: str | dt.datetime
    confidence: float
    details: dict[str, Any]


class Geometry(TypedDict, total=False):
    """Evidence geometry in EPSG:4326, every position ``(lon, lat)``; all keys optional.

    Without ``track`` (``route``), the ``driven_line`` (``reference_line``) of a finding's
    details is drawn, as ``longer_route`` findings carry them.
    """

    track: Sequence[Coord]
    stand: Sequence[Coord] | None
    """Outer ring of the stand polygon."""
    route: Sequence[Coord] | None
    """Reference route line."""
    point: Coord | None
    """Place of the finding."""
    area: Sequence[Coord] | None
    """Outer ring of the finding's polygon (e.g. an illegal stand)."""


class Document(TypedDict):
    """Everything an auto de infração or a notificação de penalidade shows.

    ``proposal`` is a :func:`enforcement.proposals.proposal_record` (``provision``, ``excerpt``,
    ``gravity``, ``penalty``, ``measure``, ``pontuacao``, ``fine``, ``fine_note``,
    ``reincidence_count``, ``incidence``, ``deadlines``, ``committed_at``/``committed_until``,
    ``law``, ``municipality``, ``status``…) with, once reviewed, ``auto_number``, ``agent_id``,
    ``confirmed_at`` and ``notified_at`` (ISO 8601 strings or aware datetimes).
    """

    proposal: Mapping[str, Any]
    vehicle: Vehicle
    place: Place
    findings: list[EvidenceFinding]
    geometry: Geometry
    timezone: str
    """The municipality's zone, e.g. ``America/Sao_Paulo``: every time is shown in it."""
    authority: NotRequired[str | None]
    """Issuing body; default ``Prefeitura Municipal de <municipality_name>``."""
    agent_name: NotRequired[str | None]
    """The agent's name, shown with ``agent_id``."""


TITLES: dict[DocumentKind, str] = {
    "auto": "Auto de Infração",
    "notificacao": "Notificação de Penalidade",
}

IRREGULARITIES = {
    "unlicensed_stand_use": "Uso de ponto de táxi sem licença de estacionamento",
    "habitual_absence": "Ausência habitual do ponto de táxi licenciado",
    "illegal_stand_formation": "Espera de passageiros fora de ponto de táxi (ponto irregular)",
    "longer_route": "Itinerário mais extenso que o necessário",
    "tracking_gap": "Rastreamento indisponível durante o serviço",
    "gps_anomaly": "Posições de GPS impossíveis (possível interferência no rastreador)",
    "operating_while_barred": "Operação com o veículo ou a permissão em situação irregular",
    "inactivity": "Veículo sem operar além do prazo",
    "outside_municipality": "Corrida com origem fora do município",
    "queue_jump": "Desrespeito à ordem da fila no ponto de táxi",
    "flag2_misuse": "Uso indevido da bandeira 2",
    "driver_not_allowed": "Prestação do serviço por condutor não autorizado no prefixo",
}
"""The irregularity found, per finding kind, as the documents state it."""
REASON_KINDS = ("driver_not_allowed",)
"""Kinds whose irregularity names its main reason (``details.reason``, in pt-BR): one kind
covers cases the law types apart (unregistered driver, suspended ICTP, auxiliar only…)."""

SUBTYPE_IRREGULARITIES = {
    ("unlicensed_stand_use", "suspended_use"): (
        "Uso de ponto de táxi durante suspensão ou impedimento registrado (art. 45, parágrafo "
        "único)"
    ),
}
"""Where a sub-case is another irregularity than its kind's (``details.subtype``)."""


def irregularity(kind: str, details: Mapping[str, Any] | None) -> str:
    """Return the irregularity a finding of ``kind`` with ``details`` states.

    A kind without an entry in :data:`IRREGULARITIES` reads as its pt-BR name
    (:func:`tracking.detectors.findings.kind_name`), never as the code.
    """
    subtype = (details or {}).get("subtype")
    sub = SUBTYPE_IRREGULARITIES.get((kind, str(subtype)))
    if sub is not None:
        return sub
    text = IRREGULARITIES.get(kind) or kind_name(kind)
    reason = _VALUES.get(str((details or {}).get("reason"))) if kind in REASON_KINDS else None
    return f"{text}: {reason}" if reason else text


STATUS_LABELS = {
    "proposta": "proposta (minuta, não confirmada por agente)",
    "confirmada": "confirmada (auto lavrado)",
    "descartada": "descartada",
    "notificada": "notificada",
    "em_defesa": "em defesa",
    "defesa_deferida": "defesa deferida",
    "defesa_indeferida": "defesa indeferida",
    "definitiva": "decisão definitiva (sem recurso administrativo cabível)",
    "arquivada": "arquivada",
}
DEADLINE_LABELS = {
    "notification": "Prazo de notificação",
    "defence": "Prazo de defesa",
    "appeal": "Prazo de recurso",
    "payment": "Prazo de pagamento",
}
DEADLINE_FROM = {
    "auto": ("da lavratura do auto", "confirmed_at"),
    "notification": ("da notificação", "notified_at"),
    "decision": ("da decisão", "decided_at"),
    "decision_notification": ("da notificação da decisão", "decision_notified_at"),
    "appeal_end": (
        "do fim do prazo de recurso sem interposição, ou do indeferimento do recurso",
        "",
    ),
}
"""A deadline's start (``from``): its pt-BR words and the proposal's date it counts from ('':
no review step dates it, so no due date is computed)."""

# --- field table --------------------------------------------------------------------------

_SECTIONS = (
    ("id", "Identificação"),
    ("who", "Veículo e responsáveis"),
    ("where", "Local, data e hora da constatação"),
    ("what", "Infração"),
    ("sanction", "Penalidade e medida administrativa"),
    ("deadlines", "Prazos"),
)
_AUTO_FIELDS = (
    "auto_number confirmed_at status law agent "
    "operator prefixo plate make_model "
    "place municipality when "
    "irregularity provision citation exception repetition gravity "
    "penalty measure suspension fine fine_payer pontuacao reincidence deadlines"
)
_NOTIFICACAO_FIELDS = (
    "auto_number confirmed_at notified_at status law agent "
    "holder permit_number infractor prefixo plate make_model "
    "place municipality when "
    "irregularity provision citation excerpt exception repetition gravity "
    "penalty measure suspension fine fine_payer pontuacao reincidence deadlines"
)
_FIELDS: dict[DocumentKind, tuple[str, ...]] = {
    "auto": tuple(_AUTO_FIELDS.split()),
    "notificacao": tuple(_NOTIFICACAO_FIELDS.split()),
}
"""Fields of each document, in order (arts. 37 and 38 of Pinto Bandeira's Lei 169/2015)."""


def _given(value: Any, *, none: str = NOT_GIVEN) -> str:
    text = "" if value is None else str(value).strip()
    return text or none


NO_AUTO = "Proposta descartada: não há auto de infração."
"""Why a dismissed proposal has no document (web, API and CLI)."""
NO_PENALTY = "Defesa deferida: o auto caiu, e não há penalidade a notificar."
"""Why an auto whose defence was accepted has no notificação de penalidade."""


def document_fields(document: Document, *, kind: DocumentKind) -> list[tuple[str, str, str]]:
    """Return the field table of a document: ``(section, label, value)`` rows, in order.

    Parameters
    ----------
    document : Document
        The document's data.
    kind : {"auto", "notificacao"}
        Auto de infração or notificação de penalidade.

    Returns
    -------
    list of tuple of str
        Section title, field label and value (plain text, not escaped); a missing optional
        value reads "não informado" (the driver: "não identificado"; a driver id the
        registry lacks: "não cadastrado").

    Raises
    ------
    DocumentError
        ``kind`` is unknown, the proposal was dismissed (:data:`NO_AUTO`), or the document lacks
        a required key, names an unknown time zone or holds a time without zone.
    """
    if kind not in _FIELDS:
        msg = f"'kind' foi {kind!r}; esperado um de {', '.join(DOCUMENT_KINDS)}"
        raise DocumentError(msg)
    _check(document)
    if kind == "notificacao" and not has_penalty(document["proposal"]):
        raise DocumentError(NO_PENALTY)
    p, v, tz = document["proposal"], document["vehicle"], ZoneInfo(document["timezone"])
    payer = (p.get("fine_payer") or {}).get("who") or "autorizatário/permissionário"
    rows: dict[str, tuple[str, str, str]] = {
        "auto_number": ("id", "Nº do auto de infração", p.get("auto_number") or "não atribuído"),
        "confirmed_at": ("id", "Lavrado em", _when(p.get("confirmed_at"), tz) or NOT_GIVEN),
        "notified_at": ("id", "Notificado em", _day(p.get("notified_at"), tz) or NOT_GIVEN),
        "status": (
            "id",
            "Situação",
            STATUS_LABELS.get(p.get("status", ""), _given(p.get("status"))),
        ),
        "law": ("id", "Legislação", _given(p.get("law"), none=NOT_GIVEN_F)),
        "agent": ("id", "Agente autuador", _agent(document)),
        "holder": ("who", f"Nome do {payer}", _given(v.get("holder_name"))),
        "permit_number": ("who", "Nº da permissão", _given(v.get("permit_number"))),
        "operator": ("who", "Nome do operador (condutor)", _drivers(v)),
        "infractor": ("who", "Nome do infrator (condutor)", _drivers(v)),
        "prefixo": ("who", "Prefixo", _given(v.get("prefixo"))),
        "plate": ("who", "Placa do veículo", _given(v.get("plate"), none=NOT_GIVEN_F)),
        "make_model": ("who", "Marca/modelo", _given(v.get("make_model"))),
        "place": ("where", "Local", _given(document["place"].get("text"))),
        "municipality": ("where", "Município", place_municipality(document["place"])),
        "when": ("where", "Data e hora", _interval(p, tz)),
        "irregularity": ("what", "Irregularidade constatada", _irregularity(document)),
        "provision": ("what", "Dispositivo infringido", _provision(p)),
        "citation": ("what", "Citação a conferir", p.get("citation_uncertain") or ""),
        "excerpt": ("what", "Descrição do dispositivo", _given(p.get("excerpt"), none=NOT_GIVEN_F)),
        "exception": ("what", "Exceção prevista no dispositivo", _exception(p)),
        "repetition": ("what", "Repetição ou persistência", _repetition(p)),
        "gravity": (
            "what",
            "Gravidade",
            _given(p.get("gravity") or p.get("gravity_note"), none=NOT_GIVEN_F),
        ),  # fmt: skip
        "penalty": ("sanction", "Penalidade", _given(p.get("penalty"), none=NOT_GIVEN_F)),
        "measure": ("sanction", "Medida administrativa", p.get("measure") or "nenhuma"),
        "suspension": ("sanction", "Suspensão", _days(p.get("suspension_days"))),
        "fine": ("sanction", "Multa", _fine(p)),
        "fine_payer": ("sanction", "Responsável pela multa", _payer(p)),
        "pontuacao": ("sanction", "Pontuação", _pontuacao(p)),
        "reincidence": ("sanction", "Incidência", _incidence(p, tz)),
    }
    out: list[tuple[str, str, str]] = []
    titles = dict(_SECTIONS)
    for key in _FIELDS[kind]:
        if key == "deadlines":
            out += [(titles["deadlines"], lab, val) for lab, val in _deadlines(p, tz)]
            continue
        section, label, value = rows[key]
        if key in ("suspension", "pontuacao", "citation", "exception", "repetition") and not value:
            continue  # only when the law (or the rule) has them
        if key == "fine_payer" and rows["fine"][2].startswith("sem multa"):
            continue  # no one pays a fine there is not
        out.append((titles[section], label, value))
    order = {title: i for i, (_, title) in enumerate(_SECTIONS)}
    return sorted(out, key=lambda r: order[r[0]])  # stable: field order kept within a section


def _check(document: Mapping[str, Any]) -> None:
    for key in ("proposal", "vehicle", "place", "findings", "geometry", "timezone"):
        if key not in document:
            msg = f"o documento não tem '{key}'"
            raise DocumentError(msg)
    p = document["proposal"]
    if p.get("status") == "descartada":
        raise DocumentError(NO_AUTO)
    exception = p.get("exception") or {}
    if exception and not exception.get("answer") and p.get("status", "proposta") != "proposta":
        msg = (
            f"a proposta {p.get('proposal_id')} ({p.get('provision')}) foi confirmada sem resposta "
            f"à exceção do dispositivo ('{exception.get('excerpt')}'): um auto não imprime exceção "
            "não resolvida"
        )
        raise DocumentError(msg)
    try:
        ZoneInfo(str(document["timezone"]))
    except (ZoneInfoNotFoundError, ValueError):
        msg = f"'timezone' foi {document['timezone']!r}; esperado um fuso IANA (America/Sao_Paulo)"
        raise DocumentError(msg) from None


def _instant(value: Any) -> dt.datetime | None:
    if value is None or value == "":
        return None
    try:
        at = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
    except ValueError:
        msg = f"data/hora inválida: {value!s}; esperado ISO 8601 com fuso horário"
        raise DocumentError(msg) from None
    if at.tzinfo is None:
        msg = f"data/hora sem fuso horário: {value!s}"
        raise DocumentError(msg)
    return at


def _offset(at: dt.datetime) -> str:
    minutes = int((at.utcoffset() or dt.timedelta()).total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    return f"UTC{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def _zone(tz: ZoneInfo, local: dt.datetime) -> str:
    """Name the zone of a local time: "horário de Brasília, UTC-03:00", else its IANA key."""
    offset = _offset(local)
    if brasilia_time(tz.key, local):
        return f"horário de Brasília, {offset}"
    return f"horário local, {tz.key}, {offset}"


def _when(value: Any, tz: ZoneInfo, *, zone: bool = True) -> str:
    at = _instant(value)
    if at is None:
        return ""
    local = at.astimezone(tz)
    text = local.strftime("%d/%m/%Y %H:%M:%S")
    return f"{text} ({_zone(tz, local)})" if zone else text


def _day(value: Any, tz: ZoneInfo) -> str:
    """Return a review step's local date (the agent may give no hour; periods count in days)."""
    at = _instant(value)
    return "" if at is None else at.astimezone(tz).strftime("%d/%m/%Y")


def shown_end(start: Any, end: Any, tz: ZoneInfo) -> dt.datetime | None:
    """Return an interval's end in ``tz`` as the documents show it (None: no end).

    An end at local midnight after the start (a window of whole days, e.g. a week of
    ``inactivity``) is shown as the last second of the day before: "a 10/03/2024 23:59:59",
    not "a 11/03/2024 00:00:00", a day the window does not include.
    """
    a, b = _instant(start), _instant(end)
    if b is None:
        return None
    local = b.astimezone(tz)
    if local.time() == dt.time(0) and (a is None or a < b):
        return local - dt.timedelta(seconds=1)
    return local


def _interval(p: Mapping[str, Any], tz: ZoneInfo) -> str:
    start, end = _instant(p.get("committed_at")), _instant(p.get("committed_until"))
    if start is None:
        return NOT_GIVEN
    a = start.astimezone(tz)
    zone = _zone(tz, a)
    if end is None or end == start:
        return f"{a:%d/%m/%Y} às {a:%H:%M:%S} ({zone})"
    b = shown_end(start, end, tz) or a
    if b.date() == a.date():
        return f"{a:%d/%m/%Y}, das {a:%H:%M:%S} às {b:%H:%M:%S} ({zone})"
    return f"de {a:%d/%m/%Y %H:%M:%S} a {b:%d/%m/%Y %H:%M:%S} ({zone})"


def _agent(document: Document) -> str:
    agent_id, name = document["proposal"].get("agent_id"), document.get("agent_name")
    if name and agent_id:
        return f"{name} ({agent_id})"
    return str(name or agent_id or NOT_GIVEN)


def driver_ids(details: Iterable[Any]) -> list[str]:
    """Return the distinct ``driver_id`` the findings' details name, in order (blanks left out)."""
    out: list[str] = []
    for d in details:
        raw = d.get("driver_id") if isinstance(d, Mapping) else None
        did = "" if raw is None else str(raw).strip()
        if did and did not in out:
            out.append(did)
    return out


def _drivers(v: Vehicle) -> str:
    refs = v.get("drivers") or []
    if not refs:
        return v.get("driver_name") or NO_DRIVER
    out = []
    for ref in refs:
        name = (ref.get("name") or "").strip()
        if not ref.get("registered"):
            out.append(f"condutor {ref['driver_id']} ({NOT_REGISTERED})")
        elif name:
            out.append(f"{name} (condutor {ref['driver_id']})")
        else:
            out.append(f"condutor {ref['driver_id']} (nome {NOT_GIVEN} no cadastro)")
    return "; ".join(out)


def _provision(p: Mapping[str, Any]) -> str:
    if not p.get("provision"):
        return NOT_GIVEN
    law = f" {_of(str(p['law']))} {p['law']}" if p.get("law") else ""
    uncertain = p.get("citation_uncertain")
    warning = f" ({str(uncertain).split(':')[0]})" if uncertain else ""
    return f"{p['provision']}{law}{warning}"


def _of(law: str) -> str:
    """Return the contraction of "de" a law's title takes: "do Decreto", "da Lei"."""
    word = law.split(" ", 1)[0].lower()
    return "do" if word in ("decreto", "código", "regulamento", "estatuto") else "da"


def _exception(p: Mapping[str, Any]) -> str:
    exception = p.get("exception") or {}
    if not exception:
        return ""
    head = (
        f"'{exception.get('excerpt')}' ({exception.get('provision')}). {exception.get('question')}"
    )
    if exception.get("answer"):
        return f"{head} Resposta do agente: {exception['answer']}"
    return f"{head} A responder pelo agente na confirmação."


def _repetition(p: Mapping[str, Any]) -> str:
    rep = p.get("repetition") or {}
    if not rep:
        return ""
    text = (
        f"{findings_count(int(rep['most_findings_in_window']))} do veículo em "
        f"{rep['window_hours']:g} h (mínimo {rep['min_findings']})"
    )
    if rep.get("min_duration_s"):
        text += (
            f"; o mais longo durou {rep['longest_s']:.0f} s (persistente a partir de "
            f"{rep['min_duration_s']:g} s)"
        )
    return f"{text} ({rep.get('provision')})"


def _pontuacao(p: Mapping[str, Any]) -> str:
    if p.get("pontuacao"):
        chosen = " (escolhida pelo agente, conforme o caso)" if p.get("pontuacao_choices") else ""
        return f"{p['pontuacao']}{chosen}"
    if p.get("pontuacao_choices"):
        return f"a definir pelo agente: {' ou '.join(p['pontuacao_choices'])}, conforme o caso"
    return ""


def _irregularity(document: Document) -> str:
    p = document["proposal"]
    kind = str(p.get("kind") or (document["findings"][0]["kind"] if document["findings"] else ""))
    first = document["findings"][0].get("details") if document["findings"] else None
    text = irregularity(kind, first) if kind else NOT_GIVEN
    return f"{text} ({p['provision']})" if p.get("provision") else text


def _days(value: Any) -> str:
    return f"{int(value)} dias" if value else ""


def _fine(p: Mapping[str, Any]) -> str:
    fine, note = p.get("fine"), p.get("fine_note")
    if fine:
        return format_fine(float(fine["amount"]), str(fine["unit"]))
    if "multa" in str(p.get("penalty") or "").lower() or not note:
        return NO_FINE_AMOUNT + (f" ({note})" if note else "")
    return str(note) if str(note).startswith("sem multa") else f"sem multa ({note})"


def _payer(p: Mapping[str, Any]) -> str:
    payer = p.get("fine_payer") or {}
    if not payer.get("who"):
        return NOT_GIVEN
    return str(payer["who"]) + (f" ({payer['provision']})" if payer.get("provision") else "")


def _incidence(p: Mapping[str, Any], tz: ZoneInfo) -> str:
    count = int(p.get("reincidence_count") or 0)
    incidence = int(p.get("incidence") or count + 1)
    if not count:
        none = "sem infração anterior do mesmo dispositivo que conte na reincidência"
        return f"{incidence}ª ({none})"
    plural = "infrações anteriores" if count > 1 else "infração anterior"
    text = f"{incidence}ª ({count} {plural} do mesmo dispositivo na janela de reincidência"
    priors = [
        f"auto {x.get('auto_number') or 'sem número'} de "
        f"{_instant(x['committed_at']).astimezone(tz):%d/%m/%Y}"  # type: ignore[union-attr]
        for x in p.get("reincidence_priors") or []
        if x.get("committed_at")
    ]
    return text + (f": {'; '.join(priors)})" if priors else ")")


def _deadlines(p: Mapping[str, Any], tz: ZoneInfo) -> list[tuple[str, str]]:
    rows = []
    order = {name: i for i, name in enumerate(DEADLINE_LABELS)}
    deadlines = sorted((p.get("deadlines") or {}).items(), key=lambda kv: order.get(kv[0], 99))
    for name, d in deadlines:  # in procedural order (the database's JSON sorts its keys)
        start, start_key = DEADLINE_FROM.get(str(d.get("from")), (f"de {d.get('from')}", ""))
        unit = "dias úteis" if d.get("counting") == "business_days" else "dias"
        text = f"{d['days']} {unit} {start} ({d.get('provision') or 'sem dispositivo'})"
        if d.get("due"):
            text += f": até {_when(d['due'], tz, zone=False)}"
        elif start_key and p.get(start_key):
            text += f", contados de {_day(p[start_key], tz)}"
        else:
            text += ": vencimento fixado quando o prazo começar"
        if d.get("on_lapse"):
            text += f"; sob pena de {d['on_lapse']}"
        if d.get("suspensive"):
            text += "; com efeito suspensivo"
        rows.append((DEADLINE_LABELS.get(name, f"Prazo ({name})"), text))
    if rows:
        return rows
    law = f" ({p['law']})" if p.get("law") else ""
    return [
        (
            "Prazos",
            f"não fixados no texto legal aplicado{law}: a defesa e o recurso seguem os prazos da "
            "legislação municipal de processo administrativo",
        )
    ]


# --- evidence summary ---------------------------------------------------------------------

LABELS = {
    # a multi-vehicle finding as evidence against one vehicle (accused_evidence)
    "vehicle_n_stops": "esperas deste veículo no local",
    "vehicle_n_boardings": "esperas deste veículo com embarque",
    "vehicle_first_wait_at": "início da primeira espera deste veículo",
    "vehicle_last_wait_ended_at": "fim da última espera deste veículo",
    "method": "referência",
    "driven_m": "distância percorrida",
    "reference_m": "rota de referência",
    "ratio_straight_line": "razão percorrida/linha reta",
    "peer_trips.count": "corridas semelhantes comparadas",
    "peer_trips.reference_straight_line_ratio": (
        "3/4 das semelhantes percorreram até (× linha reta)"
    ),
    "ratio": "razão percorrida/referência",
    "excess_km": "excesso",
    "fastest_route_m": "rota mais rápida",
    "ratio_fastest_route": "razão percorrida/rota mais rápida",
    "duration_s": "duração",
    "fastest_route_s": "tempo da rota mais rápida",
    "pattern": "padrão",
    "loop_m": "volta",
    "on_reasonable_route_share": "fração em rota razoável",
    "reference_may_be_wrong": "referência possivelmente errada",
    "n_fixes": "posições GPS",
    "dwell_s": "permanência",
    "n_fixes_inside": "posições dentro do ponto",
    "n_fixes_stay": "posições da chegada à saída",
    "wait_s": "espera",
    "boarding_distance_m": "distância do taxímetro ligado ao ponto",
    "boarding_lag_s": "tempo da saída do ponto ao taxímetro ligado",
    "gap_s": "intervalo sem posições",
    "cadence_s": "intervalo habitual do rastreador (descontado do silêncio)",
    "filled_at": "posição do intervalo recebida depois (achado retirado)",
    "displacement_m": "deslocamento",
    "implied_speed_kmh": "velocidade implícita",
    "accuracy_m": "precisão informada",
    "pickup_accuracy_m": "precisão informada da posição do embarque",
    "own_wait_s": "tempo no ponto até o embarque",
    "distance_m": "distância",
    "distance_to_boundary_m": "distância ao limite municipal",
    "nearest_stand_m": "ponto de táxi mais próximo",
    "idle_days": "dias sem operar",
    "counted_idle_days": "dias sem operar considerados",
    "feed_gap_days": "dias sem dados da frota (falha ou amostra do rastreamento), não contados",
    "use": "uso do ponto",
    "suspension.kind": "registro no cadastro",
    "suspension.starts_on": "início da suspensão ou do impedimento",
    "suspension.ends_on": "fim da suspensão ou do impedimento",
    "suspension.reason": "motivo registrado",
    "suspension.process_ref": "processo",
    "licence_end": "licença encerrada",
    "licence_ended.valid_from": "licença válida desde",
    "licence_ended.valid_until": "licença válida até",
    "licence_ended.reason": "motivo do fim da licença",
    "queue_position": "posição na fila",
    "n_ahead": "veículos à frente",
    "n_vehicles": "veículos",
    "n_days": "dias",
    "days_present": "dias presente",
    "days_operating": "dias operando",
    "days_expired": "dias vencido",
    "share": "fração",
    "reason": "motivo",
    "status": "situação",
    "document": "documento",
    "status_since": "situação desde",
    "status_until": "situação até",
    "status_known_since": "situação conhecida desde",
    "alvara_valid_until": "alvará válido até",
    "inspection_valid_until": "vistoria válida até",
    "cnh_valid_until": "CNH válida até",
    "ictp_valid_until": "ICTP válida até",
    "alvara_first_issued_on": "primeiro alvará em",
    "days_before": "dias antes",
    "termo_recolhido_since": "termo recolhido desde",
    "termo_recolhido_until": "termo recolhido até",
    "substitution_since": "substituição desde",
    "days_since": "dias desde",
    "days_over": "dias além do prazo",
    "age_years": "idade do veículo (anos)",
    "last_inspection_on": "última vistoria em",
    "counted_from": "idade contada a partir de",
    "year": "ano de fabricação",
    "first_registered_on": "primeiro registro em",
    "base_year": "ano-base da idade",
    "min_ratio": "razão mínima",
    "min_excess_m": "excesso mínimo",
    "min_reference_m": "referência mínima",
    "max_snap_m": "distância máxima à via",
    "max_gap_s": "intervalo máximo",
    "boarding_grace_m": "distância máxima ao ponto",
    "boarding_grace_s": "tempo máximo após a saída",
    "boarding_max_m": "distância máxima do embarque ao ponto para autuar",
    "min_inside_share": "fração mínima das posições dentro do ponto",
    "max_speed_kmh": "velocidade máxima",
    "min_wait_s": "espera mínima",
    "max_idle_days": "dias ociosos máximos",
    "min_feed_share": "parcela mínima, do dia de maior movimento, de veículos com dados no dia",
    "min_days": "dias mínimos",
    "min_vehicles": "veículos mínimos",
    "min_vehicle_days": "dias mínimos de espera de cada veículo (um com embarque)",
    "min_boarding_share": "fração mínima de esperas com embarque",
    "boundary_tolerance_m": "tolerância do limite",
    "loop_radius_m": "raio de volta",
    # stands and queues
    "subtype": "caso",
    "licensed": "com permissão",
    "accessible": "táxi acessível",
    "arrived_at": "chegada",
    "waiting_since": "esperando desde",
    "departed_at": "saída",
    "boarded_at": "embarque",
    "meter_before": "taxímetro antes",
    "meter_after": "taxímetro depois",
    "meter_switch_gap_s": "tempo até o taxímetro ligar",
    "min_wait_ahead_s": "espera mínima do veículo à frente",
    "max_wait_ahead_s": "espera máxima do veículo à frente",
    "tolerance_s": "tolerância",
    "min_away_s": "ausência mínima antes da chegada",
    "min_approach_m": "distância mínima da posição anterior à chegada",
    "days_licensed": "dias com permissão",
    "days_suspended": "dias suspenso do ponto",
    "min_operating_days": "dias mínimos operando",
    "min_presence_s": "presença mínima",
    "min_presence_share": "fração mínima de presença",
    "reach_m": "distância do ponto que conta como presença",
    "silent_reach_m": "distância do ponto de um silêncio que conta como presença",
    "min_silence_s": "silêncio mínimo do rastreador",
    "unmetered": "sem dados do taxímetro (dias em movimento contados como operação)",
    "window_days": "janela",
    "n_stops": "paradas",
    "n_boardings": "esperas com embarque",
    "extent_m": "extensão",
    "cluster_radius_m": "raio do agrupamento",
    "stand_buffer_m": "distância mínima a um ponto",
    "min_free_share": "fração mínima com taxímetro livre",
    "h3_resolution": "resolução H3",
    # routes
    "straight_m": "linha reta",
    "matched_m": "distância casada com a malha",
    "matched_route_s": "tempo da rota casada",
    "time_ratio": "razão de tempo",
    "n_dropped_fixes": "posições descartadas",
    "n_skipped_steps": "passos ignorados",
    "min_straight_line_ratio": "razão mínima à linha reta",
    "min_time_ratio": "razão mínima de tempo",
    "fastest_time_factor": "fator de tempo da rota mais rápida",
    "min_matched_share": "fração mínima casada com a malha",
    "max_unexplained_share": "fração máxima sem explicação",
    "min_peer_trips": "corridas semelhantes mínimas",
    "peer_quantile": "quantil das corridas semelhantes tomado como referência",
    "max_peer_trips": "corridas semelhantes máximas",
    "waypoint_diameter_m": "diâmetro de uma parada no caminho",
    "waypoint_min_stop_s": "parada mínima no caminho",
    "errand_min_stop_s": "parada curta no caminho (pedido do passageiro ou semáforo)",
    "hidden_ride_gap_s": "intervalo parado que pode esconder outra corrida",
    "round_trip_m": "distância mínima entre embarque e desembarque (ida e volta)",
    # tracking
    "rule": "critério",
    "moved": "deslocou-se",
    "parked_radius_m": "raio de veículo parado",
    "still": "parado a maior parte do silêncio",
    "still_speed_kmh": "velocidade em linha reta abaixo da qual o veículo esteve parado",
    "after_ride": "silêncio além de uma corrida, terminado sem passageiro",
    "max_ride_s": "corrida mais longa considerada",
    "dt_s": "intervalo entre as posições",
    "n_steps": "passos",
    "n_anomalous_steps": "passos impossíveis",
    "lasted_s": "duração (sem os silêncios do rastreador)",
    "min_jump_m": "salto mínimo",
    "max_excursion_s": "desvio máximo (ida e volta)",
    # service and registry
    "local_date": "dia",
    "n_trips": "corridas",
    "service_s": "tempo em serviço",
    "min_trip_duration_s": "duração mínima da corrida",
    "trip_started_at": "início da corrida",
    "trip_ended_at": "fim da corrida",
    "trip_duration_s": "duração da corrida",
    "meter_switch_seen": "troca do taxímetro registrada",
    "as_of": "data de referência",
    "current_status": "situação cadastral",
    "excused_days": "dias justificados",
    "last_operation_at": "última operação",
    "last_operation_local_date": "dia da última operação",
    "last_operation_source": "fonte da última operação",
    "never_seen": "nunca visto no rastreamento",
    "silent": "rastreador em silêncio na maior parte do prazo",
    "seen_idle_days": "dias visto sem operar",
    "last_fix_at": "última posição",
    "tariff": "tarifa",
    "tariff2_since": "bandeira 2 desde",
    "left_municipality": "corrida saiu do município",
    "n_fixes_outside": "posições fora do limite municipal",
    "left_at": "primeira posição fora do limite municipal",
    "carry_over": "continua do dia anterior",
    "n_speed_flagged": "posições com velocidade suspeita",
    "min_duration_s": "duração mínima",
    "role": "papel do condutor",
    "max_auxiliaries": "auxiliares permitidos",
    "grace_days": "dias de prorrogação da validade",
    "cnh_grace_days": "prorrogação da validade da CNH (dias)",
    "ictp_grace_days": "prorrogação da validade da ICTP (dias)",
    "auxiliary_only_min_days": "dias mínimos só com auxiliares",
    # thresholds of the fleet and registry rules
    "calendar": "calendário da bandeira 2",
    "holidays": "feriados da bandeira 2",
    "annual_holidays": "feriados anuais (MM-DD)",
    "data_since": "dados desde",
    "include_inferred_trips": "corridas inferidas das paradas incluídas",
    "inspection_bands": "faixas de vistoria por idade",
    "max_inspection_age_days": "idade máxima da vistoria",
    "max_substitution_days": "prazo máximo da substituição provisória",
    "max_vehicle_age_years": "idade máxima do veículo",
    "vehicle_age_counted_from": "idade do veículo contada a partir de",
    "accessible_max_wait_s": "espera máxima do táxi acessível no ponto",
    "suspended_min_wait_s": "espera mínima no ponto sob suspensão",
    "joined_stops": "paradas unidas numa espera",
}
"""pt-BR labels of the ``details`` keys the detectors write; others are shown as named."""
_VALUES = {
    "road_network": "malha viária",
    "peer_trips": "corridas semelhantes",
    "loop": "volta",
    "corridor": "corredor",
    "free": "livre",
    "occupied": "ocupado",
    "off": "desligado",
    "boarding": "embarque",
    "wait": "espera na fila",
    "suspension": "suspensão",
    "barred": "impedimento",
    "excluded": "exclusão do prefixo do ponto",
    "ended": "fim do período",
    "suspended_use": "uso durante a suspensão",
    "accessible_wait": "espera em vaga acessível",
    "outlier": "ponto fora do trajeto",
    "jump": "salto",
    "two_tracks": "dois trajetos alternados (dois rastreadores)",
    "occupied_both_sides": "ocupado antes e depois do silêncio",
    "occupied_before_and_moved": "ocupado antes, e deslocou-se",
    "trip": "corrida",
    # inactivity's last operation, besides a trip
    "occupied_fix": "posição com passageiro (taxímetro Ocupado)",
    "fix": "posição em serviço (taxímetro Livre, Ocupado ou não informado)",
    "active": "ativo",
    # driver_not_allowed's documents (``document``), then the reasons
    "cnh": "CNH",
    "ictp": "ICTP",
    # operating_while_barred and driver_not_allowed reasons
    "revoked": "cassado",
    "suspended": "suspenso",
    "out_of_operation": "fora de operação",
    "reserved": "reservado",
    "termo_recolhido": "termo recolhido",
    "before_alvara": "antes do alvará",
    "alvara_expired": "alvará vencido",
    "vehicle_over_age": "veículo acima da idade máxima",
    "substitution_expired": "substituição provisória vencida",
    "inspection_expired": "vistoria vencida",
    "inspection_overdue": "vistoria atrasada",
    "not_registered": "condutor não cadastrado",
    "cnh_revoked": "CNH cassada",
    "cnh_suspended": "CNH suspensa",
    "cnh_expired": "CNH vencida",
    "ictp_revoked": "ICTP cassada",
    "ictp_suspended": "ICTP suspensa",
    "ictp_expired": "ICTP vencida",
    "not_linked": "condutor sem vínculo com o veículo",
    "too_many_auxiliaries": "auxiliares além do permitido",
    "auxiliary_only": "só auxiliar, sem titular",
    # vehicle_age_counted_from
    "manufacture": "ano de fabricação",
    "first_registration": "primeiro registro",
}
"""pt-BR words of the values those keys take (sub-cases, reasons, meter states)."""
_SKIP = re.compile(
    r"(_cell|_id|_ns|^timezone|^crs|^source|^local_start|^local_end|^provisional|^withdrawn)$"
)
"""Keys not shown among the measures (ids, internals; a live finding's state is its badge)."""
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_ORDER = {k: i for i, k in enumerate(LABELS)}
MAX_MEASURES = 10
"""At most this many measures (and thresholds) per finding; the rest stay in the finding."""
_PEER_MEASURES = ("count", "reference_straight_line_ratio")
"""Of ``details["peer_trips"]``, what a reference taken from peers shows among the measures (as
``peer_trips.<key>``)."""
_RECORDS = {
    "suspension": ("kind", "starts_on", "ends_on", "reason", "process_ref"),
    "licence_ended": ("valid_from", "valid_until", "reason"),
}
"""The registry records a finding rests on (a stand suspension, a licence that ended), shown among
the measures (as ``<record>.<key>``): the dates the accused reads first."""
_OPEN_END = "em aberto"
_REASON_LIMITS = {
    "max_inspection_age_days": ("inspection_overdue",),
    "max_vehicle_age_years": ("vehicle_over_age",),
    "vehicle_age_counted_from": ("vehicle_over_age",),
    "max_substitution_days": ("substitution_expired",),
}
"""Registry limits (``operating_while_barred`` thresholds) and the reasons they decide: shown
among the thresholds only when the finding has such a reason."""


def evidence_summary(
    finding: EvidenceFinding, *, timezone: str
) -> tuple[str, list[str], list[str]]:
    """Summarise one finding: a heading, its measures and its thresholds (pt-BR text).

    Measures are the finding's scalar ``details``, thresholds its ``details["thresholds"]``;
    labelled keys first, at most :data:`MAX_MEASURES` of each; units follow the key's suffix
    (``_m``, ``_km``, ``_s``, ``_kmh``, ``_days``), times are shown in ``timezone``.
    """
    tz = ZoneInfo(timezone)
    details = finding.get("details") or {}
    start, end = _instant(finding["started_at"]), _instant(finding["ended_at"])
    span = _when(start, tz, zone=False)
    if end is not None and end != start:
        span += f" a {_when(shown_end(start, end, tz), tz, zone=False)}"
    kind = irregularity(finding["kind"], details)
    # the confidence as the console shows it (83 %), not a machine's 0,83
    confidence = f"{_number(100 * float(finding['confidence']), 0)} %"
    head = f"{finding['finding_id']}: {kind}, {span}, confiança {confidence}"
    measures = dict(details)
    thresholds = dict(details.get("thresholds") or {})
    reasons = details.get("reasons")
    if isinstance(reasons, list) and reasons and isinstance(reasons[0], Mapping):
        # the main reason's registry evidence: the dates an accused reads first; its limit
        # (e.g. the inspection interval of the vehicle's age band) is a threshold
        for k, v in reasons[0].items():
            if k in _REASON_LIMITS:
                thresholds[k] = v
            elif k != "reason" and k not in measures:
                measures[k] = v
    named = {details.get("reason")}
    if isinstance(reasons, list):
        named = {r.get("reason") for r in reasons if isinstance(r, Mapping)}
    if named - {None}:  # a registry limit only where a reason it belongs to is found
        thresholds = {
            k: v
            for k, v in thresholds.items()
            if k not in _REASON_LIMITS or named & set(_REASON_LIMITS[k])
        }
    peers = details.get("peer_trips")
    if details.get("method") == "peer_trips" and isinstance(peers, Mapping):
        measures |= {f"peer_trips.{k}": peers.get(k) for k in _PEER_MEASURES}
    for name, keys in _RECORDS.items():
        record = details.get(name)
        if isinstance(record, Mapping):
            measures |= {f"{name}.{k}": record.get(k) for k in keys}
            if "ends_on" in keys and record.get("ends_on") is None:
                measures[f"{name}.ends_on"] = _OPEN_END
    return head, _pairs(measures, tz), _pairs(thresholds, tz)


def _pairs(values: Mapping[str, Any], tz: ZoneInfo) -> list[str]:
    keys = [k for k, v in values.items() if _scalar(v) and not _SKIP.search(k)]
    keys.sort(key=lambda k: _ORDER.get(k, len(_ORDER)))
    out = [_pair(k, values[k], tz) for k in keys[:MAX_MEASURES]]
    if len(keys) > MAX_MEASURES:
        out.append(f"mais {len(keys) - MAX_MEASURES} no registro da constatação")
    return out


BEFORE_LABELS = {"boarding_lag_s": "taxímetro ligado antes da saída do ponto"}
"""Labels of a negative duration said the other way round ("ligado 45 s antes", not "-45 s")."""


def _pair(key: str, value: Any, tz: ZoneInfo) -> str:
    if key in BEFORE_LABELS and isinstance(value, int | float) and value < 0:
        return f"{BEFORE_LABELS[key]}: {_duration(-float(value))}"
    return f"{LABELS.get(key, key)}: {_value(key, value, tz)}"


def _scalar(value: Any) -> bool:
    if isinstance(value, bool | int | float):
        return not (isinstance(value, float) and not math.isfinite(value))
    return isinstance(value, str) and 0 < len(value) <= 60


def _value(key: str, value: Any, tz: ZoneInfo) -> str:
    if isinstance(value, bool):
        return "sim" if value else "não"
    if isinstance(value, str):
        if _DAY.match(value):
            return f"{value[8:10]}/{value[5:7]}/{value[:4]}"
        if key.endswith(("_at", "_since", "_until")):
            try:
                return _when(value, tz, zone=False)
            except DocumentError:
                return value
        return _VALUES.get(value, value)
    if key.endswith("year"):  # a calendar year: no thousands separator
        return str(int(value))
    if key.endswith("_kmh"):
        return f"{_number(value, 1, trim=True)} km/h"
    if key.endswith("_km"):
        return f"{_number(value, 3, trim=True)} km"
    if key.endswith("_m"):
        return f"{_number(value, 0)} m"
    if key.endswith("_s"):
        return _duration(float(value))
    if key.endswith("_days"):
        return f"{_number(value, 0)} dias"
    return _number(value, 3, trim=True)


def _number(value: float, decimals: int, *, trim: bool = False) -> str:
    text = f"{float(value):,.{decimals}f}"
    if trim and "." in text:
        text = text.rstrip("0").rstrip(".")
    return text.replace(",", "_").replace(".", ",").replace("_", ".")


def _duration(seconds: float) -> str:
    total = round(seconds)
    sign = "-" if total < 0 else ""
    h, rest = divmod(abs(total), 3600)
    m, s = divmod(rest, 60)
    if h:
        return f"{sign}{h} h {m:02d} min"
    return sign + (f"{m} min {s:02d} s" if m else f"{s} s")


def _notes(finding: EvidenceFinding) -> list[str]:
    return [str(n) for n in (finding.get("details") or {}).get("notes") or [] if n]


# --- evidence about one vehicle of a multi-vehicle finding --------------------------------


def fix_vehicles(details: Mapping[str, Any], *, vehicle_id: str | None) -> list[str | None]:
    """Return the vehicle of each of a finding's ``details["fixes"]`` (None: not told apart).

    A finding about one vehicle (``vehicle_id``) holds its own fixes, but a ``queue_jump`` adds
    the fix of each vehicle passed (``ahead[].fix_at_our_boarding``). An
    ``illegal_stand_formation`` (no vehicle of its own) names each fix's vehicle; a fix stored
    without it is None, never guessed.
    """
    fixes = list(details.get("fixes") or [])
    if isinstance(details.get("stops"), list):
        return [
            str(f["vehicle_id"]) if isinstance(f, Mapping) and f.get("vehicle_id") else None
            for f in fixes
        ]
    theirs: dict[tuple[Any, ...], str] = {}
    for other in details.get("ahead") or []:
        fix = other.get("fix_at_our_boarding") if isinstance(other, Mapping) else None
        if isinstance(fix, Mapping):
            theirs[_fix_key(fix)] = str(other.get("vehicle_id"))
    return [theirs.get(_fix_key(f), vehicle_id) if isinstance(f, Mapping) else None for f in fixes]


def _fix_key(fix: Mapping[str, Any]) -> tuple[Any, ...]:
    return (fix.get("timestamp"), fix.get("row"), fix.get("lat"), fix.get("lon"))


def _instant_or_none(value: Any) -> dt.datetime | None:
    try:
        return _instant(value)
    except DocumentError:
        return None


def accused_evidence(finding: EvidenceFinding, *, vehicle_id: str | None) -> EvidenceFinding:
    """Return a finding as evidence against one vehicle: only its fixes, waits and their times.

    For a finding that holds other vehicles' fixes (:func:`fix_vehicles`: a place's waits, the
    vehicles a queue jump passed), ``details["fixes"]`` keeps the fixes of ``vehicle_id`` only,
    with a note saying how many others the finding holds; a place's ``stops`` keep its waits,
    summed up as measures (``vehicle_n_stops``, ``vehicle_first_wait_at``…). Any other finding
    is returned as is.
    """
    details = finding.get("details") or {}
    stops = details.get("stops")
    if not vehicle_id or not (isinstance(stops, list) or isinstance(details.get("ahead"), list)):
        return finding
    fixes = list(details.get("fixes") or [])
    owners = fix_vehicles(details, vehicle_id=vehicle_id)
    own = [f for f, v in zip(fixes, owners, strict=True) if v == vehicle_id]
    out = dict(details)
    out["fixes"] = own
    if len(own) < len(fixes):
        out["notes"] = [
            *(details.get("notes") or []),
            f"Posições GPS desta evidência: só as {len(own)} do veículo {vehicle_id}; as outras "
            f"{len(fixes) - len(own)} da constatação (de outros veículos, ou sem veículo "
            f"determinado) estão no seu registro, {finding['finding_id']}.",
        ]
    if isinstance(stops, list):
        mine = [w for w in stops if isinstance(w, Mapping) and w.get("vehicle_id") == vehicle_id]
        out["stops"] = mine
        out["vehicle_n_stops"] = len(mine)
        out["vehicle_n_boardings"] = sum(bool(w.get("boarded")) for w in mine)
        starts = [t for w in mine if (t := _instant_or_none(w.get("started_at")))]
        ends = [t for w in mine if (t := _instant_or_none(w.get("ended_at")))]
        if starts and ends:
            out["vehicle_first_wait_at"] = min(starts).isoformat()
            out["vehicle_last_wait_ended_at"] = max(ends).isoformat()
    return {**finding, "details": out}


# --- map of the evidence ------------------------------------------------------------------

MIN_EXTENT_M = 200.0
"""Smallest side of the map, so that one point or a short wait still shows its surroundings."""
MAP_STYLE = {
    "stand": {"stroke": "#1b7a43", "fill": "#2ca25f", "fill_opacity": 0.25, "width": 1.5},
    "area": {"stroke": "#b2182b", "fill": "#ef8a62", "fill_opacity": 0.25, "width": 1.5},
    "route": {"stroke": "#e07b00", "width": 2.5, "dash": (6.0, 4.0)},
    "track": {"stroke": "#1f5fbf", "width": 1.8, "fill": "#1f5fbf", "radius": 2.2},
    "start": {"stroke": "#1f2937", "fill": "#ffffff", "radius": 4.0, "width": 1.5},
    "end": {"stroke": "#1f2937", "fill": "#1f2937", "radius": 4.0, "width": 1.5},
    "point": {"stroke": "#ffffff", "fill": "#c0392b", "radius": 5.5, "width": 1.5},
}
LEGEND = {
    "track": "Trajeto registrado (posições GPS)",
    "route": "Rota de referência",
    "stand": "Ponto de táxi",
    "area": "Área da constatação",
    "point": "Local da constatação",
    "start": "Início do trajeto",
    "end": "Fim do trajeto",
}
MAX_DOTS = 500
"""At most this many fix dots are drawn (every k-th fix of a longer track)."""
MIN_MARK = 6.0
"""A polygon smaller than this (box units) also gets a ring, so that it shows."""
MARK_RING = 10.0
"""Radius of that ring, drawn over the markers (a finding's point on the stand hides none)."""


class FittedMap(TypedDict):
    """Layers projected into a ``width`` × ``height`` box, ``y`` upwards, in box units."""

    layers: dict[str, list[tuple[float, float]]]
    metres_per_unit: float
    width: float
    height: float


def map_layers(document: Document) -> dict[str, list[Coord]]:
    """Collect the evidence layers of a document, in EPSG:4326.

    Keys ``track``, ``route``, ``stand``, ``area`` and ``point``, each a list of ``(lon, lat)``
    (empty when absent); the track and the route fall back on a finding's ``driven_line`` and
    ``reference_line``.
    """
    g = document.get("geometry") or {}
    track, route = list(g.get("track") or []), list(g.get("route") or [])
    for f in document["findings"]:
        details = f.get("details") or {}
        track = track or list(details.get("driven_line") or [])
        route = route or list(details.get("reference_line") or [])
    point = g.get("point")
    return {
        "track": track,
        "route": route,
        "stand": list(g.get("stand") or []),
        "area": list(g.get("area") or []),
        "point": [point] if point is not None else [],
    }


def fit_map(
    layers: Mapping[str, Sequence[Coord]], *, width: float, height: float, margin: float = 12.0
) -> FittedMap | None:
    """Project lon/lat layers to a local metric frame and fit them to a box.

    The projection is equirectangular around the centre of the layers' extent (metres east and
    north; distortion is negligible over a town); the scale is the same on both axes, the extent
    centred and at least :data:`MIN_EXTENT_M` wide. Shared by the SVG and the PDF maps.

    Parameters
    ----------
    layers : mapping of str to sequence of (lon, lat)
        Positions in EPSG:4326.
    width, height : float
        Box size (SVG pixels or PDF points).
    margin : float, default 12
        Free border inside the box.

    Returns
    -------
    FittedMap or None
        The projected layers, ``y`` upwards from the bottom of the box, and the scale; None when
        no layer has a position.
    """
    every = [(float(x), float(y)) for pts in layers.values() for x, y in pts]
    if not every:
        return None
    lons, lats = [p[0] for p in every], [p[1] for p in every]
    lon0, lat0 = (min(lons) + max(lons)) / 2, (min(lats) + max(lats)) / 2
    kx = math.radians(1.0) * EARTH_RADIUS_M * math.cos(math.radians(lat0))
    ky = math.radians(1.0) * EARTH_RADIUS_M
    span_x = max((max(lons) - min(lons)) * kx, MIN_EXTENT_M)
    span_y = max((max(lats) - min(lats)) * ky, MIN_EXTENT_M)
    scale = min((width - 2 * margin) / span_x, (height - 2 * margin) / span_y)

    def project(lon: float, lat: float) -> tuple[float, float]:
        return (width / 2 + (lon - lon0) * kx * scale, height / 2 + (lat - lat0) * ky * scale)

    projected = {k: [project(float(x), float(y)) for x, y in pts] for k, pts in layers.items()}
    return {"layers": projected, "metres_per_unit": 1.0 / scale, "width": width, "height": height}


def _scale_bar(metres_per_unit: float, width: float) -> tuple[float, str]:
    target = metres_per_unit * width / 4
    step = 10 ** math.floor(math.log10(target))
    nice = max(m * step for m in (1, 2, 5) if m * step <= target)
    label = f"{_number(nice / 1000, 0)} km" if nice >= 1000 else f"{nice:g} m"
    return nice / metres_per_unit, label


Primitive = dict[str, Any]
"""A drawing instruction: ``shape`` (polyline, polygon, circle, rect, text), geometry, style."""
_INK = {"stroke": "#1f2937", "fill": "#1f2937", "width": 1.5}


def _shape(shape: str, style: Mapping[str, Any], **geometry: Any) -> Primitive:
    return {
        "shape": shape,
        "stroke": style.get("stroke"),
        "width": style.get("width", 1.0),
        "fill": style.get("fill"),
        "fill_opacity": style.get("fill_opacity", 1.0),
        "dash": style.get("dash"),
        **geometry,
    }


def _text(x: float, y: float, text: str, size: float, anchor: str = "start") -> Primitive:
    return _shape("text", _INK, x=x, y=y, text=text, size=size, anchor=anchor)


def map_primitives(
    document: Document, *, width: float = 640.0, height: float = 400.0
) -> list[Primitive]:
    """Draw the evidence map as primitives (``y`` upwards) that both renderers translate.

    The map box is ``width`` × ``height`` minus a legend strip at the bottom; the primitives
    are the frame, the stand and finding polygons, the reference route (dashed), the track
    (polyline and fix dots), the start and end of the track, the finding point, a north arrow,
    a scale bar and the legend (pt-BR).
    """
    layers = map_layers(document)
    keys = [k for k in ("track", "route", "stand", "area", "point") if layers[k]]
    if len(layers["track"]) >= 2:
        keys += ["start", "end"]
    rows = _legend_rows(keys, width)
    legend_h = 16.0 * len(rows) + (8.0 if rows else 0.0)
    map_h = height - legend_h
    frame = {"fill": "#f4f1ea", "stroke": "#888888", "width": 0.8}
    out = [
        _shape("rect", {"fill": "#ffffff"}, x=0.0, y=0.0, w=width, h=height),
        _shape("rect", frame, x=0.0, y=legend_h, w=width, h=map_h),
    ]
    fitted = fit_map(layers, width=width, height=map_h, margin=18.0)
    if fitted is None:
        out.append(
            _text(width / 2, legend_h + map_h / 2, "Sem geometria para o mapa", 11.0, "middle")
        )
        return out
    pts = {k: [(x, y + legend_h) for x, y in v] for k, v in fitted["layers"].items()}
    rings: list[Primitive] = []
    for key in ("stand", "area"):
        if len(pts[key]) >= 3:
            out.append(_shape("polygon", MAP_STYLE[key], points=pts[key]))
        if pts[key] and _extent(pts[key]) < MIN_MARK:  # too small to see: ring its place
            x, y = (sum(c) / len(pts[key]) for c in zip(*pts[key], strict=True))
            ring = {"stroke": MAP_STYLE[key]["stroke"], "width": 2.5}
            rings.append(_shape("circle", ring, x=x, y=y, r=MARK_RING))
    track, dot = pts["track"], {"fill": MAP_STYLE["track"]["fill"]}
    if len(track) >= 2:
        out.append(_shape("polyline", MAP_STYLE["track"], points=track))
    step = max(1, math.ceil(len(track) / MAX_DOTS))
    out += [
        _shape("circle", dot, x=x, y=y, r=MAP_STYLE["track"]["radius"]) for x, y in track[::step]
    ]
    if len(pts["route"]) >= 2:  # over the track, dashed: both stay visible where they coincide
        out.append(_shape("polyline", MAP_STYLE["route"], points=pts["route"]))
    marks = [("start", track[0]), ("end", track[-1])] if len(track) >= 2 else []
    marks += [("point", xy) for xy in pts["point"]]
    out += [
        _shape("circle", MAP_STYLE[k], x=x, y=y, r=MAP_STYLE[k]["radius"]) for k, (x, y) in marks
    ]
    out += rings  # over the marks: a finding's point on the stand hides no ring
    out += _north_arrow(width - 24.0, legend_h + map_h - 14.0)
    out += _scale_primitives(fitted["metres_per_unit"], width, legend_h)
    out += _legend_primitives(rows, legend_h)
    return out


def _extent(points: list[tuple[float, float]]) -> float:
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    return max(max(xs) - min(xs), max(ys) - min(ys))


def _north_arrow(x: float, top: float) -> list[Primitive]:
    arrow = [(x, top), (x - 6, top - 20), (x, top - 15), (x + 6, top - 20)]
    return [
        _shape("polygon", {**_INK, "width": 0.8}, points=arrow),
        _text(x, top - 32, "N", 10.0, "middle"),
    ]


def _scale_primitives(metres_per_unit: float, width: float, bottom: float) -> list[Primitive]:
    length, label = _scale_bar(metres_per_unit, width)
    x1, y = width - 16.0, bottom + 14.0
    x0 = x1 - length
    return [
        _shape("polyline", _INK, points=[(x0, y + 4), (x0, y), (x1, y), (x1, y + 4)]),
        _text((x0 + x1) / 2, y + 5, label, 9.0, "middle"),
    ]


def _legend_rows(keys: list[str], width: float) -> list[list[tuple[str, float]]]:
    rows: list[list[tuple[str, float]]] = [[]]
    used = 8.0
    for key in keys:
        w = 30.0 + stringWidth(LEGEND[key], FONT, 9.0) + 14.0
        if rows[-1] and used + w > width - 8.0:
            rows.append([])
            used = 8.0
        rows[-1].append((key, used))
        used += w
    return [r for r in rows if r]


def _legend_primitives(rows: list[list[tuple[str, float]]], legend_h: float) -> list[Primitive]:
    out: list[Primitive] = []
    for i, row in enumerate(rows):
        y = legend_h - 12.0 - 16.0 * i
        for key, x in row:
            s = MAP_STYLE[key]
            if key in ("stand", "area"):
                out.append(_shape("rect", s, x=x, y=y - 4, w=22.0, h=9.0))
            elif key in ("route", "track"):
                out.append(_shape("polyline", s, points=[(x, y), (x + 22, y)]))
            if key not in ("stand", "area", "route"):
                dot = s if key != "track" else {"fill": s["fill"]}
                out.append(_shape("circle", dot, x=x + 11, y=y, r=s["radius"]))
            out.append(_text(x + 30, y - 3, LEGEND[key], 9.0))
    return out


def _svg(primitives: list[Primitive], *, width: float, height: float) -> str:
    e = html.escape

    def paint(p: Primitive) -> str:
        attrs = (
            f'fill="{e(p["fill"] or "none")}" stroke="{e(p["stroke"] or "none")}" '
            f'stroke-width="{p["width"]:g}"'
        )
        if p["fill_opacity"] != 1.0:
            attrs += f' fill-opacity="{p["fill_opacity"]:g}"'
        if p["dash"]:
            attrs += f' stroke-dasharray="{" ".join(f"{d:g}" for d in p["dash"])}"'
        return attrs

    def xy(points: list[tuple[float, float]]) -> str:
        return " ".join(f"{x:.1f},{height - y:.1f}" for x, y in points)

    parts = [
        '<svg xmlns="http://www.w3.org/2000/svg" class="evidence-map" role="img" '
        f'viewBox="0 0 {width:g} {height:g}" width="{width:g}" height="{height:g}" '
        'aria-label="Mapa da evidência">'
    ]
    for p in primitives:
        shape = p["shape"]
        if shape == "polyline":
            line = {**p, "fill": None}
            parts.append(
                f'<polyline points="{xy(p["points"])}" {paint(line)} '
                'stroke-linejoin="round" stroke-linecap="round"/>'
            )
        elif shape == "polygon":
            parts.append(f'<polygon points="{xy(p["points"])}" {paint(p)}/>')
        elif shape == "circle":
            parts.append(
                f'<circle cx="{p["x"]:.1f}" cy="{height - p["y"]:.1f}" r="{p["r"]:g}" {paint(p)}/>'
            )
        elif shape == "rect":
            parts.append(
                f'<rect x="{p["x"]:.1f}" y="{height - p["y"] - p["h"]:.1f}" width="{p["w"]:.1f}" '
                f'height="{p["h"]:.1f}" {paint(p)}/>'
            )
        elif shape == "text":
            parts.append(
                f'<text x="{p["x"]:.1f}" y="{height - p["y"]:.1f}" font-size="{p["size"]:g}" '
                f'text-anchor="{e(p["anchor"])}" fill="{e(p["fill"])}" '
                f'font-family="Helvetica, Arial, sans-serif">{e(p["text"])}</text>'
            )
    parts.append("</svg>")
    return "\n".join(parts)


def _drawing(primitives: list[Primitive], *, width: float, height: float) -> Drawing:
    def colour(value: str | None) -> colors.Color | None:
        return colors.HexColor(value) if value else None

    drawing = Drawing(width, height)
    for p in primitives:
        style: dict[str, Any] = {"strokeColor": colour(p["stroke"]), "strokeWidth": p["width"]}
        if p["dash"]:
            style["strokeDashArray"] = list(p["dash"])
        fill = {"fillColor": colour(p["fill"]), "fillOpacity": p["fill_opacity"]}
        shape = p["shape"]
        if shape == "polyline":
            flat = [c for xy in p["points"] for c in xy]
            drawing.add(PolyLine(flat, strokeLineJoin=1, strokeLineCap=1, **style))
        elif shape == "polygon":
            drawing.add(Polygon([c for xy in p["points"] for c in xy], **style, **fill))
        elif shape == "circle":
            drawing.add(Circle(p["x"], p["y"], p["r"], **style, **fill))
        elif shape == "rect":
            drawing.add(Rect(p["x"], p["y"], p["w"], p["h"], **style, **fill))
        elif shape == "text":
            text = String(p["x"], p["y"], p["text"], fontName=FONT, fontSize=p["size"])
            text.fillColor, text.textAnchor = colour(p["fill"]), p["anchor"]
            drawing.add(text)
    return drawing


MAP_CAPTION = (
    "Mapa desenhado a partir das coordenadas (WGS 84, EPSG:4326) em projeção local "
    "equiretangular, sem mapa de fundo. O norte está para cima."
)


def render_map_svg(document: Document, *, width: float = 640.0, height: float = 400.0) -> str:
    """Return the evidence map of a document as an inline ``<svg>`` element (escaped text).

    The same drawing as the HTML document's map (:func:`map_primitives`), for pages that show
    the document inside another layout (e.g. the web console).
    """
    return _svg(map_primitives(document, width=width, height=height), width=width, height=height)


# --- renderers ----------------------------------------------------------------------------


def _authority(document: Document) -> str:
    return document.get("authority") or (
        f"Prefeitura Municipal de {_given(document['place'].get('municipality_name'))}"
    )


def is_draft(proposal: Mapping[str, Any]) -> bool:
    """Tell whether a proposal's documents are a minuta: not confirmed, or with no auto number."""
    return proposal.get("status", "proposta") == "proposta" or not proposal.get("auto_number")


def has_penalty(proposal: Mapping[str, Any]) -> bool:
    """Tell whether a proposal's auto stands (not dismissed, its defence not accepted)."""
    return proposal.get("status") not in ("descartada", "defesa_deferida")


def banner(document: Document) -> str | None:
    """Return the warning a document carries above all: a minuta, or an auto cancelled."""
    if is_draft(document["proposal"]):
        return "MINUTA: proposta ainda não confirmada por agente, sem valor de autuação."
    if not has_penalty(document["proposal"]):
        return "AUTO CANCELADO: a defesa foi deferida; este auto não produz penalidade."
    return None


def _evidence(document: Document) -> list[tuple[str, list[str], list[str], list[str]]]:
    return [
        (*evidence_summary(f, timezone=document["timezone"]), _notes(f))
        for f in document["findings"]
    ]


def render_html(document: Document, *, kind: DocumentKind) -> str:
    """Render a document as one self-contained HTML page (inline CSS and SVG map).

    Every value is escaped (:func:`html.escape`).

    Parameters
    ----------
    document : Document
        The document's data.
    kind : {"auto", "notificacao"}
        Auto de infração or notificação de penalidade.

    Returns
    -------
    str
        The HTML page (pt-BR).
    """
    fields = document_fields(document, kind=kind)
    e = html.escape
    p = document["proposal"]
    title = TITLES[kind]
    number = p.get("auto_number")
    out = [
        "<!DOCTYPE html>",
        '<html lang="pt-BR"><head><meta charset="utf-8">',
        f"<title>{e(title)}{' ' + e(str(number)) if number else ''}</title>",
        f"<style>{_CSS}</style></head><body>",
        f'<header><p class="authority">{e(_authority(document))}</p>',
        f"<h1>{e(title)}</h1>",
        f'<p class="number">Nº {e(str(number or "não atribuído"))} · proposta '
        f"{e(str(p.get('proposal_id') or NOT_GIVEN))}</p></header>",
    ]
    if (draft := banner(document)) is not None:
        out.append(f'<p class="draft">{e(draft)}</p>')
    section = None
    for sec, label, value in fields:
        if sec != section:
            out.append(("</tbody></table>" if section else "") + f"<h2>{e(sec)}</h2><table><tbody>")
            section = sec
        out.append(f"<tr><th>{e(label)}</th><td>{e(value)}</td></tr>")
    out.append("</tbody></table>")
    w, h = 640.0, 400.0
    out += [
        "<h2>Mapa da evidência</h2><figure>",
        _svg(map_primitives(document, width=w, height=h), width=w, height=h),
        f"<figcaption>{e(MAP_CAPTION)}</figcaption></figure>",
        "<h2>Evidência</h2>",
    ]
    for head, measures, thresholds, notes in _evidence(document) or [("", [], [], [])]:
        if not head:
            out.append(f"<p>{e('Nenhuma constatação anexada.')}</p>")
            continue
        out.append(f'<div class="finding"><p class="finding-head">{e(head)}</p><ul>')
        if measures:
            out.append(f"<li>Medidas: {e('; '.join(measures))}</li>")
        if thresholds:
            out.append(f"<li>Limiares: {e('; '.join(thresholds))}</li>")
        out += [f"<li>Observação: {e(n)}</li>" for n in notes]
        out.append("</ul></div>")
    out += [_signatures_html(kind), "</body></html>"]
    return "\n".join(out) + "\n"


def _signatures_html(kind: DocumentKind) -> str:
    cells = "".join(f'<div class="sign">{html.escape(s)}</div>' for s in _SIGNATURES[kind])
    return f'<div class="signatures">{cells}</div>'


_SIGNATURES: dict[DocumentKind, tuple[str, ...]] = {
    "auto": ("Assinatura do agente autuador", "Assinatura do condutor (se presente)"),
    "notificacao": ("Assinatura da autoridade", "Recebido por / data"),
}

_CSS = (
    "body{font-family:Helvetica,Arial,sans-serif;font-size:11pt;color:#1f2937;max-width:180mm;"
    "margin:12mm auto}h1{font-size:18pt;margin:2mm 0;text-transform:uppercase}"
    "h2{font-size:12pt;margin:6mm 0 2mm;border-bottom:1px solid #888}"
    ".authority{font-weight:bold;margin:0}.number{margin:0;color:#444}"
    ".draft{border:2px solid #b2182b;color:#b2182b;padding:2mm;font-weight:bold}"
    "table{border-collapse:collapse;width:100%}th,td{border:1px solid #bbb;padding:1.5mm 2mm;"
    "vertical-align:top;text-align:left}th{width:32%;background:#f3f4f6;font-weight:normal}"
    "figure{margin:0}svg{width:100%;height:auto}figcaption{font-size:9pt;color:#555}"
    ".finding-head{font-weight:bold;margin:2mm 0 0}ul{margin:1mm 0;font-size:10pt}"
    ".signatures{display:flex;gap:10mm;margin-top:18mm}.sign{flex:1;border-top:1px solid #000;"
    "padding-top:1mm;font-size:9pt;text-align:center}"
    "@page{size:A4;margin:12mm}"
)


def render_pdf(document: Document, *, kind: DocumentKind) -> bytes:
    """Render a document to an A4 PDF (reportlab; built-in Helvetica, WinAnsi encoding).

    Parameters
    ----------
    document : Document
        The document's data.
    kind : {"auto", "notificacao"}
        Auto de infração or notificação de penalidade.

    Returns
    -------
    bytes
        The PDF; byte-identical for the same document (no creation date inside).
    """
    fields = document_fields(document, kind=kind)
    p = document["proposal"]
    base = getSampleStyleSheet()
    body = ParagraphStyle("body", parent=base["Normal"], fontName=FONT, fontSize=9.5, leading=12)
    small = ParagraphStyle("small", parent=body, fontSize=8.5, leading=10.5)
    bold = ParagraphStyle("bold", parent=body, fontName=FONT_BOLD)
    h1 = ParagraphStyle("h1", parent=bold, fontSize=16, leading=20, spaceBefore=2, spaceAfter=2)
    h2 = ParagraphStyle("h2", parent=bold, fontSize=11, leading=14, spaceBefore=8, spaceAfter=3)
    red = colors.HexColor("#b2182b")
    draft_style = ParagraphStyle(
        "draft",
        parent=bold,
        textColor=red,
        borderColor=red,
        borderWidth=1.2,
        borderPadding=4,
        spaceBefore=6,
        spaceAfter=8,
    )

    def par(text: str, style: ParagraphStyle = body) -> Paragraph:
        return Paragraph(xml_escape(text), style)

    number = str(p.get("auto_number") or "não atribuído")
    story: list[Any] = [
        par(_authority(document), bold),
        par(TITLES[kind].upper(), h1),
        par(f"Nº {number} · proposta {p.get('proposal_id') or NOT_GIVEN}", body),
    ]
    if (draft := banner(document)) is not None:
        story.append(par(draft, draft_style))
    width = A4[0] - 30 * mm
    grid = TableStyle(
        [
            ("GRID", (0, 0), (-1, -1), 0.5, colors.HexColor("#bbbbbb")),
            ("BACKGROUND", (0, 0), (0, -1), colors.HexColor("#f3f4f6")),
            ("VALIGN", (0, 0), (-1, -1), "TOP"),
        ]
    )
    sections: dict[str, list[list[Paragraph]]] = {}
    for sec, label, value in fields:
        sections.setdefault(sec, []).append([par(label), par(value)])
    for sec, rows in sections.items():
        story += [par(sec, h2), Table(rows, colWidths=[0.3 * width, 0.7 * width], style=grid)]
    map_w, map_h = width, width * 0.62
    drawing = _drawing(
        map_primitives(document, width=map_w, height=map_h), width=map_w, height=map_h
    )
    story += [
        KeepTogether([par("Mapa da evidência", h2), drawing, par(MAP_CAPTION, small)]),
        par("Evidência", h2),
    ]
    evidence = _evidence(document)
    if not evidence:
        story.append(par("Nenhuma constatação anexada."))
    for head, measures, thresholds, notes in evidence:
        story.append(par(head, bold))
        if measures:
            story.append(par("Medidas: " + "; ".join(measures), small))
        if thresholds:
            story.append(par("Limiares: " + "; ".join(thresholds), small))
        story += [par(f"Observação: {n}", small) for n in notes]
    sign = ParagraphStyle("sign", parent=small, alignment=TA_CENTER)
    story += [
        Spacer(1, 16 * mm),
        Table(
            [[par(_SIGNATURES[kind][0], sign), "", par(_SIGNATURES[kind][1], sign)]],
            colWidths=[width / 2 - 5 * mm, 10 * mm, width / 2 - 5 * mm],
            style=TableStyle([("LINEABOVE", (i, 0), (i, 0), 0.8, colors.black) for i in (0, 2)]),
        ),
    ]
    footer = f"{TITLES[kind]} · {number} · Pontual"

    def on_page(canvas: Canvas, doc: SimpleDocTemplate) -> None:
        canvas.setFont(FONT, 7.5)
        canvas.drawString(15 * mm, 8 * mm, footer)
        canvas.drawRightString(A4[0] - 15 * mm, 8 * mm, f"página {doc.page}")

    buf = io.BytesIO()
    doc = SimpleDocTemplate(
        buf,
        pagesize=A4,
        leftMargin=15 * mm,
        rightMargin=15 * mm,
        topMargin=14 * mm,
        bottomMargin=16 * mm,
        title=f"{TITLES[kind]} {number}",
        author=_authority(document),
        lang="pt-BR",
        invariant=True,
    )
    doc.build(story, onFirstPage=on_page, onLaterPages=on_page)
    return buf.getvalue()


def render_auto_html(document: Document) -> str:
    """Render the auto de infração as HTML (:func:`render_html`)."""
    return render_html(document, kind="auto")


def render_notificacao_html(document: Document) -> str:
    """Render the notificação de penalidade as HTML (:func:`render_html`)."""
    return render_html(document, kind="notificacao")


def render_auto_pdf(document: Document) -> bytes:
    """Render the auto de infração as PDF (:func:`render_pdf`)."""
    return render_pdf(document, kind="auto")


def render_notificacao_pdf(document: Document) -> bytes:
    """Render the notificação de penalidade as PDF (:func:`render_pdf`)."""
    return render_pdf(document, kind="notificacao")
