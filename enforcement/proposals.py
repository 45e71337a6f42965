"""Findings → infraction proposals, by a municipality's rulebooks (pure functions, no I/O).

A proposal is what an agent reviews: the findings it rests on, the provision they may breach
(verbatim excerpt), the gravity, the penalty and fine for this incidence, the reincidence count,
the review status and the deadlines. Definitions:

grouping
    Findings of one vehicle under one provision on one local day (the municipality's time zone)
    make one proposal: an agent writes one auto for them. ``illegal_stand_formation`` names no
    vehicle (one finding per place): each vehicle in its ``details.vehicles`` gets a proposal.
reincidence
    Confirmed infractions (``confirmed``: vehicle, rule key, committed_at) of the same provision
    (same article, paragraph, inciso and alínea) by the same vehicle, committed within the
    rulebook's window before this one. Pending, dismissed or archived proposals never count.
sanction
    The rule's own penalty on a first incidence and ``penalty_reincidence`` after one, else the
    gravity's ladder by incidence; the fine is the rule's amount, else its gravity's, charged
    from ``fine_from_incidence`` and doubled per reincidence under ``fine_progression = "double"``.
    An amount the text does not give stays null, with the rulebook's note. Suspension days apply
    only when the penalty suspends, doubled once on reincidence under
    ``suspension_progression = "double_on_reincidence"`` (fretamento art. 19 § 3º).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd

from enforcement.rulebook import Rule, Rulebook
from tracking._codes import epoch_ns

CONFIRMED_STATUSES = ("confirmada", "notificada", "em_defesa", "defesa_indeferida")
"""States of a proposal that count as a confirmed infraction for reincidence."""

CONFIRMED_COLUMNS = ("vehicle_id", "rule_key", "committed_at")


def rule_key(rulebook: Rulebook, rule: Rule) -> str:
    """Identity of a provision across runs: municipality, service and the rule's article path."""
    return f"{rulebook.municipality}:{rulebook.service}:{rule.key}"


def window_start(rulebook: Rulebook, at: pd.Timestamp) -> pd.Timestamp:
    """First instant of the reincidence window that ends at ``at``."""
    r = rulebook.reincidence
    if r.window_days is not None:
        return at - pd.Timedelta(days=r.window_days)
    return at - pd.DateOffset(months=r.window_months or 0)


def reincidence_count(
    rulebook: Rulebook, *, key: str, vehicle_id: str, at: pd.Timestamp, confirmed: pd.DataFrame
) -> int:
    """Count confirmed infractions of ``key`` by the vehicle in the window before ``at``."""
    if confirmed.empty:
        return 0
    times = pd.to_datetime(confirmed["committed_at"], utc=True)
    mask = (
        (confirmed["vehicle_id"].astype(str) == vehicle_id)
        & (confirmed["rule_key"] == key)
        & (times >= window_start(rulebook, at))
        & (times < at)
    )
    return int(mask.sum())


def sanction(rulebook: Rulebook, rule: Rule, reincidence: int) -> dict[str, Any]:
    """Penalty, fine and suspension for the ``reincidence + 1``-th incidence of a rule."""
    incidence = reincidence + 1
    grav = rulebook.gravities.get(rule.gravity or "")
    ladder = grav.penalties if grav else ()
    if reincidence and rule.penalty_reincidence:
        penalty = rule.penalty_reincidence
    elif rule.penalty and (not reincidence or not ladder):
        penalty = rule.penalty
    elif ladder:
        penalty = ladder[min(incidence, len(ladder)) - 1]
    else:
        penalty = None
    base = rule.fine or (grav.fine if grav else None)
    fine: dict[str, Any] | None = None
    fine_note = rule.fine_note or (grav.fine_note if grav else None)
    if base is not None:
        if incidence >= (grav.fine_from_incidence if grav else 1):
            factor = 2**reincidence if grav and grav.fine_progression == "double" else 1
            fine = {"amount": float(base.amount * Decimal(factor)), "unit": base.unit}
            fine_note = None
        else:
            fine_note = f"sem multa na {incidence}ª incidência ({grav.provision if grav else ''})"
    suspension = None
    if grav and grav.suspension_days and "suspens" in (penalty or "").lower():
        double = reincidence and grav.suspension_progression == "double_on_reincidence"
        suspension = grav.suspension_days * (2 if double else 1)
    return {
        "incidence": incidence,
        "penalty": penalty,
        "fine": fine,
        "fine_note": fine_note,
        "suspension_days": suspension,
    }


def deadlines(rulebook: Rulebook) -> dict[str, dict[str, Any]]:
    """Return the procedural periods; ``due`` dates are set as the review advances."""
    return {
        name: {
            "days": d.days,
            "from": d.from_,
            "provision": d.provision,
            "on_lapse": d.on_lapse,
            "suspensive": d.suspensive,
            "counting": d.counting,
            "due": None,
        }
        for name, d in rulebook.deadlines.items()
    }


def _vehicles_of(finding: Mapping[str, Any]) -> list[str]:
    if finding["vehicle_id"] is not None and not pd.isna(finding["vehicle_id"]):
        return [str(finding["vehicle_id"])]
    return [str(v) for v in (finding["details"] or {}).get("vehicles", [])]


def _records(findings: pd.DataFrame) -> list[dict[str, Any]]:
    """``findings.to_dict("records")`` without the geometry (unused here, slow to box).

    Complete tz-aware instants come as epoch nanoseconds (a Timestamp apiece took most of the
    time); :func:`_instant` reads either.
    """
    columns = [c for c in findings.columns if c != "geometry"]
    values = [_plain(findings[c]) for c in columns]
    return [dict(zip(columns, row, strict=True)) for row in zip(*values, strict=True)]


def _plain(col: pd.Series) -> list[Any]:
    if isinstance(col.dtype, pd.DatetimeTZDtype) and not col.isna().any():
        ns: list[Any] = epoch_ns(col).tolist()
        return ns
    return col.tolist()


def _instant(value: Any) -> pd.Timestamp:
    """Return an instant of :func:`_records` (epoch nanoseconds or a Timestamp) as a Timestamp."""
    return pd.Timestamp(value, tz="UTC") if isinstance(value, int) else pd.Timestamp(value)


def _local_days(findings: pd.DataFrame, timezone: str) -> list[str]:
    """ISO local date of each finding's ``started_at`` in ``timezone``."""
    started = findings["started_at"]
    if isinstance(started.dtype, pd.DatetimeTZDtype) and not started.isna().any():
        days: list[str] = started.dt.tz_convert(timezone).dt.strftime("%Y-%m-%d").tolist()
        return days
    return [pd.Timestamp(t).tz_convert(timezone).date().isoformat() for t in started]


def _service_of(fleet: pd.DataFrame | None) -> dict[str, str]:
    if fleet is None or "service" not in fleet.columns:
        return {}
    return dict(zip(fleet["vehicle_id"].astype(str), fleet["service"].fillna("taxi"), strict=True))


def _proposal_id(municipality: str, key: str, vehicle_id: str, finding_ids: Iterable[str]) -> str:
    raw = "|".join([municipality, key, vehicle_id, *sorted(finding_ids)])
    return "P-" + hashlib.sha1(raw.encode()).hexdigest()[:16]


def propose(
    findings: pd.DataFrame,
    rulebooks: Mapping[str, Rulebook],
    *,
    timezone: str,
    confirmed: pd.DataFrame | None = None,
    fleet: pd.DataFrame | None = None,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Turn findings into proposals under a municipality's rulebooks.

    Parameters
    ----------
    findings
        A findings frame (``tracking.detectors.findings``).
    rulebooks
        The municipality's rulebooks by service (:func:`enforcement.rulebook.rulebooks_for`).
    timezone
        The municipality's zone: findings of one local day are grouped.
    confirmed
        Confirmed infractions for reincidence, columns :data:`CONFIRMED_COLUMNS`.
    fleet
        Optional fleet frame; its ``service`` column (``taxi`` by default, or ``fretamento``)
        picks the rulebook of each vehicle.

    Returns
    -------
    proposals, uncovered
        The proposals (JSON-ready dicts, sorted by time then id), and the number of findings by
        ``"<kind>"`` that no rule covers (or ``"<kind>: <reason>"``), which make no proposal.
    """
    history = confirmed if confirmed is not None else pd.DataFrame(columns=list(CONFIRMED_COLUMNS))
    service_of = _service_of(fleet)
    groups: dict[tuple[str, str, str, str], list[Mapping[str, Any]]] = {}
    uncovered: dict[str, int] = {}
    rules: dict[str, tuple[Rulebook, Rule]] = {}
    for finding, day in zip(_records(findings), _local_days(findings, timezone), strict=True):
        details = finding["details"] or {}
        for vehicle_id in _vehicles_of(finding):
            service = service_of.get(vehicle_id, "taxi")
            book = rulebooks.get(service)
            rule = book.rule_for(finding["kind"], details) if book else None
            if book is None or rule is None:
                why = finding["kind"]
                if book is None:
                    why += f": sem regulamento de {service}"
                uncovered[why] = uncovered.get(why, 0) + 1
                continue
            if finding["confidence"] < rule.confidence_min:
                why = f"{finding['kind']}: confiança abaixo de {rule.confidence_min}"
                uncovered[why] = uncovered.get(why, 0) + 1
                continue
            key = rule_key(book, rule)
            rules[key] = (book, rule)
            groups.setdefault((vehicle_id, key, day, service), []).append(finding)

    proposals = []
    for (vehicle_id, key, _, _), members in groups.items():
        book, rule = rules[key]
        start = _instant(min(f["started_at"] for f in members))
        end = _instant(max(f["ended_at"] for f in members))
        count = reincidence_count(book, key=key, vehicle_id=vehicle_id, at=start, confirmed=history)
        ids = sorted(str(f["finding_id"]) for f in members)
        stand_ids = sorted({str(f["stand_id"]) for f in members if f["stand_id"] is not None})
        proposals.append(
            proposal_record(
                book,
                rule,
                proposal_id=_proposal_id(book.municipality, key, vehicle_id, ids),
                finding_ids=ids,
                vehicle_id=vehicle_id,
                stand_id=stand_ids[0] if stand_ids else None,
                started_at=start,
                ended_at=end,
                confidence=max(float(f["confidence"]) for f in members),
                reincidence=count,
            )
        )
    proposals.sort(key=lambda p: (p["committed_at"], p["proposal_id"]))
    return proposals, dict(sorted(uncovered.items()))


def proposal_record(
    book: Rulebook,
    rule: Rule,
    *,
    proposal_id: str,
    finding_ids: list[str],
    vehicle_id: str,
    stand_id: str | None,
    started_at: pd.Timestamp,
    ended_at: pd.Timestamp,
    confidence: float,
    reincidence: int,
) -> dict[str, Any]:
    """One proposal as plain data: the ``proposals.json`` record (PRODUCT.md), status proposta."""
    s = sanction(book, rule, reincidence)
    gravity_note = rule.gravity_note
    if rule.gravity is None and gravity_note is None and book.gravity_set_by_regulation:
        gravity_note = "gravidade definida em regulamento"
    return {
        "proposal_id": proposal_id,
        "finding_ids": finding_ids,
        "kind": rule.kind,
        "vehicle_id": vehicle_id,
        "stand_id": stand_id,
        "municipality": book.municipality,
        "service": book.service,
        "law": book.law,
        "rule_key": rule_key(book, rule),
        "article": rule.article,
        "inciso": rule.inciso,
        "paragraph": rule.paragraph,
        "alinea": rule.alinea,
        "provision": rule.provision,
        "excerpt": rule.excerpt,
        "gravity": rule.gravity,
        "gravity_note": gravity_note,
        "penalty": s["penalty"],
        "penalty_provision": rule.penalty_provision,
        "measure": rule.measure,
        "pontuacao": rule.pontuacao,
        "fine": s["fine"],
        "fine_note": s["fine_note"],
        "fine_payer": {"who": book.fine_payer, "provision": book.fine_payer_provision},
        "suspension_days": s["suspension_days"],
        "reincidence_count": reincidence,
        "incidence": s["incidence"],
        "status": "proposta",
        "deadlines": deadlines(book),
        "committed_at": _iso(started_at),
        "committed_until": _iso(ended_at),
        "confidence": round(confidence, 4),
        "note": rule.note,
    }


def _iso(ts: pd.Timestamp) -> str:
    return ts.tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ")


def confirmed_from_proposals(records: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """Return the confirmed infractions (for reincidence) among earlier proposal records."""
    rows = [
        {k: r[k] for k in CONFIRMED_COLUMNS}
        for r in records
        if r.get("status") in CONFIRMED_STATUSES
    ]
    return pd.DataFrame(rows, columns=list(CONFIRMED_COLUMNS))


def proposal_summary(proposals: list[dict[str, Any]], uncovered: dict[str, int]) -> dict[str, Any]:
    """Return the ``summary.json`` entries of a run's proposals."""
    by: dict[str, int] = {}
    for p in proposals:
        by[p["provision"]] = by.get(p["provision"], 0) + 1
    return {
        "proposals": len(proposals),
        "proposals_by_provision": dict(sorted(by.items())),
        "findings_without_provision": uncovered,
    }


def write_proposals_json(proposals: list[dict[str, Any]], path: Path) -> None:
    """Write ``proposals.json``: a JSON list of proposal records (PRODUCT.md).

    The text of ``json.dumps(proposals, ensure_ascii=False, indent=2)`` and a line end, written
    by orjson (ten times faster); what orjson refuses (a key that is not text, an integer beyond
    64 bits) by ``json``.
    """
    try:
        text = orjson.dumps(proposals, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
    except TypeError:  # orjson.JSONEncodeError included
        text = (json.dumps(proposals, ensure_ascii=False, indent=2) + "\n").encode()
    path.write_bytes(text)


def format_fine(amount: float, unit: str) -> str:
    """Write a fine as people read it: ``R$ 1.015,00``, ``200 UFM``."""
    if unit == "BRL":
        whole = f"{amount:,.2f}".replace(",", "_").replace(".", ",").replace("_", ".")
        return f"R$ {whole}"
    return f"{amount:g} {unit}".replace(".", ",")


def due_at(start: dt.datetime, *, days: int, counting: str, timezone: str) -> dt.datetime:
    """End of the last day of a period of ``days`` starting at ``start``, in local time.

    The start day is excluded; ``business_days`` skips weekends and Brazil's national holidays
    (and nationwide pontos facultativos: counting errs in favour of the accused), as the
    Código de Processo Civil counts procedural periods (arts. 219 and 224).
    """
    from tracking.detectors.flag2_misuse import brazil_holidays

    first = pd.Timestamp(start).tz_convert(timezone).date()
    if counting == "business_days":
        years = range(first.year, first.year + 2 + days // 200)
        holidays = np.array(brazil_holidays(years), dtype="datetime64[D]")
        last = np.busday_offset(np.datetime64(first, "D"), days, roll="forward", holidays=holidays)
        end = pd.Timestamp(last).date()
    else:
        end = first + dt.timedelta(days=days)
    local = pd.Timestamp(dt.datetime.combine(end, dt.time(23, 59, 59)), tz=timezone)
    return local.to_pydatetime()
