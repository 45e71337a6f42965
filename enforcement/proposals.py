"""Findings → infraction proposals, by a municipality's rulebooks (pure functions, no I/O).

A proposal is what an agent reviews: the findings it rests on, the provision they may breach
(verbatim excerpt), the gravity, the penalty and fine for this incidence, the reincidence count,
the review status and the deadlines. Definitions:

grouping
    Findings of one vehicle under one provision on one local day (the municipality's time zone)
    make one proposal: an agent writes one auto for them. ``illegal_stand_formation`` names no
    vehicle (one finding per place): each vehicle in its ``details.vehicles`` gets a proposal.
reincidence
    Earlier infractions (``confirmed``: vehicle, rule key, committed_at, and optionally the
    review ``status``, ``auto_number`` and ``proposal_id``) of the same provision (same article,
    paragraph, inciso and alínea) by the same vehicle, committed within the rulebook's window
    before this one, in a review state the rulebook counts (``reincidence.statuses``: every
    issued auto by default; only ``definitiva`` where the law asks for a final decision).
    Pending, dismissed or archived proposals never count. Each proposal names the earlier
    infractions it counted (``reincidence_priors``: auto number and date), so the accused can
    check the window.
confidence floor
    A finding whose confidence is below its kind's floor (the rulebook's ``confidence_floor``,
    overridable per run, and the rule's own ``confidence_min``) makes no proposal: it is listed
    for review with the reason (:func:`propose_all`).
repetition
    A rule with ``repetition`` (POA art. 58, IX for ``gps_anomaly``) proposes only findings
    that are repeated (``min_findings`` of the vehicle under the rule within ``window_hours``)
    or persistent (one lasting ``min_duration_s``); the others are listed for review.
review cases
    A finding no rule covers that falls under a rulebook's ``[[review]]`` case (POA: a
    ``gps_anomaly`` whose fixes read as two receivers under one prefix) is listed for review with
    the case's provision and reason, never proposed; other findings no rule covers are counted
    as uncovered.
meter exemption
    A rulebook's ``meter_exemption`` (Porto Velho art. 44: Táxis Aeroporto and Distritais are
    exempt from the taxímetro) lists for review, never proposes, a finding of a meter-based
    kind about a vehicle of an exempt ``service_category``. It lives here, not in the
    detectors: findings are facts about the track, whatever the law; whether the law reaches
    them is the rulebook's word, and every path (``pontual analyze``, the console's proposal
    run over the database) makes its proposals here.
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
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import orjson
import pandas as pd

from enforcement.rulebook import COUNTABLE_STATUSES, Rule, Rulebook, check_confidence_floor
from geo.calendar import brazil_holidays
from tracking.arrays import epoch_ns
from tracking.detectors.findings import FILLED_AT, LASTED_S, PROVISIONAL, WITHDRAWN

CONFIRMED_STATUSES = COUNTABLE_STATUSES
"""States of a proposal that some rulebook counts for reincidence (each counts its own subset,
``reincidence.statuses``)."""

CONFIRMED_COLUMNS = ("vehicle_id", "rule_key", "committed_at")
"""Required columns of the reincidence history; ``status``, ``auto_number`` and
``proposal_id`` are optional (without ``status``, every row counts)."""
PRIOR_COLUMNS = ("status", "auto_number", "proposal_id")


RuleRef = tuple[str, int]
"""A rule within one call: its provision's key (:func:`rule_key`) and the rule object's id."""


def rule_key(rulebook: Rulebook, rule: Rule) -> str:
    """Identity of a provision across runs: municipality, service and the rule's article path."""
    return f"{rulebook.municipality}:{rulebook.service}:{rule.key}"


def window_start(rulebook: Rulebook, at: pd.Timestamp) -> pd.Timestamp:
    """First instant of the reincidence window that ends at ``at``."""
    r = rulebook.reincidence
    if r.window_days is not None:
        return at - pd.Timedelta(days=r.window_days)
    return at - pd.DateOffset(months=r.window_months or 0)


def reincidence_priors(
    rulebook: Rulebook, *, key: str, vehicle_id: str, at: pd.Timestamp, confirmed: pd.DataFrame
) -> list[dict[str, Any]]:
    """Return the earlier infractions of ``key`` by the vehicle counted in the window to ``at``.

    Each is ``{"auto_number", "proposal_id", "committed_at", "status"}`` (None where the history
    lacks it), oldest first. Rows whose ``status`` the rulebook does not count are left out.
    """
    if confirmed.empty:
        return []
    times = pd.to_datetime(confirmed["committed_at"], utc=True)
    mask = (
        (confirmed["vehicle_id"].astype(str) == vehicle_id)
        & (confirmed["rule_key"] == key)
        & (times >= window_start(rulebook, at))
        & (times < at)
    )
    if "status" in confirmed.columns:
        mask &= confirmed["status"].isin(rulebook.reincidence.statuses)
    rows = confirmed.loc[mask].assign(_at=times[mask]).sort_values("_at", kind="stable")
    return [
        {
            "auto_number": _text_or_none(r.get("auto_number")),
            "proposal_id": _text_or_none(r.get("proposal_id")),
            "committed_at": _iso(r["_at"]),
            "status": _text_or_none(r.get("status")),
        }
        for r in rows.to_dict("records")
    ]


def _text_or_none(value: Any) -> str | None:
    return None if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)


def reincidence_count(
    rulebook: Rulebook, *, key: str, vehicle_id: str, at: pd.Timestamp, confirmed: pd.DataFrame
) -> int:
    """Count the earlier infractions of ``key`` that count (:func:`reincidence_priors`)."""
    return len(
        reincidence_priors(rulebook, key=key, vehicle_id=vehicle_id, at=at, confirmed=confirmed)
    )


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
            "holidays": list(d.holidays),
            **({"without_defence_from": d.without_defence_from} if d.without_defence_from else {}),
            "due": None,
        }
        for name, d in rulebook.deadlines.items()
    }


def deadline_due(start: dt.datetime, deadline: Mapping[str, Any], *, timezone: str) -> dt.datetime:
    """:func:`due_at` of a deadline record (:func:`deadlines`) starting at ``start``."""
    return due_at(
        start,
        days=int(deadline["days"]),
        counting=deadline.get("counting", "calendar_days"),
        timezone=timezone,
        holidays=deadline.get("holidays") or (),
    )


def accused_vehicles(finding: Mapping[str, Any]) -> list[str]:
    """Return the vehicles a finding accuses: its own, else a place's ``accused``."""
    if finding["vehicle_id"] is not None and not pd.isna(finding["vehicle_id"]):
        return [str(finding["vehicle_id"])]
    details = finding["details"] or {}
    return [str(v) for v in details.get("accused", details.get("vehicles", []))]


def _records(findings: pd.DataFrame) -> Iterator[dict[str, Any]]:
    """Yield ``findings.to_dict("records")`` without the geometry, one record at a time.

    The geometry is unused here and slow to box; the records are made as they are read (a
    run's findings are not all held twice).

    Complete tz-aware instants come as epoch nanoseconds (a Timestamp apiece took most of the
    time); :func:`_instant` reads either.
    """
    columns = [c for c in findings.columns if c != "geometry"]
    values = [_plain(findings[c]) for c in columns]
    return (dict(zip(columns, row, strict=True)) for row in zip(*values, strict=True))


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


def _category_of(fleet: pd.DataFrame | None) -> dict[str, str]:
    if fleet is None or "service_category" not in fleet.columns:
        return {}
    known = fleet.loc[fleet["service_category"].notna(), ["vehicle_id", "service_category"]]
    return dict(
        zip(known["vehicle_id"].astype(str), known["service_category"].astype(str), strict=True)
    )


def _proposal_id(municipality: str, key: str, vehicle_id: str, finding_ids: Iterable[str]) -> str:
    raw = "|".join([municipality, key, vehicle_id, *sorted(finding_ids)])
    return "P-" + hashlib.sha1(raw.encode()).hexdigest()[:16]


class Proposed(NamedTuple):
    """What :func:`propose_all` makes of a findings frame."""

    proposals: list[dict[str, Any]]
    """Proposal records (JSON-ready), sorted by time then id."""
    uncovered: dict[str, int]
    """Findings no rule covers, by ``"<kind>"`` or ``"<kind>: <reason>"``."""
    for_review: list[dict[str, Any]]
    """Findings a rule covers that are not proposed (under the confidence floor, or not repeated
    enough): ``finding_id``, ``kind``, ``vehicle_id``, ``confidence``, ``provision``, ``reason``,
    sorted by finding id then vehicle."""


def propose(
    findings: pd.DataFrame,
    rulebooks: Mapping[str, Rulebook],
    *,
    timezone: str,
    confirmed: pd.DataFrame | None = None,
    fleet: pd.DataFrame | None = None,
    confidence_floor: Mapping[str, float] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Turn findings into proposals: :func:`propose_all` without the review list."""
    done = propose_all(
        findings,
        rulebooks,
        timezone=timezone,
        confirmed=confirmed,
        fleet=fleet,
        confidence_floor=confidence_floor,
    )
    return done.proposals, done.uncovered


def proposal_details(rulebooks: Mapping[str, Rulebook]) -> frozenset[str]:
    """Return the ``details`` keys :func:`propose_all` reads under ``rulebooks``.

    Besides the rules' own: the accused (``vehicles``, ``accused``), a live finding's state,
    the limits it was judged by (``thresholds``: :func:`laxer_law`) and a place's waits
    (``stops``: :func:`_own_period`).
    """
    read = {"vehicles", "accused", "thresholds", "stops", PROVISIONAL, WITHDRAWN}
    return frozenset(read).union(*(b.detail_keys() for b in rulebooks.values()))


def propose_all(
    findings: pd.DataFrame,
    rulebooks: Mapping[str, Rulebook],
    *,
    timezone: str,
    confirmed: pd.DataFrame | None = None,
    fleet: pd.DataFrame | None = None,
    confidence_floor: Mapping[str, float] | None = None,
    context: pd.DataFrame | None = None,
    vehicles: Callable[[str], bool] | None = None,
    judged: pd.DataFrame | None = None,
) -> Proposed:
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
        Earlier infractions for reincidence, columns :data:`CONFIRMED_COLUMNS` (and optionally
        :data:`PRIOR_COLUMNS`).
    fleet
        Optional fleet frame; its ``service`` column (``taxi`` by default, or ``fretamento``)
        picks the rulebook of each vehicle, and its ``service_category`` the vehicles a
        rulebook's ``meter_exemption`` covers (their meter findings are listed for review with
        the provision, never proposed).
    confidence_floor
        Per-run floors ``{kind or "default": value}`` merged over each rulebook's
        ``confidence_floor`` (the ``[confidence_floor]`` table of ``--thresholds``).
    context
        Findings already handled (e.g. proposed earlier) that count towards a rule's
        ``repetition`` but are not proposed again.
    vehicles
        Only the vehicles it accepts (default: all). Every count and proposal is per
        (finding, vehicle), so runs over a partition of the vehicles make, together, the
        proposals, uncovered counts and review items of one run over all.
    judged
        Findings already in proposals (:data:`JUDGED_COLUMNS`: the proposal's vehicle and
        status): a finding of the same kind about the same vehicle whose period overlaps one
        of them (a sliding window's next day, the live and the batch run) rests on conduct
        already judged, whatever the agent decided: it is listed for review, never proposed
        again. Overlapping findings of one vehicle and rule in one call make one proposal.

    Returns
    -------
    Proposed
        The proposals, the findings no rule covers and the findings listed for review.
    """
    if confidence_floor:
        check_confidence_floor(confidence_floor, where="confidence_floor")
    history = confirmed if confirmed is not None else pd.DataFrame(columns=list(CONFIRMED_COLUMNS))
    service_of = _service_of(fleet)
    category_of = _category_of(fleet)
    uncovered: dict[str, int] = {}
    review: list[dict[str, Any]] = []
    # Each rule by its provision's key and its identity: two kinds may share a provision (art.
    # 58 IX: tracking gaps and GPS jumps) under rules of their own (repetition, labels).
    rules: dict[RuleRef, tuple[Rulebook, Rule]] = {}
    candidates: list[tuple[str, RuleRef, str, str, Mapping[str, Any]]] = []
    earlier = judged_periods(judged)
    for finding, day in zip(_records(findings), _local_days(findings, timezone), strict=True):
        details = finding["details"] or {}
        for vehicle_id in accused_vehicles(finding):
            if vehicles is not None and not vehicles(vehicle_id):
                continue
            service = service_of.get(vehicle_id, "taxi")
            book = rulebooks.get(service)
            rule = book.rule_for(finding["kind"], details) if book else None
            case = book.review_for(finding["kind"], details) if book and not rule else None
            covered = rule if rule is not None else case
            if covered is not None and (why := _unsettled(details)) is not None:
                review.append(_review_item(finding, vehicle_id, covered.provision, why))
                continue
            if case is not None:
                review.append(_review_item(finding, vehicle_id, case.provision, case.reason))
                continue
            if book is None or rule is None:
                why = finding["kind"]
                if book is None:
                    why += f": sem regulamento de {service}"
                uncovered[why] = uncovered.get(why, 0) + 1
                continue
            if (why := judged_before(earlier, judged, rule, finding, vehicle_id)) is not None:
                review.append(_review_item(finding, vehicle_id, rule.provision, why))
                continue
            exemption = book.meter_exemption
            category = category_of.get(vehicle_id)
            if exemption is not None and exemption.exempts(finding["kind"], category):
                why = f"isento do taxímetro: {exemption.provision} (categoria {category})"
                review.append(_review_item(finding, vehicle_id, rule.provision, why))
                continue
            if (why := laxer_law(book, finding["kind"], details)) is not None:
                review.append(_review_item(finding, vehicle_id, rule.provision, why))
                continue
            floor = max(book.floor_for(finding["kind"], confidence_floor), rule.confidence_min)
            if float(finding["confidence"]) < floor:
                confidence = f"{float(finding['confidence']):.2f}".replace(".", ",")
                least = f"{floor:g}".replace(".", ",")
                why = f"confiança {confidence} abaixo do piso {least}"  # pt-BR decimal comma
                review.append(_review_item(finding, vehicle_id, rule.provision, why))
                continue
            ref = (rule_key(book, rule), id(rule))
            rules[ref] = (book, rule)
            omission = rule.omission(details)  # one omission: one proposal over its days
            conduct = day if omission is None else f"{rule.one_omission_per}={omission}"
            candidates.append((vehicle_id, ref, conduct, service, finding))

    repeated = _repetition_verdicts(candidates, rules, context)
    groups: dict[tuple[str, RuleRef, str, str], list[Mapping[str, Any]]] = {}
    evidence: dict[tuple[str, RuleRef, str, str], list[dict[str, Any]]] = {}
    for vehicle_id, ref, day, service, member in candidates:
        verdict = repeated.get((vehicle_id, ref, str(member["finding_id"])))
        if verdict is not None and not verdict["met"]:
            review.append(
                _review_item(member, vehicle_id, rules[ref][1].provision, verdict["reason"])
            )
            continue
        groups.setdefault((vehicle_id, ref, day, service), []).append(member)
        if verdict is not None:
            evidence.setdefault((vehicle_id, ref, day, service), []).append(verdict)

    _merge_overlapping(groups, evidence)
    proposals = []
    for group, members in groups.items():
        vehicle_id, ref = group[0], group[1]
        key = ref[0]
        book, rule = rules[ref]
        own = [_own_period(f, vehicle_id) for f in members]
        start = _instant(min(a for a, _ in own))
        end = _instant(max(b for _, b in own))
        priors = reincidence_priors(
            book, key=key, vehicle_id=vehicle_id, at=start, confirmed=history
        )
        ids = sorted(str(f["finding_id"]) for f in members)
        # a finding without a stand: None, or NaN from a table read back (never "nan")
        stand_ids = sorted({s for f in members if (s := _text_or_none(f["stand_id"])) is not None})
        record = proposal_record(
            book,
            rule,
            proposal_id=_proposal_id(book.municipality, key, vehicle_id, ids),
            finding_ids=ids,
            vehicle_id=vehicle_id,
            stand_id=stand_ids[0] if stand_ids else None,
            started_at=start,
            ended_at=end,
            confidence=max(float(f["confidence"]) for f in members),
            reincidence=len(priors),
            priors=priors,
        )
        if group in evidence:
            record["repetition"] = _repetition_summary(rule, evidence[group])
        proposals.append(record)
    proposals.sort(key=lambda p: (p["committed_at"], p["proposal_id"]))
    review.sort(key=lambda r: (r["finding_id"], r["vehicle_id"] or ""))
    return Proposed(proposals, dict(sorted(uncovered.items())), review)


def _unsettled(details: Mapping[str, Any]) -> str | None:
    """Say (pt-BR) why a live finding not settled by its closed day accuses no one, else None."""
    if details.get(PROVISIONAL) is True:
        return (
            "achado provisório: anunciado antes do fim do dia; o primeiro sinal do veículo num "
            "dia seguinte, ou a análise das posições gravadas, o encerra"
        )
    if details.get(WITHDRAWN) is True and details.get(FILLED_AT):
        return (
            "achado retirado: posições desse intervalo chegaram depois (o rastreador enviou o "
            "que guardou sem rede), e o silêncio não houve"
        )
    if details.get(WITHDRAWN) is True:
        return "achado retirado: o dia encerrado não o confirmou (o cadastro mudou nesse dia)"
    return None


def laxer_law(book: Rulebook, kind: str, details: Mapping[str, Any]) -> str | None:
    """Say (pt-BR) where a finding was judged by a limit stricter than its law's, else None.

    Every number a rulebook's law fixes for a detector (:meth:`Rulebook.thresholds`: days of
    grace or of inactivity, a vehicle's or an inspection's age, auxiliares) is a ceiling: a
    smaller one in the finding's ``thresholds`` (a run's own choice) accuses where the law does
    not, so the finding is listed for review, never proposed under that law.
    """
    used = details.get("thresholds") or {}
    for name, law in book.law_limits.get(kind, {}).items():
        value = used.get(name)
        if _is_number(law) and _is_number(value) and value < law:
            where = book.threshold_provision(kind)
            law_says = f"{where}: {law:g}; na análise: {value:g}"
            return f"analisado com um limite abaixo do que a lei fixa ({law_says})"
    return None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _own_period(finding: Mapping[str, Any], vehicle_id: str) -> tuple[int, int]:
    """Return the period (UTC ns) of ``finding`` about ``vehicle_id``.

    A place's finding (``details.stops``, several vehicles' waits) is, about one vehicle, the
    span of its own waits, never another vehicle's arrival or departure; any other finding's is
    its own.
    """
    stops = (finding["details"] or {}).get("stops")
    if isinstance(stops, list):
        mine = [
            (_instant(w["started_at"]).value, _instant(w["ended_at"]).value)
            for w in stops
            if isinstance(w, Mapping)
            and str(w.get("vehicle_id")) == vehicle_id
            and w.get("started_at")
            and w.get("ended_at")
        ]
        if mine:
            return min(a for a, _ in mine), max(b for _, b in mine)
    return _instant(finding["started_at"]).value, _instant(finding["ended_at"]).value


JUDGED_COLUMNS = (
    "kind",
    "vehicle_id",
    "started_at",
    "ended_at",
    "finding_id",
    "proposal_id",
    "status",
    "details",
)
"""Columns of :func:`propose_all`'s ``judged``: a finding in a proposal about ``vehicle_id``
(``details`` optional: a rule's omission, :attr:`Rule.one_omission_per`, is read from it)."""

_Period = tuple[int, int, str, str, str]


def judged_periods(judged: pd.DataFrame | None) -> dict[tuple[str, str], list[_Period]]:
    """Index ``judged`` by (kind, vehicle): ``(start ns, end ns, finding, proposal, status)``.

    For :func:`judged_before`.
    """
    out: dict[tuple[str, str], list[_Period]] = {}
    if judged is None or judged.empty:
        return out
    for r in judged.itertuples(index=False):
        start, end = _instant(r.started_at).value, _instant(r.ended_at).value
        out.setdefault((str(r.kind), str(r.vehicle_id)), []).append(
            (start, end, str(r.finding_id), str(r.proposal_id), str(r.status))
        )
    return out


def judged_before(
    periods: Mapping[tuple[str, str], list[_Period]],
    judged: pd.DataFrame | None,
    rule: Rule,
    finding: Mapping[str, Any],
    vehicle: str,
) -> str | None:
    """Say (pt-BR) why ``finding`` about ``vehicle`` was judged already, else None.

    Its period overlaps a finding of another proposal about the vehicle (one conduct, one
    proposal), or the omission it shows is one already in a proposal (``periods``:
    :func:`judged_periods` of ``judged``).
    """
    if (seen := _overlapped(periods, finding, vehicle)) is not None:
        return (
            f"período já julgado: sobrepõe-se ao achado {seen[0]}, da proposta {seen[1]} "
            f"({seen[2]})"
        )
    if (seen := _omission_judged(judged, rule, finding, vehicle)) is not None:
        return (
            f"omissão já julgada ({rule.one_omission_per} "
            f"{rule.omission(finding['details'] or {})}): achado {seen[0]}, da proposta "
            f"{seen[1]} ({seen[2]}); cada dia de serviço a mostra de novo, e é uma infração só"
        )
    return None


def _omission_judged(
    judged: pd.DataFrame | None, rule: Rule, finding: Mapping[str, Any], vehicle: str
) -> tuple[str, str, str] | None:
    """Return the judged finding (id, proposal, status) of the omission ``finding`` shows."""
    omission = rule.omission(finding["details"] or {})
    if omission is None or judged is None or judged.empty or "details" not in judged:
        return None
    mine = judged[(judged["kind"] == finding["kind"]) & (judged["vehicle_id"] == vehicle)]
    for r in mine.itertuples(index=False):
        if rule.omission(r.details or {}) == omission and r.finding_id != finding["finding_id"]:
            return str(r.finding_id), str(r.proposal_id), str(r.status)
    return None


def _overlapped(
    earlier: Mapping[tuple[str, str], list[_Period]], finding: Mapping[str, Any], vehicle: str
) -> tuple[str, str, str] | None:
    """Return the judged finding (id, proposal, status) whose period ``finding``'s overlaps."""
    periods = earlier.get((str(finding["kind"]), vehicle))
    if not periods:
        return None
    start, end = _own_period(finding, vehicle)
    for lo, hi, fid, pid, status in periods:
        if start <= hi and end >= lo and fid != str(finding["finding_id"]):
            return fid, pid, status
    return None


def _merge_overlapping(
    groups: dict[tuple[str, RuleRef, str, str], list[Mapping[str, Any]]],
    evidence: dict[tuple[str, RuleRef, str, str], list[dict[str, Any]]],
) -> None:
    """Join the groups of one vehicle and rule whose periods overlap (in place).

    One conduct, one proposal, under the earliest group's day.
    """
    spans = {}
    for g, members in groups.items():
        own = [_own_period(f, g[0]) for f in members]
        spans[g] = (min(a for a, _ in own), max(b for _, b in own))
    order = sorted(groups, key=lambda g: (g[0], g[1][0], g[3], spans[g][0], g[2]))
    keep: tuple[str, RuleRef, str, str] | None = None
    reach = 0
    for g in order:
        same = keep is not None and (g[0], g[1], g[3]) == (keep[0], keep[1], keep[3])
        if keep is not None and same and spans[g][0] <= reach:
            groups[keep].extend(groups.pop(g))
            if g in evidence:
                evidence.setdefault(keep, []).extend(evidence.pop(g))
            reach = max(reach, spans[g][1])
        else:
            keep, reach = g, spans[g][1]


def _review_item(
    finding: Mapping[str, Any], vehicle_id: str, provision: str, reason: str
) -> dict[str, Any]:
    return {
        "finding_id": str(finding["finding_id"]),
        "kind": finding["kind"],
        "vehicle_id": vehicle_id,
        "confidence": round(float(finding["confidence"]), 4),
        "provision": provision,
        "reason": reason,
    }


def _repetition_verdicts(
    candidates: list[tuple[str, RuleRef, str, str, Mapping[str, Any]]],
    rules: Mapping[RuleRef, tuple[Rulebook, Rule]],
    context: pd.DataFrame | None,
) -> dict[tuple[str, RuleRef, str], dict[str, Any]]:
    """Whether each candidate under a rule with ``repetition`` is repeated or persistent.

    Keyed by ``(vehicle_id, rule, finding_id)``: ``met``, ``reason``, ``in_window`` (most
    findings of the rule's kind in a ``window_hours`` window holding this one) and
    ``duration_s``.
    """
    series: dict[tuple[str, RuleRef], list[tuple[int, float, str, bool]]] = {}
    for vehicle_id, ref, _, _, f in candidates:
        if rules[ref][1].repetition is not None:
            series.setdefault((vehicle_id, ref), []).append(
                (_ns(f["started_at"]), _lasted_s(f), str(f["finding_id"]), True)
            )
    if not series:
        return {}
    if context is not None and not context.empty:
        seen = {fid for items in series.values() for _, _, fid, _ in items}
        for f in _records(context):
            if str(f["finding_id"]) in seen:
                continue
            for vehicle_id in accused_vehicles(f):
                for (vid, ref), items in series.items():
                    _, rule = rules[ref]
                    if vid == vehicle_id and rule.matches(f["kind"], f["details"] or {}):
                        items.append((_ns(f["started_at"]), _lasted_s(f), "", False))
    out: dict[tuple[str, RuleRef, str], dict[str, Any]] = {}
    for (vehicle_id, ref), items in series.items():
        rep = rules[ref][1].repetition
        assert rep is not None
        items.sort()
        starts = np.array([i[0] for i in items], dtype=np.int64)
        window_ns = int(rep.window_hours * 3600 * 1e9)
        last = np.searchsorted(starts, starts + window_ns, side="right") - 1
        sizes = last - np.arange(len(items)) + 1
        # most findings in a window [start_i, start_i + W] that holds finding k
        best = np.zeros(len(items), dtype=np.int64)
        for i, (j, n) in enumerate(zip(last.tolist(), sizes.tolist(), strict=True)):
            best[i : j + 1] = np.maximum(best[i : j + 1], n)
        for k, (_, duration_s, fid, own) in enumerate(items):
            if not own:
                continue
            long_enough = rep.min_duration_s is not None and duration_s >= rep.min_duration_s
            met = bool(best[k] >= rep.min_findings or long_enough)
            reason = (
                f"não repetido nem persistente ({rep.provision}): "
                f"{findings_count(int(best[k]))} do veículo em {rep.window_hours:g} h "
                f"(mínimo {rep.min_findings})"
            )
            if rep.min_duration_s is not None:
                reason += f" e duração de {duration_s:.0f} s (mínimo {rep.min_duration_s:g} s)"
            out[(vehicle_id, ref, fid)] = {
                "met": met,
                "reason": reason,
                "in_window": int(best[k]),
                "duration_s": round(duration_s, 1),
            }
    return out


def _repetition_summary(rule: Rule, verdicts: list[dict[str, Any]]) -> dict[str, Any]:
    rep = rule.repetition
    assert rep is not None
    return {
        "provision": rep.provision,
        "min_findings": rep.min_findings,
        "window_hours": rep.window_hours,
        "min_duration_s": rep.min_duration_s,
        "most_findings_in_window": max(v["in_window"] for v in verdicts),
        "longest_s": max(v["duration_s"] for v in verdicts),
    }


def _lasted_s(finding: Mapping[str, Any]) -> float:
    """How long a finding lasted: ``details.lasted_s`` where given, else its span."""
    lasted = (finding.get("details") or {}).get(LASTED_S)
    if lasted is not None:
        return float(lasted)
    return (_ns(finding["ended_at"]) - _ns(finding["started_at"])) / 1e9


def _ns(value: Any) -> int:
    return value if isinstance(value, int) else int(pd.Timestamp(value).as_unit("ns").value)


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
    priors: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One proposal as plain data: the ``proposals.json`` record (PRODUCT.md), status proposta.

    Beyond the contract's fields: ``reincidence_priors`` (the earlier infractions counted),
    ``exception`` (the provision's own exception, whose ``answer`` the agent gives on
    confirming), ``pontuacao_choices`` (where the agent chooses the pontuação) and
    ``citation_uncertain`` (why the citation must be checked in the official text).
    """
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
        "reincidence_priors": list(priors or []),
        "incidence": s["incidence"],
        "status": "proposta",
        "deadlines": deadlines(book),
        "committed_at": _iso(started_at),
        "committed_until": _iso(ended_at),
        "confidence": round(confidence, 4),
        "note": rule.note,
        "exception": None
        if rule.exception is None
        else {
            "provision": rule.exception.provision,
            "excerpt": rule.exception.excerpt,
            "question": rule.exception.question,
            "answer": None,
        },
        "pontuacao_choices": list(rule.pontuacao_choices),
        "citation_uncertain": rule.citation_uncertain,
    }


def _iso(ts: pd.Timestamp) -> str:
    """Return the instant in UTC to the second (truncated): ``2024-03-04T09:00:00Z``."""
    if ts.tzinfo is None:  # raises, as tz_convert does for a naive instant
        return str(ts.tz_convert("UTC"))
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts.value // 1_000_000_000))


def confirmed_from_proposals(records: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """Return the infractions that may count for reincidence among earlier proposal records.

    Keeps each record's ``status``, ``auto_number`` and ``proposal_id``: each rulebook counts
    only its own states (``reincidence.statuses``).
    """
    columns = [*CONFIRMED_COLUMNS, *PRIOR_COLUMNS]
    rows = [
        {k: r.get(k) for k in columns} for r in records if r.get("status") in CONFIRMED_STATUSES
    ]
    for r in rows:
        if any(r[k] is None for k in CONFIRMED_COLUMNS):
            missing = [k for k in CONFIRMED_COLUMNS if r[k] is None]
            msg = f"proposta sem {', '.join(missing)}: {r.get('proposal_id') or r}"
            raise KeyError(msg)
    return pd.DataFrame(rows, columns=columns)


def proposal_counts(
    proposals: list[dict[str, Any]],
    uncovered: dict[str, int],
    for_review: list[dict[str, Any]],
) -> dict[str, dict[str, int]]:
    """Return the counts :func:`proposal_summary` reports, summable across vehicle groups.

    ``{"proposals": {provision: n}, "uncovered": {why: n}, "for_review": {kind: n}}``
    (:func:`summed_counts` adds them; :func:`summary_of_counts` makes the entries).
    """
    by: dict[str, int] = {}
    for p in proposals:
        by[p["provision"]] = by.get(p["provision"], 0) + 1
    by_kind: dict[str, int] = {}
    for r in for_review:
        by_kind[r["kind"]] = by_kind.get(r["kind"], 0) + 1
    return {"proposals": by, "uncovered": dict(uncovered), "for_review": by_kind}


def summed_counts(counts: Iterable[Mapping[str, Mapping[str, int]]]) -> dict[str, dict[str, int]]:
    """Add :func:`proposal_counts` of disjoint vehicle groups."""
    total: dict[str, dict[str, int]] = {"proposals": {}, "uncovered": {}, "for_review": {}}
    for c in counts:
        for name, by in c.items():
            for k, n in by.items():
                total[name][k] = total[name].get(k, 0) + int(n)
    return total


def summary_of_counts(
    counts: Mapping[str, Mapping[str, int]], for_review: list[dict[str, Any]]
) -> dict[str, Any]:
    """Return the ``summary.json`` entries of :func:`proposal_counts` (:func:`proposal_summary`).

    ``for_review`` is the list written (a placeholder where it is merged from parts).
    """
    return {
        "proposals": sum(counts["proposals"].values()),
        "proposals_by_provision": dict(sorted(counts["proposals"].items())),
        "findings_without_provision": dict(sorted(counts["uncovered"].items())),
        "findings_for_review": {
            "count": sum(counts["for_review"].values()),
            "by_kind": dict(sorted(counts["for_review"].items())),
            "findings": for_review,
        },
    }


def proposal_summary(
    proposals: list[dict[str, Any]],
    uncovered: dict[str, int],
    for_review: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Return the ``summary.json`` entries of a run's proposals.

    ``findings_for_review`` counts the findings a rule covers that make no proposal (under
    the confidence floor, or not repeated enough), by kind, and lists them with the reason.
    """
    review = for_review or []
    return summary_of_counts(proposal_counts(proposals, uncovered, review), review)


PROPOSAL_ORDER = ("committed_at", "proposal_id")
"""The order of ``proposals.json`` (:func:`propose_all`)."""


def proposal_texts(proposals: Iterable[dict[str, Any]]) -> Iterator[bytes]:
    """Yield each proposal's text as an item of ``proposals.json`` (indented one level).

    The text of the record in ``json.dumps(proposals, ensure_ascii=False, indent=2)``, made by
    orjson (ten times faster; its two-space indentation nests as ``json``'s does); a record
    orjson refuses (a key that is not text, an integer beyond 64 bits) by ``json``.
    """
    for record in proposals:
        try:
            text = orjson.dumps(record, option=orjson.OPT_INDENT_2)
        except TypeError:  # orjson.JSONEncodeError included
            text = json.dumps(record, ensure_ascii=False, indent=2).encode()
        # a JSON text has no raw line break inside a string: each line is a line of layout
        yield b"  " + text.replace(b"\n", b"\n  ")


def write_proposal_texts(texts: Iterable[bytes], path: Path) -> None:
    """Write ``proposals.json`` from :func:`proposal_texts` (in :data:`PROPOSAL_ORDER`)."""
    with path.open("wb") as fh:
        first = True
        for text in texts:
            fh.write(b"[\n" if first else b",\n")
            fh.write(text)
            first = False
        fh.write(b"[]\n" if first else b"\n]\n")


def write_proposals_json(proposals: list[dict[str, Any]], path: Path) -> None:
    """Write ``proposals.json``: a JSON list of proposal records (PRODUCT.md).

    The text of ``json.dumps(proposals, ensure_ascii=False, indent=2)`` and a line end,
    record by record (:func:`proposal_texts`): the Dask engine's parts merge into the same
    bytes (:func:`write_proposal_texts`).
    """
    write_proposal_texts(proposal_texts(proposals), path)


def findings_count(n: int) -> str:
    """Say ``n`` findings in pt-BR: "1 achado", "3 achados"."""
    return f"{n} achado" if n == 1 else f"{n} achados"


def format_fine(amount: float, unit: str) -> str:
    """Write a fine as people read it: ``R$ 1.015,00``, ``200 UFM``."""
    if unit == "BRL":
        whole = f"{amount:,.2f}".replace(",", "_").replace(".", ",").replace("_", ".")
        return f"R$ {whole}"
    return f"{amount:g} {unit}".replace(".", ",")


def due_at(
    start: dt.datetime,
    *,
    days: int,
    counting: str,
    timezone: str,
    holidays: Iterable[str] = (),
) -> dt.datetime:
    """End of the last day of a period of ``days`` starting at ``start``, in local time.

    The start day is excluded; ``business_days`` skips weekends, Brazil's national holidays
    (and nationwide pontos facultativos: counting errs in favour of the accused) and the
    ``holidays`` given (``MM-DD``: the state's and the municipality's), as the Código de
    Processo Civil counts procedural periods (arts. 219 and 224).
    """
    first = pd.Timestamp(start).tz_convert(timezone).date()
    if counting == "business_days":
        years = range(first.year, first.year + 2 + days // 200)
        regional = [dt.date.fromisoformat(f"{y}-{day}") for y in years for day in holidays]
        closed = np.array(sorted({*brazil_holidays(years), *regional}), dtype="datetime64[D]")
        last = np.busday_offset(np.datetime64(first, "D"), days, roll="forward", holidays=closed)
        end = pd.Timestamp(last).date()
    else:
        end = first + dt.timedelta(days=days)
    local = pd.Timestamp(dt.datetime.combine(end, dt.time(23, 59, 59)), tz=timezone)
    return local.to_pydatetime()
