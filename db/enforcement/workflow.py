"""Review of infraction proposals in the database, with an append-only audit trail.

States (``db.enforcement.models.STATUSES``) and the steps between them::

    proposta ──confirm (agent: issues the auto de infração)──▶ confirmada ──notify──▶ notificada
       └──dismiss (reason)──▶ descartada            └──archive_lapsed──▶ arquivada
    notificada ──file_defence──▶ em_defesa ──decide_defence──▶ defesa_deferida | defesa_indeferida
    notificada | defesa_indeferida ──notify_decision (the penalty delivered; same state)──▶ same
    notificada | defesa_indeferida ──finalize (no appeal left)──▶ definitiva

Every step writes one audit entry (who, when, from, to, and the step's data); nothing is ever
deleted (the database refuses it). Reincidence and the sanction are computed again when the
agent confirms, from the infractions each rulebook counts by then (``reincidence.statuses``:
issued autos, or only final decisions for Porto Alegre's fretamento, art. 19 § 5º), so the auto
carries the right incidence and names the earlier autos. Confirming also answers what the rule
leaves to the agent: the provision's own exception ("salvo com autorização do usuário", PB art.
25 III), which the agent must answer or the proposal cannot be confirmed, and the pontuação
where the text leaves it to the case (POA art. 57 XI, c).
Deadlines get their due dates as the steps happen: the notification's from the auto (Pinto
Bandeira art. 36 § 1º archives an auto not notified in 30 days), the defence's from the
notification (suspensive where the law says so: the penalty is not enforceable until the
defence is decided or its period ends), the appeal's and the payment's from the decision or,
where the law says so (fretamento art. 33, Porto Velho art. 32), from the delivery of the
decision to the accused (``notify_decision``). Where the rulebook fixes no defence period (it
is in a municipal law outside the bundled text), the final decision needs the date the agent
states the period ended, which the audit keeps.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import geopandas as gpd
import pandas as pd
from sqlalchemy import ColumnElement, case, func, or_, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from db.enforcement.models import AuditEntry, Finding, Proposal, ProposalFinding
from db.fleet.models import Municipality, Vehicle
from db.upsert import hex_ewkb
from enforcement._errors import ProposalNotFoundError, ReviewDataError, TransitionError
from enforcement.documents import driver_ids
from enforcement.proposals import (
    CONFIRMED_STATUSES,
    JUDGED_COLUMNS,
    Proposed,
    deadline_due,
    judged_before,
    judged_periods,
    laxer_law,
    propose_all,
    reincidence_priors,
    sanction,
)
from enforcement.rulebook import (
    Rule,
    Rulebook,
    bundled_rulebooks,
    check_confidence_floor,
    rulebooks_for,
)
from fleet.dates import check_registry_instant
from geo.calendar import DEFAULT_TIMEZONE, UF_TIMEZONES
from tracking.detectors.findings import FILLED_AT, PROVISIONAL, WITHDRAWN, jsonable

TRANSITIONS: dict[str, tuple[str, ...]] = {
    "confirm": ("proposta",),
    "dismiss": ("proposta",),
    "notify": ("confirmada",),
    "archive": ("confirmada",),
    "file_defence": ("notificada",),
    "decide_defence": ("em_defesa",),
    "notify_decision": ("notificada", "defesa_indeferida"),
    "finalize": ("notificada", "defesa_indeferida"),
}
"""Which states each step starts from."""
_STEP_WORDS = {
    "confirm": "confirmar",
    "dismiss": "descartar",
    "notify": "notificar",
    "archive": "arquivar",
    "file_defence": "registrar a defesa de",
    "decide_defence": "decidir a defesa de",
    "notify_decision": "registrar a notificação da decisão de",
    "finalize": "tornar definitiva",
}
"""Each step as the agent reads it (pt-BR)."""

_AUTO_LOCK_KEY = 7_294_310_002  # pg_advisory_xact_lock key serialising auto numbers


def insert_findings(session: Session, records: Sequence[Mapping[str, Any]]) -> set[str]:
    """Insert finding records (findings-frame columns, shapely geometry) in one statement.

    Ids are deterministic: a finding stored before is left as it was. Returns the new ids.
    """
    if not records:
        return set()
    done = session.execute(
        insert(Finding).values(_finding_rows(records)).on_conflict_do_nothing()
        .returning(Finding.finding_id)
    )  # fmt: skip
    return {str(f) for f in done.scalars()}


def settle_provisional(session: Session, records: Sequence[Mapping[str, Any]]) -> set[str]:
    """Give a stored provisional finding the record's version of the same id; return the changed.

    No proposal rests on a provisional finding (:mod:`enforcement.proposals` lists it for
    review). Records of ids not stored, or stored as final, change nothing.
    """
    if not records:
        return set()
    rows = {r["finding_id"]: r for r in _finding_rows(records)}
    stored = session.execute(
        select(Finding.finding_id, Finding.ended_at, Finding.confidence, Finding.details).where(
            Finding.finding_id.in_(list(rows)), Finding.details.contains({PROVISIONAL: True})
        )
    ).all()
    settled = {  # unchanged versions (a free fix between rides) are not written again
        str(f.finding_id)
        for f in stored
        if (f.ended_at, f.confidence, f.details)
        != tuple(rows[f.finding_id][k] for k in ("ended_at", "confidence", "details"))
    }
    _replace_findings(session, rows, settled)
    return settled


def withdraw_provisional(
    session: Session, kind: str, closed_before: Mapping[str, int], confirmed: set[str]
) -> set[str]:
    """Mark withdrawn the provisional findings of closed days that no final version confirmed.

    ``closed_before``: per vehicle, the instant (UTC ns) before which its findings of ``kind``
    are closed; ``confirmed``: the ids whose final version comes now. The alerts say so too.
    Returns the ids withdrawn.
    """
    if not closed_before:
        return set()
    vehicles = sorted(closed_before)
    bounds = [  # the database keeps microseconds: the bound rounded up keeps "before" exact
        pd.Timestamp(-(-closed_before[v] // 1000), unit="us", tz="UTC").to_pydatetime()
        for v in vehicles
    ]
    found = session.execute(  # one statement for every vehicle of the call (the ingest's path)
        text(
            "UPDATE findings f SET details = (f.details - CAST(:p AS text)) "
            "|| jsonb_build_object(CAST(:w AS text), true) "
            "FROM unnest(CAST(:vs AS text[]), CAST(:ts AS timestamptz[])) AS c(v, t) "
            "WHERE f.kind = :k AND f.vehicle_id = c.v AND f.started_at < c.t "
            "AND f.details @> jsonb_build_object(CAST(:p AS text), true) "
            "AND NOT f.finding_id = ANY(:c) RETURNING f.finding_id"
        ),
        {
            "k": kind,
            "vs": vehicles,
            "ts": bounds,
            "p": PROVISIONAL,
            "w": WITHDRAWN,
            "c": sorted(confirmed),
        },
    )
    withdrawn = {str(f) for f in found.scalars()}
    _withdraw_alerts(session, withdrawn)
    return withdrawn


def withdraw_filled_gaps(session: Session, fixes: Mapping[str, Sequence[int]]) -> set[str]:
    """Mark withdrawn the stored tracking gaps that these fixes fall inside.

    ``fixes``: per vehicle, the instants (UTC ns) of fixes just stored. A ``tracking_gap``
    states that the vehicle sent no fix between ``started_at`` and ``ended_at``; a tracker
    flushing its offline buffer after its live fix (or two requests crossing) delivers fixes of
    that silence after the gap was emitted, and the statement is false. The finding keeps its
    evidence with ``withdrawn`` true and ``filled_at`` (the earliest such fix); the alerts say
    so too. Returns the ids withdrawn.
    """
    pairs = [(v, t // 1000) for v, ts in fixes.items() for t in ts]  # the database keeps µs
    if not pairs:
        return set()
    found = session.execute(
        text(
            "UPDATE findings f SET details = f.details || jsonb_build_object("
            "CAST(:w AS text), true, CAST(:fa AS text), s.first) "
            "FROM (SELECT g.finding_id, min(c.t) AS first FROM findings g "
            "JOIN unnest(CAST(:vs AS text[]), CAST(:ts AS timestamptz[])) AS c(v, t) "
            "ON c.v = g.vehicle_id AND c.t > g.started_at AND c.t < g.ended_at "
            "WHERE g.kind = 'tracking_gap' AND g.vehicle_id = ANY(:vehicles) "
            "AND NOT g.details ? CAST(:w AS text) GROUP BY g.finding_id) AS s "
            "WHERE f.finding_id = s.finding_id RETURNING f.finding_id"
        ),
        {
            "w": WITHDRAWN,
            "fa": FILLED_AT,
            "vs": [v for v, _ in pairs],
            "ts": [pd.Timestamp(us, unit="us", tz="UTC").to_pydatetime() for _, us in pairs],
            "vehicles": sorted(fixes),
        },
    )
    withdrawn = {str(f) for f in found.scalars()}
    _withdraw_alerts(session, withdrawn)
    return withdrawn


def _withdraw_alerts(session: Session, finding_ids: set[str]) -> None:
    """Mark the alerts of withdrawn findings so (with the gap's ``filled_at``, if any)."""
    if finding_ids:
        session.execute(
            text(
                "UPDATE alerts a SET payload = jsonb_set(a.payload, '{details}', "
                "((a.payload -> 'details') - CAST(:p AS text)) "
                "|| jsonb_build_object(CAST(:w AS text), true) "
                "|| jsonb_strip_nulls(jsonb_build_object(CAST(:fa AS text), f.details -> :fa))) "
                "FROM findings f WHERE f.finding_id = a.finding_id AND a.finding_id = ANY(:ids)"
            ),
            {"p": PROVISIONAL, "w": WITHDRAWN, "fa": FILLED_AT, "ids": sorted(finding_ids)},
        )


def refresh_findings(
    session: Session, findings: gpd.GeoDataFrame
) -> tuple[set[str], set[str], set[str]]:
    """Store a findings file's findings, its evidence replacing a stored finding's of the same id.

    A live finding is emitted once, from what was seen then (an illegal stand over its first
    days); a later ``pontual analyze`` of the same fixes may hold more under the same id. A
    stored finding no proposal rests on takes the file's version; one a proposal rests on is
    kept as judged.

    Returns
    -------
    tuple of set of str
        The new ids, the updated ids, and the ids kept as judged although the file differs.
    """
    records = findings.to_dict("records")
    if not records:
        return set(), set(), set()
    rows = {r["finding_id"]: r for r in _finding_rows(records)}
    stored = session.execute(
        select(
            Finding.finding_id,
            Finding.started_at,
            Finding.ended_at,
            Finding.confidence,
            Finding.details,
            select(ProposalFinding.finding_id)
            .where(ProposalFinding.finding_id == Finding.finding_id)
            .exists()
            .label("judged"),
        ).where(Finding.finding_id.in_(list(rows)))
    ).all()
    differ = {
        f.finding_id: bool(f.judged)
        for f in stored
        if (f.started_at, f.ended_at, f.confidence, f.details)
        != tuple(rows[f.finding_id][k] for k in ("started_at", "ended_at", "confidence", "details"))
    }
    new = insert_findings(session, records)
    updated = {i for i, judged in differ.items() if not judged}
    _replace_findings(session, rows, updated)
    return new, updated, {i for i, judged in differ.items() if judged}


def _replace_findings(
    session: Session, rows: Mapping[str, Mapping[str, Any]], finding_ids: set[str]
) -> None:
    """Overwrite the stored findings ``finding_ids`` with their ``rows``."""
    for finding_id in sorted(finding_ids):
        session.execute(
            update(Finding)
            .where(Finding.finding_id == finding_id)
            .values({k: v for k, v in rows[finding_id].items() if k != "finding_id"})
        )


def _finding_rows(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows of the ``findings`` table from finding records (geometry as an SQL expression)."""
    geoms = hex_ewkb([r.get("geometry") for r in records])
    return [
        {
            "finding_id": r["finding_id"],
            "kind": r["kind"],
            "vehicle_id": r["vehicle_id"],
            "stand_id": r["stand_id"],
            "started_at": pd.Timestamp(r["started_at"]).to_pydatetime(),
            "ended_at": pd.Timestamp(r["ended_at"]).to_pydatetime(),
            "confidence": float(r["confidence"]),
            "details": jsonable(r["details"] or {}),
            "geometry": func.ST_GeomFromEWKB(func.decode(g, "hex")) if g else None,
        }
        for r, g in zip(records, geoms, strict=True)
    ]


def store_findings(session: Session, findings: gpd.GeoDataFrame) -> int:
    """Insert a findings frame (see :func:`insert_findings`); return the number of new rows."""
    return len(insert_findings(session, findings.to_dict("records")))


def load_findings(session: Session, finding_ids: Iterable[str]) -> gpd.GeoDataFrame:
    """Read findings back as a findings frame (EPSG:4326)."""
    query = select(
        Finding.finding_id,
        Finding.kind,
        Finding.vehicle_id,
        Finding.stand_id,
        Finding.started_at,
        Finding.ended_at,
        Finding.confidence,
        Finding.details,
        Finding.geometry.label("geometry"),
    ).where(Finding.finding_id.in_(list(finding_ids)))
    frame = gpd.read_postgis(query, session.connection(), geom_col="geometry")
    for col in ("started_at", "ended_at"):
        frame[col] = pd.to_datetime(frame[col], utc=True)
    return frame


def confirmed_history(session: Session, *, municipality: str) -> pd.DataFrame:
    """Return a municipality's infractions that may count for reincidence.

    Columns ``vehicle_id``, ``rule_key``, ``committed_at``, ``status``, ``auto_number`` and
    ``proposal_id``; each rulebook counts only its ``reincidence.statuses``.
    """
    columns = ["vehicle_id", "rule_key", "committed_at", "status", "auto_number", "proposal_id"]
    rows = session.execute(
        select(*(getattr(Proposal, c) for c in columns)).where(
            Proposal.municipality_code == municipality,
            Proposal.status.in_(CONFIRMED_STATUSES),
        )
    ).all()
    return pd.DataFrame(rows, columns=columns)


def _record_to_row(p: Mapping[str, Any]) -> dict[str, Any]:
    fine = p["fine"]
    document = {
        k: p[k]
        for k in (
            "stand_id",
            "law",
            "alinea",
            "gravity_note",
            "penalty_provision",
            "fine_note",
            "fine_payer",
            "suspension_days",
            "incidence",
            "note",
            "reincidence_priors",
            "exception",
            "pontuacao_choices",
            "citation_uncertain",
            "repetition",
        )
        if k in p
    }
    return {
        "proposal_id": p["proposal_id"],
        "municipality_code": p["municipality"],
        "service": p["service"],
        "kind": p["kind"],
        "vehicle_id": p["vehicle_id"],
        "rule_key": p["rule_key"],
        "article": p["article"],
        "inciso": p["inciso"],
        "paragraph": p["paragraph"],
        "provision": p["provision"],
        "excerpt": p["excerpt"],
        "gravity": p["gravity"],
        "penalty": p["penalty"],
        "measure": p["measure"],
        "pontuacao": p["pontuacao"],
        "fine_amount": Decimal(str(fine["amount"])) if fine else None,
        "fine_unit": fine["unit"] if fine else None,
        "reincidence_count": p["reincidence_count"],
        "status": p["status"],
        "deadlines": p["deadlines"],
        "committed_at": pd.Timestamp(p["committed_at"]).to_pydatetime(),
        "committed_until": pd.Timestamp(p["committed_until"]).to_pydatetime(),
        "confidence": p["confidence"],
        "document": document,
    }


def store_proposals(
    session: Session, proposals: list[dict[str, Any]], *, actor: str = "sistema"
) -> int:
    """Insert proposal records and their links to findings (already stored).

    A proposal stored before (same deterministic id) is left as it was: its review may have
    advanced. Each new one gets a ``create`` audit entry by ``actor``. Returns the number of
    new proposals.
    """
    if not proposals:
        return 0
    new = session.execute(
        insert(Proposal)
        .values([_record_to_row(p) for p in proposals])
        .on_conflict_do_nothing()
        .returning(Proposal.proposal_id)
    ).scalars()
    fresh = set(new)
    links = [
        {"proposal_id": p["proposal_id"], "finding_id": f}
        for p in proposals
        if p["proposal_id"] in fresh
        for f in p["finding_ids"]
    ]
    if links:
        session.execute(insert(ProposalFinding).values(links).on_conflict_do_nothing())
    for pid in sorted(fresh):
        _audit(session, actor=actor, action="create", proposal_id=pid, frm=None, to="proposta")
    return len(fresh)


def generate_proposals(
    session: Session,
    *,
    municipality: str,
    timezone: str,
    actor: str = "sistema",
    confidence_floor: Mapping[str, float] | None = None,
) -> int:
    """Propose for the stored findings that no proposal of the municipality covers yet.

    ``actor`` (the agent or user who asked) is recorded on each new proposal's ``create``
    audit entry. Returns the number of new proposals (:func:`generate_report` also says what
    was left for review).
    """
    created, _ = generate_report(
        session,
        municipality=municipality,
        timezone=timezone,
        actor=actor,
        confidence_floor=confidence_floor,
    )
    return created


def _under_rulebooks_of(municipality: str) -> ColumnElement[bool]:
    """Select the findings a municipality's rulebooks may judge: none of a vehicle of elsewhere.

    A prefixo answers to the law of the municipality that registered it: a Porto Alegre taxi's
    findings are never proposed under Pinto Bandeira's rulebook, whichever the agent chose. A
    finding of no vehicle, of a vehicle not in the registry or registered with no municipality
    is judged as before (the agent confirms it).
    """
    elsewhere = select(Vehicle.vehicle_id).where(
        Vehicle.municipality_code.is_not(None), Vehicle.municipality_code != municipality
    )
    return or_(Finding.vehicle_id.is_(None), Finding.vehicle_id.not_in(elsewhere))


def _with_finding(finding_id: str) -> ColumnElement[bool]:
    """Select a finding and its vehicle's other findings: what is judged with it.

    A rule's repetition and a vehicle's proposals are counted per vehicle; a finding of no
    vehicle is judged alone.
    """
    vehicle = select(Finding.vehicle_id).where(Finding.finding_id == finding_id)
    return or_(Finding.finding_id == finding_id, Finding.vehicle_id == vehicle.scalar_subquery())


def generate_report(
    session: Session,
    *,
    municipality: str,
    timezone: str,
    actor: str = "sistema",
    confidence_floor: Mapping[str, float] | None = None,
    with_finding: str | None = None,
) -> tuple[int, Proposed]:
    """Propose for the stored findings no proposal of the municipality covers yet.

    The path of live findings too: the live detectors store findings (``engines.live``),
    and this turns them into proposals. A finding under its kind's confidence floor (the
    rulebook's, merged with ``confidence_floor``) or not repeated enough for its rule is listed
    for review and stays uncovered: a later run judges it again (with the findings that came
    since). Findings already proposed count towards a rule's repetition. With ``with_finding``
    (an agent acting on one alert), only that finding and its vehicle's other findings.

    Returns
    -------
    created, proposed
        The number of new proposals, and :func:`enforcement.proposals.propose_all`'s result
        (the records, the findings without rule, the findings for review).
    """
    books = rulebooks_for(municipality)
    if confidence_floor:
        check_confidence_floor(confidence_floor, where="confidence_floor")
    _ensure_municipality(session, next(iter(books.values())))
    covered = _covered(municipality)
    scope = [Finding.finding_id.not_in(covered), _under_rulebooks_of(municipality)]
    if with_finding is not None:
        scope.append(_with_finding(with_finding))
    ids = session.execute(select(Finding.finding_id).where(*scope)).scalars()
    done = _propose_uncovered(
        session, books, list(ids), covered, timezone=timezone, confidence_floor=confidence_floor
    )
    return store_proposals(session, done.proposals, actor=actor), done


def count_of_other_municipalities(
    session: Session, *, municipality: str, with_finding: str | None = None
) -> int:
    """Count the stored findings of prefixos of other municipalities (not judged here).

    :func:`generate_report` leaves them out of ``municipality``'s rulebooks. With
    ``with_finding``, among that finding and its vehicle's others.
    """
    scope = [~_under_rulebooks_of(municipality)]
    if with_finding is not None:
        scope.append(_with_finding(with_finding))
    return int(session.scalar(select(func.count()).select_from(Finding).where(*scope)) or 0)


def why_not_proposed(
    session: Session, finding_id: str, *, municipality: str, timezone: str
) -> str | None:
    """Say (pt-BR) why a stored finding makes no proposal under the municipality's rulebooks.

    Judged as :func:`generate_report` judges it, with the vehicle's other findings no proposal
    covers yet (a rule's repetition counts them), and nothing stored. None when the finding
    would be proposed, is covered already, or is not stored.
    """
    books = rulebooks_for(municipality)
    covered = _covered(municipality)
    finding = session.get(Finding, finding_id)
    proposed = select(Finding.finding_id).where(
        Finding.finding_id == finding_id, Finding.finding_id.in_(covered)
    )
    if finding is None or session.scalar(proposed) is not None:
        return None
    judged = select(Finding.finding_id).where(
        Finding.finding_id == finding_id, _under_rulebooks_of(municipality)
    )
    if session.scalar(judged) is None:
        vehicle = session.get(Vehicle, finding.vehicle_id)
        home = vehicle.municipality_code if vehicle is not None else None
        place = session.get(Municipality, home) if home is not None else None
        named = f"{place.name}/{place.uf}, {home}" if place is not None else home
        return (
            f"o prefixo {finding.vehicle_id} é do cadastro de outro município ({named}): "
            "o regulamento escolhido não se aplica a ele"
        )
    ids = session.execute(
        select(Finding.finding_id).where(
            _with_finding(finding_id), Finding.finding_id.not_in(covered)
        )
    ).scalars()
    done = _propose_uncovered(session, books, list(ids), covered, timezone=timezone)
    if any(finding_id in p["finding_ids"] for p in done.proposals):
        return None
    reasons = [r for r in done.for_review if r["finding_id"] == finding_id]
    if reasons:
        return "; ".join(f"{r['reason']} ({r['provision']})" for r in reasons)
    place = session.get(Municipality, municipality)
    book = f"o regulamento de {place.name}/{place.uf}" if place is not None else "o regulamento"
    if not any(r.kind == finding.kind for b in books.values() for r in b.rules):
        return f"{book} não tem dispositivo para este tipo de achado"
    return (
        f"{book} tem dispositivo para este tipo de achado, mas não para este caso dele (nenhuma "
        "das suas regras para o tipo descreve o que o achado mostra)"
    )


def awaits_repetition(
    session: Session, finding: Mapping[str, Any], *, municipality: str, timezone: str
) -> bool:
    """Tell whether a stored finding's rule asks for repetition the vehicle has not reached.

    Under the municipality's rulebooks, a finding whose rule has a ``repetition`` (POA art. 58,
    IX: ``gps_anomaly``) that :func:`generate_report` would not propose yet: judged with the
    vehicle's findings of that kind within the rule's window (those a proposal covers as
    context), nothing stored. False for every other finding.
    """
    books = rulebooks_for(municipality)
    details = finding.get("details") or {}
    windows = [
        r.repetition.window_hours
        for b in books.values()
        for r in b.rules
        if r.repetition is not None and r.matches(finding["kind"], details)
    ]
    if not windows:
        return False
    window = pd.Timedelta(hours=max(windows))
    start = pd.Timestamp(finding["started_at"])
    covered = _covered(municipality)
    near = session.execute(
        select(Finding.finding_id).where(
            Finding.vehicle_id == str(finding["vehicle_id"]),
            Finding.kind == finding["kind"],
            Finding.finding_id != finding["finding_id"],
            Finding.finding_id.not_in(covered),
            Finding.started_at >= (start - window).to_pydatetime(),
            Finding.started_at <= (start + window).to_pydatetime(),
        )
    ).scalars()
    ids = [str(finding["finding_id"]), *near]
    done = _propose_uncovered(session, books, ids, covered, timezone=timezone, reincidence=False)
    return not any(finding["finding_id"] in p["finding_ids"] for p in done.proposals)


def _covered(municipality: str) -> Any:
    """Select the ids of the findings a proposal of the municipality rests on (a subquery)."""
    return (
        select(ProposalFinding.finding_id)
        .join(Proposal)
        .where(Proposal.municipality_code == municipality)
    )


def _propose_uncovered(
    session: Session,
    books: Mapping[str, Rulebook],
    finding_ids: list[str],
    covered: Any,
    *,
    timezone: str,
    confidence_floor: Mapping[str, float] | None = None,
    reincidence: bool = True,
) -> Proposed:
    """:func:`propose_all` over stored findings no proposal covers yet (nothing stored).

    ``reincidence`` False skips reading the confirmed infractions: what is proposed is the
    same, only the proposals' reincidence is not counted.
    """
    findings = load_findings(session, finding_ids)
    if findings.empty:
        return Proposed([], {}, [])
    municipality = next(iter(books.values())).municipality
    return propose_all(
        findings,
        books,
        timezone=timezone,
        confirmed=confirmed_history(session, municipality=municipality) if reincidence else None,
        fleet=_service_categories(session, findings),
        confidence_floor=confidence_floor,
        context=_repetition_context(session, books, findings, covered),
        judged=_judged(session, books, findings),
    )


def _judged(
    session: Session, books: Mapping[str, Rulebook], findings: pd.DataFrame
) -> pd.DataFrame:
    """Return the proposed findings (``JUDGED_COLUMNS``) of the new ones' kinds and period.

    Also those of their vehicles under a rule against an omission (``one_omission_per``), of
    any period: the omission may have been judged long before.
    """
    municipality = next(iter(books.values())).municipality
    kinds = sorted(set(findings["kind"]))
    omissions = sorted(
        {r.kind for b in books.values() for r in b.rules if r.one_omission_per} & set(kinds)
    )
    vehicles = sorted({str(v) for v in findings["vehicle_id"].dropna()})
    rows = session.execute(
        select(
            Finding.kind,
            Proposal.vehicle_id,
            Finding.started_at,
            Finding.ended_at,
            Finding.finding_id,
            Proposal.proposal_id,
            Proposal.status,
            case((Finding.kind.in_(omissions), Finding.details), else_=None),  # omissions only
        )
        .join(ProposalFinding, ProposalFinding.finding_id == Finding.finding_id)
        .join(Proposal, Proposal.proposal_id == ProposalFinding.proposal_id)
        .where(
            Proposal.municipality_code == municipality,
            Finding.kind.in_(kinds),
            or_(
                (Finding.started_at <= findings["ended_at"].max().to_pydatetime())
                & (Finding.ended_at >= findings["started_at"].min().to_pydatetime()),
                Finding.kind.in_(omissions) & Proposal.vehicle_id.in_(vehicles),
            ),
        )
    ).all()
    return pd.DataFrame([tuple(r) for r in rows], columns=list(JUDGED_COLUMNS))


def _service_categories(session: Session, findings: pd.DataFrame) -> pd.DataFrame:
    """Return the registered vehicles' ``service_category`` (the rulebooks' meter exemption)."""
    vehicles = sorted({str(v) for v in findings["vehicle_id"].dropna()})
    rows = session.execute(
        text(
            "SELECT vehicle_id, service_category FROM vehicles "
            "WHERE vehicle_id = ANY(:vs) AND service_category IS NOT NULL"
        ),
        {"vs": vehicles},
    ).all()
    return pd.DataFrame(
        [tuple(r) for r in rows], columns=["vehicle_id", "service_category"], dtype=object
    )


def _repetition_context(
    session: Session, books: Mapping[str, Rulebook], findings: pd.DataFrame, covered: Any
) -> pd.DataFrame | None:
    """Return the proposed findings near the new ones, of kinds whose rule needs repetition."""
    rules = [r for b in books.values() for r in b.rules if r.repetition is not None]
    if not rules:
        return None
    kinds = sorted({r.kind for r in rules})
    window = pd.Timedelta(hours=max(r.repetition.window_hours for r in rules if r.repetition))
    mine = findings.loc[findings["kind"].isin(kinds)]
    if mine.empty:
        return None
    ids = session.execute(
        select(Finding.finding_id).where(
            Finding.finding_id.in_(covered),
            Finding.kind.in_(kinds),
            Finding.vehicle_id.in_(sorted(mine["vehicle_id"].dropna().astype(str).unique())),
            Finding.started_at >= (mine["started_at"].min() - window).to_pydatetime(),
            Finding.started_at <= (mine["started_at"].max() + window).to_pydatetime(),
        )
    ).scalars()
    found: pd.DataFrame = load_findings(session, list(ids))
    return found


def _ensure_municipality(session: Session, book: Rulebook) -> None:
    """Register the rulebook's municipality if the registry lacks it (proposals refer to it)."""
    from db.fleet.models import Municipality

    row = {
        "code": book.municipality,
        "name": book.municipality_name,
        "uf": book.uf,
        "timezone": UF_TIMEZONES.get(book.uf),
    }
    session.execute(insert(Municipality).values(row).on_conflict_do_nothing())


def _audit(
    session: Session,
    *,
    actor: str,
    action: str,
    proposal_id: str,
    frm: str | None,
    to: str,
    **data: Any,
) -> None:
    """Log a step of the proposal.

    ``step_at`` in ``data`` is when the step was taken; the entry's own ``at`` is when it was
    recorded (a delivery is often recorded days later).
    """
    session.add(
        AuditEntry(
            actor=actor,
            action=action,
            entity="proposal",
            entity_id=proposal_id,
            details={"from": frm, "to": to, **jsonable(data)},
        )
    )


def get_proposal(session: Session, proposal_id: str, *, lock: bool = False) -> Proposal:
    """Return one proposal (row-locked for a review step when ``lock``)."""
    query = select(Proposal).where(Proposal.proposal_id == proposal_id)
    found = session.execute(query.with_for_update() if lock else query).scalar_one_or_none()
    if found is None:
        msg = f"proposta '{proposal_id}' não encontrada"
        raise ProposalNotFoundError(msg)
    return found


def rule_of(proposal: Proposal) -> tuple[Rulebook, Rule]:
    """Return the rulebook and rule a stored proposal was drawn from."""
    book = bundled_rulebooks().get((proposal.municipality_code, proposal.service))
    prefix = f"{proposal.municipality_code}:{proposal.service}:"
    rule = next(
        (r for r in (book.rules if book else ()) if prefix + r.key == proposal.rule_key), None
    )
    if book is None or rule is None:
        msg = (
            f"regra '{proposal.rule_key}' da proposta {proposal.proposal_id} "
            "não está mais no regulamento"
        )
        raise TransitionError(msg)
    return book, rule


def _said(status: str) -> str:
    """Return a state as people say it: 'defesa indeferida', not ``defesa_indeferida``."""
    return status.replace("_", " ")


def _step(session: Session, proposal_id: str, action: str, at: dt.datetime) -> Proposal:
    """Lock the proposal, check the step is allowed from its state and dated after the facts."""
    p = get_proposal(session, proposal_id, lock=True)
    if p.status not in TRANSITIONS[action]:
        states = TRANSITIONS[action]
        allowed = " ou ".join(f"'{_said(state)}'" for state in states)
        msg = (
            f"a proposta {proposal_id} está '{_said(p.status)}' (talvez decidida em outra aba "
            f"ou por outra pessoa): só se pode {_STEP_WORDS.get(action, action)} uma proposta "
            f"{'na situação' if len(states) == 1 else 'nas situações'} {allowed}"
        )
        raise TransitionError(msg)
    _check_chronology(p, at)
    return p


STEP_FACTS = (
    ("committed_until", "o fim da infração"),
    ("confirmed_at", "a lavratura do auto"),
    ("notified_at", "a entrega da notificação"),
    ("defence_filed_at", "o protocolo da defesa"),
    ("decided_at", "a decisão da defesa"),
    ("decision_notified_at", "a notificação da decisão"),
)
"""A proposal's dated facts in the order of the procedure (column, pt-BR with its article): a
step is dated after each of them."""

_CONTRACTIONS = {("a", "o"): "ao", ("a", "a"): "à", ("de", "o"): "do", ("de", "a"): "da"}


def with_preposition(preposition: str, phrase: str) -> str:
    """Join ``a`` or ``de`` to a phrase of :data:`STEP_FACTS` ("de", "o fim…" → "do fim…")."""
    article, rest = phrase.split(" ", 1)
    return f"{_CONTRACTIONS[(preposition, article)]} {rest}"


def latest_fact(p: Proposal) -> tuple[dt.datetime, str] | None:
    """Return ``p``'s latest dated fact (:data:`STEP_FACTS`) and its words, if any."""
    facts = [(getattr(p, c), what) for c, what in STEP_FACTS if getattr(p, c) is not None]
    return max(facts, key=lambda f: f[0]) if facts else None


CLOCK_SKEW = dt.timedelta(minutes=5)
"""How far past the server's clock a step's stated date may be (another machine's clock)."""


def _check_chronology(p: Proposal, at: dt.datetime) -> None:
    """Refuse a step dated before the infraction or an earlier step, or in the future."""
    book, _ = rule_of(p)
    zone = ZoneInfo(UF_TIMEZONES.get(book.uf, DEFAULT_TIMEZONE))

    def local(t: dt.datetime) -> str:
        return f"{t.astimezone(zone):%d/%m/%Y %H:%M}"

    latest = latest_fact(p)
    if latest is not None and at < latest[0]:
        msg = (
            f"a data do passo ({local(at)}) é anterior {with_preposition('a', latest[1])} "
            f"({local(latest[0])}): os passos da revisão seguem a ordem dos fatos"
        )
        raise ReviewDataError(msg)
    if at > dt.datetime.now(dt.UTC) + CLOCK_SKEW:
        msg = f"a data do passo ({local(at)}) é futura: registra-se um passo já dado"
        raise ReviewDataError(msg)


def _day(iso: str) -> str:
    """Write a stored deadline (ISO, the municipality's zone) as its local day, dd/mm/aaaa."""
    return f"{dt.datetime.fromisoformat(iso):%d/%m/%Y}"


def _now(at: dt.datetime | None) -> dt.datetime:
    now = at or dt.datetime.now(dt.UTC)
    if now.tzinfo is None:
        msg = "a data/hora do passo de revisão precisa de fuso horário"
        raise ReviewDataError(msg)
    if at is not None:  # a step's date is a registry date (fleet.dates' range)
        check_registry_instant(at, name="at")
    return now


def _set_due(p: Proposal, start: str, at: dt.datetime, *, defence_filed: bool = True) -> None:
    """Date the periods counted from ``start``.

    Without a defence, not those the law then counts from the defence period's end
    (``without_defence_from``: :func:`finalize`).
    """
    book, _ = rule_of(p)
    timezone = UF_TIMEZONES.get(book.uf, DEFAULT_TIMEZONE)
    deadlines = {k: dict(v) for k, v in (p.deadlines or {}).items()}
    for d in deadlines.values():
        if d.get("from") == start and (defence_filed or not d.get("without_defence_from")):
            d["due"] = deadline_due(at, d, timezone=timezone).isoformat()
    p.deadlines = deadlines


MIN_ANSWER_CHARS = 10
"""Shortest answer to a rule's exception: a reason, not a checkbox."""
MIN_GROUNDS_CHARS = 15
"""Shortest reason of a dismissal and grounds of a decision: audited, so a sentence, not a word."""

_WORD = re.compile(r"[^\W\d_]{2,}")


def is_sentence(text: str, minimum: int) -> bool:
    """Tell whether an audited text is words: ``minimum`` characters and two words or more.

    "aaaaaaaaaaaaaaa" has the length of a reason and says nothing.
    """
    return len(text.strip()) >= minimum and len(_WORD.findall(text)) >= 2


def _check_grounds(reason: str, what: str) -> None:
    """Refuse a reason or grounds not :func:`is_sentence` (:data:`MIN_GROUNDS_CHARS`)."""
    if not is_sentence(reason, MIN_GROUNDS_CHARS):
        msg = (
            f"{what} exige uma frase de ao menos {MIN_GROUNDS_CHARS} caracteres e duas "
            "palavras, não uma palavra"
        )
        raise ReviewDataError(msg)


def _exception_answer(
    proposal_id: str, rule: Rule, answer: str | None, *, agent_id: str, at: dt.datetime
) -> dict[str, Any] | None:
    """Return the answer to the rule's exception to record; refuse a missing one."""
    text = (answer or "").strip()
    if rule.exception is None:
        if text:
            msg = (
                f"a proposta {proposal_id} ({rule.provision}) não tem exceção legal a responder; "
                "confirme sem --exception-answer"
            )
            raise ReviewDataError(msg)
        return None
    exc = rule.exception
    if not is_sentence(text, MIN_ANSWER_CHARS):
        msg = (
            f"a proposta {proposal_id} não pode ser confirmada sem responder à exceção do "
            f"{exc.provision} ('{exc.excerpt}'): {exc.question} Informe por que a exceção não se "
            f"aplica (--exception-answer, ao menos {MIN_ANSWER_CHARS} caracteres); se ela se "
            "aplica, descarte a proposta"
        )
        raise ReviewDataError(msg)
    return {
        "provision": exc.provision,
        "excerpt": exc.excerpt,
        "question": exc.question,
        "answer": text,
        "answered_by": agent_id,
        "answered_at": at.isoformat(),
    }


def _pontuacao(proposal_id: str, rule: Rule, chosen: str | None) -> str | None:
    """Return the auto's pontuação: the rule's, or the agent's choice where the rule leaves it."""
    if rule.pontuacao_choices:
        if chosen not in rule.pontuacao_choices:
            allowed = ", ".join(rule.pontuacao_choices)
            got = f"foi '{chosen}'" if chosen else "não foi informada"
            msg = (
                f"a pontuação da proposta {proposal_id} ({rule.provision}) fica a critério do "
                f"agente, conforme o caso (art. 55): --pontuacao {got}; esperado um de: {allowed}"
            )
            raise ReviewDataError(msg)
        return chosen
    if chosen is not None and chosen != rule.pontuacao:
        fixed = f"'{rule.pontuacao}'" if rule.pontuacao else "nenhuma"
        msg = (
            f"a pontuação do {rule.provision} é fixada pelo texto legal ({fixed}): "
            "confirme sem --pontuacao"
        )
        raise ReviewDataError(msg)
    return rule.pontuacao


def confirm(
    session: Session,
    proposal_id: str,
    *,
    agent_id: str,
    at: dt.datetime | None = None,
    exception_answer: str | None = None,
    pontuacao: str | None = None,
) -> Proposal:
    """Confirm a proposal: the agent issues the auto de infração (numbered), sanction recomputed.

    Parameters
    ----------
    exception_answer
        Required when the rule states an exception ("salvo com autorização do usuário"): why it
        does not apply (e.g. the passenger did not authorise the route), in the agent's words;
        printed on the auto. Refused for a rule without exception.
    pontuacao
        Required when the rule leaves the pontuação to the case (POA art. 57, XI, c): one of
        the rule's ``pontuacao_choices``; refused when the text fixes it.

    Raises
    ------
    TransitionError
        Not a ``proposta``, no agent, the exception unanswered, a pontuação out of place, a
        finding judged by a limit stricter than the law's (:func:`_within_the_law`), or its
        conduct decided in another proposal (:func:`_not_judged_before`).
    """
    if not agent_id.strip():
        raise TransitionError("confirmar exige a identificação do agente")
    now = _now(at)
    p = _step(session, proposal_id, "confirm", now)
    book, rule = rule_of(p)
    findings = load_findings(session, finding_ids_of(session, proposal_id))
    _within_the_law(p, book, findings)
    _not_judged_before(session, p, book, rule, findings)
    exception = _exception_answer(proposal_id, rule, exception_answer, agent_id=agent_id, at=now)
    chosen = _pontuacao(proposal_id, rule, pontuacao)
    # the agent's choice (where the text fixes the pontuação, it stands as written)
    if rule.pontuacao_choices and chosen == "condutor" and not driver_ids(findings["details"]):
        msg = (
            f"a proposta {proposal_id} não identifica o condutor (as posições não trazem o "
            "condutor): a pontuação não pode recair sobre ele; escolha o autorizatário"
        )
        raise ReviewDataError(msg)
    priors = reincidence_priors(
        book,
        key=p.rule_key,
        vehicle_id=p.vehicle_id or "",
        at=pd.Timestamp(p.committed_at),
        confirmed=confirmed_history(session, municipality=p.municipality_code),
    )
    count = len(priors)
    s = sanction(book, rule, count)
    p.reincidence_count = count
    p.penalty = s["penalty"]
    p.fine_amount = Decimal(str(s["fine"]["amount"])) if s["fine"] else None
    p.fine_unit = s["fine"]["unit"] if s["fine"] else None
    p.pontuacao = chosen
    p.document = {
        **(p.document or {}),
        **{k: s[k] for k in ("incidence", "fine_note", "suspension_days")},
        "reincidence_priors": priors,
        "exception": exception,
        "pontuacao_choices": list(rule.pontuacao_choices),
        "citation_uncertain": rule.citation_uncertain,
    }
    p.auto_number = _next_auto_number(session, p.municipality_code, now)
    p.agent_id = agent_id
    p.confirmed_at = now
    p.status = "confirmada"
    p.updated_at = now
    _set_due(p, "auto", now)
    extra: dict[str, Any] = {}
    if exception is not None:
        extra["exception_answer"] = exception["answer"]
    if rule.pontuacao_choices:
        extra["pontuacao"] = chosen
    _audit(
        session,
        actor=agent_id,
        action="confirm",
        step_at=now.isoformat(),
        proposal_id=proposal_id,
        frm="proposta",
        to="confirmada",
        auto_number=p.auto_number,
        reincidence_count=count,
        reincidence_autos=[x["auto_number"] for x in priors],
        **extra,
    )
    return p


def _within_the_law(p: Proposal, book: Rulebook, findings: gpd.GeoDataFrame) -> None:
    """Refuse to confirm a proposal whose findings were judged by a limit stricter than the law's.

    :func:`enforcement.proposals.laxer_law`, as when proposing: a proposal stored before that
    check (or under another rulebook version) is never issued as an auto.
    """
    for kind, details in zip(findings["kind"], findings["details"], strict=True):
        if (why := laxer_law(book, kind, details or {})) is not None:
            msg = f"a proposta {p.proposal_id} não pode ser confirmada: {why}; descarte-a"
            raise TransitionError(msg)


def _not_judged_before(
    session: Session, p: Proposal, book: Rulebook, rule: Rule, findings: gpd.GeoDataFrame
) -> None:
    """Refuse to confirm a proposal whose conduct another proposal already decided.

    :func:`enforcement.proposals.judged_before` against the vehicle's confirmed or dismissed
    proposals, as when proposing: one stored before that check (or beside an open twin the
    agent decided first) is never a second auto for one conduct, nor a dismissed one's return.
    """
    if findings.empty:
        return
    judged = _judged(session, {p.service: book}, findings)
    judged = judged[(judged["proposal_id"] != p.proposal_id) & (judged["status"] != "proposta")]
    periods = judged_periods(judged)
    for finding in findings.to_dict("records"):
        if (why := judged_before(periods, judged, rule, finding, p.vehicle_id or "")) is not None:
            msg = f"a proposta {p.proposal_id} não pode ser confirmada: {why}; descarte-a"
            raise TransitionError(msg)


def _next_auto_number(session: Session, municipality: str, at: dt.datetime) -> str:
    session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _AUTO_LOCK_KEY})
    prefix = f"AI-{municipality}-{at.year}-"
    last = session.execute(
        select(func.max(Proposal.auto_number)).where(Proposal.auto_number.like(prefix + "%"))
    ).scalar_one()
    n = int(last.rsplit("-", 1)[1]) + 1 if last else 1
    return f"{prefix}{n:06d}"


def dismiss(
    session: Session,
    proposal_id: str,
    *,
    agent_id: str,
    reason: str,
    at: dt.datetime | None = None,
) -> Proposal:
    """Dismiss a proposal, with the agent's reason."""
    if not agent_id.strip():
        raise TransitionError("descartar exige o agente e o motivo")
    _check_grounds(reason, "o motivo do descarte")
    now = _now(at)
    p = _step(session, proposal_id, "dismiss", now)
    p.status, p.dismissed_reason, p.agent_id, p.updated_at = "descartada", reason, agent_id, now
    _audit(
        session,
        actor=agent_id,
        action="dismiss",
        step_at=now.isoformat(),
        proposal_id=proposal_id,
        frm="proposta",
        to="descartada",
        reason=reason,
    )
    return p


def notify(
    session: Session, proposal_id: str, *, actor: str, at: dt.datetime | None = None
) -> Proposal:
    """Record the notificação de penalidade's delivery; the defence period starts."""
    now = _now(at)
    p = _step(session, proposal_id, "notify", now)
    due = (p.deadlines or {}).get("notification", {}).get("due")
    if due and now > dt.datetime.fromisoformat(due):
        msg = (
            f"prazo de notificação vencido em {_day(due)} "
            f"({p.deadlines['notification']['provision']}): o auto deve ser arquivado"
        )
        raise TransitionError(msg)
    p.status, p.notified_at, p.updated_at = "notificada", now, now
    _set_due(p, "notification", now)
    _audit(
        session,
        actor=actor,
        action="notify",
        step_at=now.isoformat(),
        proposal_id=proposal_id,
        frm="confirmada",
        to="notificada",
    )
    return p


def file_defence(
    session: Session, proposal_id: str, *, actor: str, at: dt.datetime | None = None
) -> Proposal:
    """Record a defence filed within its period (suspensive where the law says so)."""
    now = _now(at)
    p = _step(session, proposal_id, "file_defence", now)
    due = (p.deadlines or {}).get("defence", {}).get("due")
    if due and now > dt.datetime.fromisoformat(due):
        msg = (
            f"defesa fora do prazo (vencido em {_day(due)}, {p.deadlines['defence']['provision']})"
        )
        raise TransitionError(msg)
    p.status, p.defence_filed_at, p.updated_at = "em_defesa", now, now
    _audit(
        session,
        actor=actor,
        action="file_defence",
        step_at=now.isoformat(),
        proposal_id=proposal_id,
        frm="notificada",
        to="em_defesa",
    )
    return p


def decide_defence(
    session: Session,
    proposal_id: str,
    *,
    agent_id: str,
    accepted: bool,
    reason: str,
    at: dt.datetime | None = None,
) -> Proposal:
    """Decide a defence: accepted (the auto falls) or rejected (the penalty stands)."""
    _check_grounds(reason, "a fundamentação da decisão da defesa")
    now = _now(at)
    p = _step(session, proposal_id, "decide_defence", now)
    to = "defesa_deferida" if accepted else "defesa_indeferida"
    p.status, p.decided_at, p.updated_at = to, now, now
    _set_due(p, "decision", now)
    _audit(
        session,
        actor=agent_id,
        action="decide_defence",
        step_at=now.isoformat(),
        proposal_id=proposal_id,
        frm="em_defesa",
        to=to,
        reason=reason,
    )
    return p


def notify_decision(
    session: Session, proposal_id: str, *, actor: str, at: dt.datetime | None = None
) -> Proposal:
    """Record the delivery of the decision (the penalty imposed) to the accused.

    After a rejected defence, or without one once the defence period has ended (Porto Velho
    art. 25: the penalty follows the procedure; art. 32: the appeal counts from the receipt of
    its notification). The state stays; the periods the rulebook counts from the delivery
    (``from = "decision_notification"``: fretamento art. 33 and art. 32, parágrafo único; Porto
    Velho art. 32) get their due dates, except, without a defence, those the law then counts
    from the defence period's end (fretamento art. 33). Dated not before the decision (or the
    defence period's end) nor in the future; once.

    Raises
    ------
    TransitionError
        Neither a rejected defence nor a notified auto, the defence period still open, or the
        delivery recorded already.
    """
    now = _now(at)
    p = _step(session, proposal_id, "notify_decision", now)
    if p.decision_notified_at is not None:
        msg = (
            f"a notificação da decisão da proposta {proposal_id} já foi registrada "
            f"({_local_date(p.decision_notified_at, p):%d/%m/%Y})"
        )
        raise TransitionError(msg)
    defence_filed = p.status != "notificada"
    if not defence_filed:
        due = ((p.deadlines or {}).get("defence") or {}).get("due")
        if not due:
            msg = (
                f"a proposta {proposal_id} não tem prazo de defesa fixado no regulamento: sem "
                "defesa, registre a decisão definitiva com a data do fim do prazo"
            )
            raise TransitionError(msg)
        if now <= dt.datetime.fromisoformat(due):
            msg = (
                f"a proposta {proposal_id} ainda está no prazo de defesa (até {_day(due)}): sem "
                "defesa, a penalidade só é aplicada e notificada depois do fim do prazo"
            )
            raise TransitionError(msg)
    p.decision_notified_at, p.updated_at = now, now
    _set_due(p, "decision_notification", now, defence_filed=defence_filed)
    _audit(
        session,
        actor=actor,
        action="notify_decision",
        step_at=now.isoformat(),
        proposal_id=proposal_id,
        frm=p.status,
        to=p.status,
    )
    return p


def finalize(
    session: Session,
    proposal_id: str,
    *,
    agent_id: str,
    reason: str,
    period_ended_on: dt.date | None = None,
    at: dt.datetime | None = None,
) -> Proposal:
    """Record the final decision: no administrative appeal is left (state ``definitiva``).

    From ``notificada`` (no defence was filed) once the defence period, and the appeal period
    that follows it where the rulebook has one (e.g. fretamento art. 33: 15 days "do término do
    prazo desta"), have ended; from ``defesa_indeferida`` once the appeal period has ended (or
    the appeal was decided: say so in ``reason``). Only final decisions count for reincidence
    under Porto Alegre's fretamento decree (art. 19, § 5º). Where the appeal counts from the
    delivery of the decision (fretamento art. 33, Porto Velho art. 32), the decision is final
    only once that delivery is recorded (:func:`notify_decision`) and the period from it has
    ended; without a defence too, unless the law then counts it from the defence period's end
    (``without_defence_from``).

    Where the rulebook fixes no defence period (Porto Alegre's taxi decree: the periods are in
    Lei 11.582/2014, outside the bundled texts), the agent states ``period_ended_on``: the local
    date the period (of defence, or of appeal after a rejected defence) ended under the
    municipality's law; not before the notification (or the decision), before the step's day.
    It is kept in the audit entry and in the proposal's document (``final_period_ended_on``).

    Raises
    ------
    ReviewDataError
        ``period_ended_on`` missing or out of range where the rulebook fixes no period, or
        given where it does.
    TransitionError
        No reason, a state other than those two, or a defence or appeal period still open.
    """
    if not agent_id.strip():
        raise TransitionError("registrar a decisão definitiva exige o agente e a fundamentação")
    _check_grounds(reason, "a fundamentação da decisão definitiva")
    now = _now(at)
    p = _step(session, proposal_id, "finalize", now)
    deadlines = p.deadlines or {}
    defence, appeal = deadlines.get("defence") or {}, deadlines.get("appeal") or {}
    open_until: tuple[str, str] | None = None
    from_delivery = appeal.get("from") == "decision_notification"
    waits = p.status == "defesa_indeferida" or not appeal.get("without_defence_from")
    if from_delivery and not appeal.get("due") and waits:
        msg = (
            f"a decisão da proposta {proposal_id} ainda não é definitiva: o prazo de recurso "
            f"({appeal.get('provision')}) conta da notificação da decisão ao autuado, que não "
            "foi registrada; registre-a e aguarde o fim do prazo"
        )
        raise TransitionError(msg)
    if from_delivery and appeal.get("due") and not appeal.get("without_defence_from"):
        open_until = (appeal["due"], f"recurso, {appeal.get('provision')}")
    elif p.status == "notificada" and defence.get("due"):
        until = dt.datetime.fromisoformat(defence["due"])
        if appeal.get("days"):
            book, _ = rule_of(p)
            timezone = UF_TIMEZONES.get(book.uf, DEFAULT_TIMEZONE)
            until = deadline_due(until, appeal, timezone=timezone)
            open_until = (until.isoformat(), f"recurso, {appeal.get('provision')}")
        else:
            open_until = (until.isoformat(), f"defesa, {defence.get('provision')}")
    elif p.status == "defesa_indeferida" and appeal.get("due"):
        open_until = (appeal["due"], f"recurso, {appeal.get('provision')}")
    if open_until and now <= dt.datetime.fromisoformat(open_until[0]):
        msg = (
            f"a decisão da proposta {proposal_id} ainda não é definitiva: cabe {open_until[1]} "
            f"até {_day(open_until[0])}"
        )
        raise TransitionError(msg)
    stated: dict[str, Any] = {}
    if needs_period_end(p):
        ended = _period_end(p, period_ended_on, now)
        stated = {"period_ended_on": ended.isoformat()}
    elif period_ended_on is not None:
        msg = (
            f"o regulamento fixa o prazo de defesa ({defence.get('provision')}): "
            "não se informa a data do fim do prazo"
        )
        raise ReviewDataError(msg)
    frm = p.status
    p.status, p.updated_at = "definitiva", now
    p.document = {
        **(p.document or {}),
        "final_at": now.isoformat(),
        "final_reason": reason,
        **({"final_period_ended_on": stated["period_ended_on"]} if stated else {}),
    }
    _audit(
        session,
        actor=agent_id,
        action="finalize",
        step_at=now.isoformat(),
        proposal_id=proposal_id,
        frm=frm,
        to="definitiva",
        reason=reason,
        **stated,
    )
    return p


def needs_period_end(p: Proposal) -> bool:
    """Tell whether finalizing ``p`` needs the stated date its period ended.

    So when the rulebook fixes no defence period: the municipality's law, outside the bundled
    text, sets it.
    """
    return not ((p.deadlines or {}).get("defence") or {}).get("days")


def _local_date(at: dt.datetime, p: Proposal) -> dt.date:
    book, _ = rule_of(p)
    return at.astimezone(ZoneInfo(UF_TIMEZONES.get(book.uf, DEFAULT_TIMEZONE))).date()


def _period_end(p: Proposal, ended: dt.date | None, now: dt.datetime) -> dt.date:
    """Check the stated end of the period: from the notification (or decision) to today."""
    if ended is None:
        msg = (
            "o regulamento não fixa o prazo de defesa nem o de recurso (estão na lei municipal, "
            "fora do texto do regulamento): informe a data em que o prazo terminou"
        )
        raise ReviewDataError(msg)
    if isinstance(ended, dt.datetime):
        ended = ended.date()
    start, what = (
        (p.decided_at, "à decisão da defesa")
        if p.status == "defesa_indeferida" and p.decided_at is not None
        else (p.notified_at, "à notificação")
    )
    if start is not None and ended < _local_date(start, p):
        msg = (
            f"a data do fim do prazo ({ended:%d/%m/%Y}) é anterior {what} "
            f"({_local_date(start, p):%d/%m/%Y})"
        )
        raise ReviewDataError(msg)
    if ended >= _local_date(now, p):  # a period ending today runs until the day's end
        msg = (
            f"a data do fim do prazo ({ended:%d/%m/%Y}) não é anterior ao dia do passo "
            f"({_local_date(now, p):%d/%m/%Y}): a decisão só é definitiva depois que o prazo "
            "termina"
        )
        raise ReviewDataError(msg)
    return ended


def archive_lapsed(session: Session, *, at: dt.datetime | None = None) -> list[str]:
    """Archive confirmed autos whose notification period ran out (e.g. PB art. 36 § 1º)."""
    now = _now(at)
    candidates = session.execute(
        select(Proposal).where(Proposal.status == "confirmada").with_for_update(skip_locked=True)
    ).scalars()
    archived = []
    for p in candidates:
        n = (p.deadlines or {}).get("notification", {})
        if n.get("due") and n.get("on_lapse") and now > dt.datetime.fromisoformat(n["due"]):
            p.status, p.updated_at = "arquivada", now
            _audit(
                session,
                actor="sistema",
                action="archive",
                proposal_id=p.proposal_id,
                frm="confirmada",
                to="arquivada",
                reason=f"notificação não entregue até {_day(n['due'])} ({n['provision']})",
            )
            archived.append(p.proposal_id)
    return archived


def deadline_warnings(
    session: Session, *, within_days: int = 5, at: dt.datetime | None = None
) -> list[dict[str, Any]]:
    """Open deadlines due within ``within_days`` (or already missed), soonest first."""
    now = _now(at)
    horizon = now + dt.timedelta(days=within_days)
    state_deadline = {"confirmada": "notification", "notificada": "defence"}
    rows = session.execute(select(Proposal).where(Proposal.status.in_(state_deadline))).scalars()
    out = []
    for p in rows:
        name = state_deadline[p.status]
        d = (p.deadlines or {}).get(name, {})
        if not d.get("due"):
            continue
        due = dt.datetime.fromisoformat(d["due"])
        if due <= horizon:
            out.append(
                {
                    "proposal_id": p.proposal_id,
                    "auto_number": p.auto_number,
                    "status": p.status,
                    "deadline": name,
                    "due": d["due"],
                    "overdue": due < now,
                    "provision": d.get("provision"),
                    "on_lapse": d.get("on_lapse"),
                }
            )
    return sorted(out, key=lambda w: w["due"])


def proposal_history(session: Session, proposal_id: str) -> list[dict[str, Any]]:
    """Return the audit entries of one proposal, oldest first."""
    rows = session.execute(
        select(AuditEntry)
        .where(AuditEntry.entity == "proposal", AuditEntry.entity_id == proposal_id)
        .order_by(AuditEntry.entry_id)
    ).scalars()
    return [
        {"at": r.at.isoformat(), "actor": r.actor, "action": r.action, **r.details} for r in rows
    ]


def as_record(p: Proposal, finding_ids: list[str] | None = None) -> dict[str, Any]:
    """Return a stored proposal in the ``proposals.json`` shape, with its review fields."""
    doc = p.document or {}
    return {
        "proposal_id": p.proposal_id,
        "finding_ids": finding_ids or [],
        "kind": p.kind,
        "vehicle_id": p.vehicle_id,
        "stand_id": doc.get("stand_id"),
        "municipality": p.municipality_code,
        "service": p.service,
        "law": doc.get("law"),
        "rule_key": p.rule_key,
        "article": p.article,
        "inciso": p.inciso,
        "paragraph": p.paragraph,
        "alinea": doc.get("alinea"),
        "provision": p.provision,
        "excerpt": p.excerpt,
        "gravity": p.gravity,
        "gravity_note": doc.get("gravity_note"),
        "penalty": p.penalty,
        "penalty_provision": doc.get("penalty_provision"),
        "measure": p.measure,
        "pontuacao": p.pontuacao,
        "fine": {"amount": float(p.fine_amount), "unit": p.fine_unit} if p.fine_amount else None,
        "fine_note": doc.get("fine_note"),
        "fine_payer": doc.get("fine_payer"),
        "suspension_days": doc.get("suspension_days"),
        "reincidence_count": p.reincidence_count,
        "reincidence_priors": doc.get("reincidence_priors", []),
        "incidence": doc.get("incidence"),
        "status": p.status,
        "deadlines": p.deadlines,
        "committed_at": p.committed_at.isoformat(),
        "committed_until": p.committed_until.isoformat(),
        "confidence": p.confidence,
        "note": doc.get("note"),
        "exception": doc.get("exception"),
        "pontuacao_choices": doc.get("pontuacao_choices", []),
        "citation_uncertain": doc.get("citation_uncertain"),
        "repetition": doc.get("repetition"),
        "auto_number": p.auto_number,
        "agent_id": p.agent_id,
        "confirmed_at": p.confirmed_at.isoformat() if p.confirmed_at else None,
        "dismissed_reason": p.dismissed_reason,
        "notified_at": p.notified_at.isoformat() if p.notified_at else None,
        "decided_at": p.decided_at.isoformat() if p.decided_at else None,
        "decision_notified_at": (
            p.decision_notified_at.isoformat() if p.decision_notified_at else None
        ),
        "final_at": doc.get("final_at"),
        "penalty_enforceable_from": enforceable_from(p),
    }


def enforceable_from(p: Proposal) -> str | None:
    """When the penalty may be enforced, or None while it may not (yet, or ever).

    A notified penalty is enforceable once its defence period ends without a defence; a
    suspensive defence (e.g. Pinto Bandeira art. 53 § 1º) holds it until the defence is
    decided, and a rejected defence releases it at the decision. Without a defence period in
    the rulebook, from the notification.
    """
    defence = (p.deadlines or {}).get("defence") or {}
    if p.status == "definitiva":
        final = (p.document or {}).get("final_at")
        if p.decided_at is not None:
            return p.decided_at.isoformat()
        return defence.get("due") or (p.notified_at.isoformat() if p.notified_at else final)
    if p.status == "defesa_indeferida" and p.decided_at is not None:
        return p.decided_at.isoformat()
    if p.status == "em_defesa" and defence.get("suspensive") is False and p.notified_at:
        return p.notified_at.isoformat()
    if p.status == "notificada" and p.notified_at is not None:
        return defence.get("due") or p.notified_at.isoformat()
    return None


def finding_ids_of(session: Session, proposal_id: str) -> list[str]:
    """Return the ids of the findings a proposal rests on."""
    return list(
        session.execute(
            select(ProposalFinding.finding_id)
            .where(ProposalFinding.proposal_id == proposal_id)
            .order_by(ProposalFinding.finding_id)
        ).scalars()
    )
