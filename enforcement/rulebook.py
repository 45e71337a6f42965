"""Rulebooks: each municipality's law as data (``enforcement/rulebooks/<IBGE>-<service>.toml``).

A rulebook maps finding kinds (with sub-cases read from the finding's ``details``) to the
provision of the law that a finding may breach: article, inciso, the verbatim excerpt, gravity,
penalties, measure, pontuação and fine, plus the reincidence window and the procedural deadlines.
Amounts the text does not give are absent (null), with a note saying why; nothing is invented.
The texts quoted live in ``enforcement/laws/``; a test proves every excerpt occurs in its text.
An optional ``[planning]`` table holds the planning rules (fleet per inhabitants, accessible
share, vehicle age, inspection bands) that ``pontual plan`` applies. An optional
``[detector_thresholds.<kind>]`` table holds the limits the law itself fixes for a detector
(e.g. Pinto Bandeira's 5-year vehicle age, art. 10), with ``provision`` and ``note``:
``pontual analyze --municipality`` and the live engine run the detector with them.
"""

from __future__ import annotations

import datetime as dt
import re
import tomllib
from collections.abc import Mapping
from decimal import Decimal
from functools import cache, cached_property
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from enforcement._errors import RulebookError, UnknownMunicipalityError
from fleet.vocabulary import SERVICE_CATEGORIES
from tracking.detectors.findings import KINDS

RULEBOOK_DIR = Path(__file__).parent / "rulebooks"
LAW_DIR = Path(__file__).parent / "laws"
SERVICES = ("taxi", "fretamento")
GRAVITIES = ("leve", "média", "grave", "gravíssima", "absolutamente incompatível")
CountableStatus = Literal[
    "confirmada", "notificada", "em_defesa", "defesa_indeferida", "definitiva"
]
COUNTABLE_STATUSES: tuple[str, ...] = get_args(CountableStatus)
"""Review states a rulebook may count for reincidence (``db.enforcement.models.STATUSES``)."""
Pontuacao = Literal["condutor", "autorizatário", "condutor e autorizatário"]
DEFAULT_REINCIDENCE_STATUSES = COUNTABLE_STATUSES
"""Counted when the law does not restrict reincidence to final decisions: every auto issued
and not fallen (dismissed, archived or defence accepted never count)."""
PONTUACOES: tuple[str, ...] = get_args(Pontuacao)
"""Who bears the non-pecuniary penalties (Porto Alegre art. 55)."""
DEFAULT_CONFIDENCE_FLOOR = 0.5
"""Findings whose confidence is below this are listed for review but never proposed.

Every detector's confidence is 0.5 or more once its thresholds are met and falls below 0.5 only
when a doubt lowers it (e.g. a vehicle never seen in the feed, a pickup without a meter switch,
a speed-flagged fix): a finding its own detector rates no likelier true than false accuses no one
until a person has looked at it.
"""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Fine(_Frozen):
    """A fine as the text states it."""

    amount: Decimal = Field(gt=0)
    unit: Literal["UFM", "BRL", "UPF"]


class Reincidence(_Frozen):
    """How far back earlier infractions of the same provision count, and which of them.

    ``statuses`` are the review states of an earlier proposal that make it count: by default
    every auto issued and not fallen (:data:`DEFAULT_REINCIDENCE_STATUSES`); ``["definitiva"]``
    where the law counts only infractions with a final decision (``basis = "final_decision"``,
    e.g. Porto Alegre's fretamento decree, art. 19, § 5º), quoted in ``statuses_excerpt``, or
    where a law silent on it is read in the accused's favour (a ``note`` says so).
    """

    window_days: int | None = Field(default=None, gt=0)
    window_months: int | None = Field(default=None, gt=0)
    basis: Literal["confirmed", "final_decision"] = "confirmed"
    statuses: tuple[CountableStatus, ...] = get_args(CountableStatus)
    statuses_excerpt: str | None = None
    provision: str | None = None
    excerpt: str | None = None
    note: str | None = None

    @model_validator(mode="after")
    def _one_window(self) -> Reincidence:
        if (self.window_days is None) == (self.window_months is None):
            msg = "reincidence: give exactly one of window_days, window_months"
            raise ValueError(msg)
        if not self.statuses:
            msg = "reincidence.statuses: give at least one review state"
            raise ValueError(msg)
        if self.basis == "final_decision" and set(self.statuses) != {"definitiva"}:
            msg = "reincidence: basis 'final_decision' counts only statuses = ['definitiva']"
            raise ValueError(msg)
        if self.basis == "final_decision" and not (self.statuses_excerpt or self.note):
            msg = (
                "reincidence: basis 'final_decision' needs statuses_excerpt (the law's words) "
                "or, where the law is silent, a note saying why"
            )
            raise ValueError(msg)
        return self


class Deadline(_Frozen):
    """A procedural period (notification, defence, appeal, payment)."""

    days: int = Field(gt=0)
    from_: str = Field(alias="from")
    provision: str
    excerpt: str | None = None
    on_lapse: str | None = None
    suspensive: bool | None = None
    counting: Literal["calendar_days", "business_days"] = "calendar_days"
    holidays: tuple[str, ...] = ()
    """State and municipal holidays (``MM-DD``) a business-day count skips beside the national
    ones: a period never ends on a day the office is closed."""
    without_defence_from: Literal["defence_end"] | None = None
    """Where no defence was filed, the period counts from the end of the defence period (POA
    fretamento art. 33: "caso não apresentada, do término do prazo desta"). Without it, a period
    counted from the decision's delivery waits for the delivery of the penalty imposed without
    a defence (Porto Velho art. 32)."""
    note: str | None = None

    @model_validator(mode="after")
    def _holidays_are_days(self) -> Deadline:
        for day in self.holidays:
            try:
                dt.date.fromisoformat(f"2024-{day}")
            except ValueError:
                msg = f"deadline holidays: {day!r} is not a day MM-DD"
                raise ValueError(msg) from None
        return self


class Gravity(_Frozen):
    """Penalty of one gravity: fine, its progression, and the penalty ladder by incidence."""

    provision: str | None = None
    excerpt: str | None = None
    fine: Fine | None = None
    fine_note: str | None = None
    fine_from_incidence: int = Field(default=1, ge=1)
    fine_progression: Literal["fixed", "double"] = "fixed"
    penalties: tuple[str, ...] = ()
    suspension_days: int | None = Field(default=None, gt=0)
    suspension_progression: Literal["fixed", "double_on_reincidence"] = "fixed"
    note: str | None = None


class RuleException(_Frozen):
    """An exception the provision itself states ("salvo …"), answered by the agent on confirming.

    A proposal under a rule with an exception cannot be confirmed without the agent's answer
    (why the exception does not apply); the auto prints the question and the answer.
    """

    provision: str
    excerpt: str
    question: str
    note: str | None = None


class Repetition(_Frozen):
    """Findings that accuse only when repeated or persistent (e.g. POA art. 58, IX).

    A finding under the rule makes a proposal only if the vehicle has at least ``min_findings``
    findings of the rule within ``window_hours`` (a window holding this one), or if this one
    alone lasts ``min_duration_s`` or more (its ``details.lasted_s`` where the detector gives
    it, else from ``started_at`` to ``ended_at``). Otherwise it is listed for review, never
    proposed.
    """

    min_findings: int = Field(ge=2)
    window_hours: float = Field(gt=0)
    min_duration_s: float | None = Field(default=None, gt=0)
    provision: str
    note: str


class _Case(_Frozen):
    """A finding kind, or one of its sub-cases read from the finding's ``details``."""

    kind: str
    when: dict[str, bool | str | tuple[str, ...]] = Field(default_factory=dict)
    """Details the finding must carry: a value, one of several, or a flag (``accessible =
    true`` matches only ``details.accessible`` True; an absent key never matches). A list in
    the details matches when one of its entries (a mapping: its ``reason``) does: ``reasons =
    "inspection_overdue"`` holds whatever the finding's main reason."""

    @model_validator(mode="after")
    def _known_kind(self) -> _Case:
        if self.kind not in KINDS:
            msg = f"kind '{self.kind}' is not a finding kind; expected one of {', '.join(KINDS)}"
            raise ValueError(msg)
        return self

    @property
    def case(self) -> str:
        """The ``when`` conditions as text: ``reason=revoked|suspended, accessible=true``."""
        return ", ".join(f"{k}={_when_text(v)}" for k, v in self.when.items())

    def matches(self, kind: str, details: Mapping[str, Any]) -> bool:
        """Whether a finding of ``kind`` with ``details`` falls under this case."""
        if kind != self.kind:
            return False
        for name, wanted in self.when.items():
            value = details.get(name)
            if isinstance(wanted, bool):
                if value is not wanted:
                    return False
                continue
            allowed = (wanted,) if isinstance(wanted, str) else wanted
            if isinstance(value, list):
                said = [str(v.get("reason") if isinstance(v, Mapping) else v) for v in value]
                if not set(said) & set(allowed):
                    return False
                continue
            if value is None or str(value) not in allowed:
                return False
        return True


class ReviewCase(_Case):
    """A sub-case no rule covers that an agent must still see: listed for review, never proposed.

    ``provision`` is what the agent weighs (e.g. the article that only an inspection's proof
    could apply), ``reason`` why the finding alone accuses no one (pt-BR).
    """

    provision: str
    reason: str


class Rule(_Case):
    """One provision a finding kind (or one of its sub-cases) may breach."""

    article: str
    inciso: str | None = None
    paragraph: str | None = None
    alinea: str | None = None
    provision: str
    excerpt: str
    gravity: str | None = None
    gravity_note: str | None = None
    penalty: str | None = None
    penalty_reincidence: str | None = None
    penalty_provision: str | None = None
    measure: str | None = None
    measure_provision: str | None = None
    pontuacao: str | None = None
    pontuacao_note: str | None = None
    pontuacao_choices: tuple[Pontuacao, ...] = ()
    """Where the text leaves the pontuação to the case (POA art. 57, XI, c): the agent chooses
    one of these on confirming, and the auto prints the choice."""
    fine: Fine | None = None
    fine_note: str | None = None
    confidence_min: float = Field(default=0.0, ge=0, le=1)
    exception: RuleException | None = None
    repetition: Repetition | None = None
    citation_uncertain: str | None = None
    """Why the citation (e.g. the inciso's number) must be checked in the official text; shown
    on proposals and documents until it is."""
    one_omission_per: str | None = None
    """For a provision against an omission ("deixar de realizar vistoria"), which every later
    day of service shows again: the ``details`` key (top level, or in the entry of
    ``details.reasons`` that carries it) whose value names the one omission
    (``last_inspection_on``). A vehicle's findings of one value make one proposal; one of a
    value already in a proposal is listed for review, never proposed again."""
    note: str | None = None

    @model_validator(mode="after")
    def _known(self) -> Rule:
        if self.gravity is not None and self.gravity not in GRAVITIES:
            msg = f"gravity '{self.gravity}'; expected one of {', '.join(GRAVITIES)}"
            raise ValueError(msg)
        if self.pontuacao is not None and self.pontuacao_choices:
            msg = f"rule {self.provision}: give pontuacao or pontuacao_choices, not both"
            raise ValueError(msg)
        if len(self.pontuacao_choices) == 1:
            msg = f"rule {self.provision}: one pontuação is no choice; use pontuacao"
            raise ValueError(msg)
        return self

    @cached_property
    def key(self) -> str:
        """Identity of the provision, for reincidence: article, paragraph, inciso, alínea."""
        parts = [self.article, self.paragraph or "", self.inciso or "", self.alinea or ""]
        return "art." + ":".join(parts)

    def omission(self, details: Mapping[str, Any]) -> str | None:
        """Return the omission a finding's ``details`` show (``one_omission_per``), or None."""
        key = self.one_omission_per
        if key is None:
            return None
        value = details.get(key)
        if value is None:  # the first reason whose evidence carries it
            entries = details.get("reasons")
            value = next(
                (
                    r[key]
                    for r in (entries if isinstance(entries, list) else [])
                    if isinstance(r, Mapping) and r.get(key) is not None
                ),
                None,
            )
        return None if value is None else str(value)


def _when_text(value: bool | str | tuple[str, ...]) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else "|".join(value)


class InspectionBand(_Frozen):
    """Periodic inspection interval for vehicles of an age band (whole years, both inclusive)."""

    age_min_years: int = Field(ge=0)
    age_max_years: int = Field(ge=0)
    interval_days: int = Field(gt=0)
    provision: str | None = None
    excerpt: str | None = None
    overlaps_previous: bool = False
    """The previous band's words also reach this band's first year (fretamento art. 14: b "a
    08 anos", c "8 anos completos"): the detector takes the larger interval there."""

    @model_validator(mode="after")
    def _ordered(self) -> InspectionBand:
        if self.age_max_years < self.age_min_years:
            msg = f"inspection band: age_max_years {self.age_max_years} < age_min_years"
            raise ValueError(msg)
        return self


class Planning(_Frozen):
    """Planning rules of a municipality's law: fleet size per inhabitants, accessible share, age.

    Fleet size is either a range (``inhabitants_per_taxi_min``/``_max``: fewest and most
    inhabitants per taxi) or one fixed proportion (``inhabitants_per_taxi``). The accessible
    requirement is a share of the fleet (``accessible_share_min``, e.g. 0.02) or one vehicle in
    every ``accessible_one_in``. Ages are whole years counted from the year of manufacture or of
    first registration.
    """

    population: Literal["census", "census_or_estimate"] = "census_or_estimate"
    inhabitants_per_taxi: int | None = Field(default=None, gt=0)
    inhabitants_per_taxi_min: int | None = Field(default=None, gt=0)
    inhabitants_per_taxi_max: int | None = Field(default=None, gt=0)
    provision: str | None = None
    excerpt: str | None = None
    population_provision: str | None = None
    population_excerpt: str | None = None
    accessible_share_min: Decimal | None = Field(default=None, gt=0, le=1)
    accessible_one_in: int | None = Field(default=None, gt=0)
    accessible_provision: str | None = None
    accessible_excerpt: str | None = None
    max_vehicle_age_years: int | None = Field(default=None, ge=0)
    age_counted_from: Literal["manufacture", "first_registration"] = "manufacture"
    age_provision: str | None = None
    age_excerpt: str | None = None
    age_basis_provision: str | None = None
    age_basis_excerpt: str | None = None
    inspection_bands: tuple[InspectionBand, ...] = ()
    note: str | None = None

    @model_validator(mode="after")
    def _one_sizing(self) -> Planning:
        ranged = (self.inhabitants_per_taxi_min, self.inhabitants_per_taxi_max)
        if self.inhabitants_per_taxi is not None and any(v is not None for v in ranged):
            msg = "planning: give inhabitants_per_taxi or the _min/_max range, not both"
            raise ValueError(msg)
        low, high = ranged
        if low is not None and high is not None and high < low:
            msg = f"planning: inhabitants_per_taxi_max {high} < inhabitants_per_taxi_min {low}"
            raise ValueError(msg)
        if self.accessible_share_min is not None and self.accessible_one_in is not None:
            msg = "planning: give accessible_share_min or accessible_one_in, not both"
            raise ValueError(msg)
        bands = sorted(self.inspection_bands, key=lambda b: b.age_min_years)
        for before, after in zip(bands, bands[1:], strict=False):
            if after.age_min_years <= before.age_max_years:
                msg = "planning: inspection bands overlap"
                raise ValueError(msg)
        return self

    @property
    def has_sizing(self) -> bool:
        """Whether the rule sizes the fleet by population."""
        return any(
            v is not None
            for v in (
                self.inhabitants_per_taxi,
                self.inhabitants_per_taxi_min,
                self.inhabitants_per_taxi_max,
            )
        )


_THRESHOLD_NOTES = ("provision", "note")


class AuxiliaryCap(_Frozen):
    """The most condutores auxiliares a prefixo may have at once, where the law fixes it.

    The registry refuses a link beyond it (``db.fleet.store.check_link_limits``) and
    ``driver_not_allowed`` judges ``too_many_auxiliaries`` with it (:meth:`Rulebook.thresholds`).
    A rulebook without the table sets no cap: Porto Alegre's decree has none.
    """

    max: int = Field(ge=0)
    provision: str
    excerpt: str


class MeterExemption(_Frozen):
    """Service categories the law exempts from the taxímetro (Porto Velho art. 44).

    A finding of one of ``kinds`` (read from the meter) about a vehicle whose fleet
    ``service_category`` is one of ``categories`` is listed for review with the provision,
    never proposed: the finding stays a fact about the track; the law does not apply to it.
    """

    categories: tuple[str, ...] = Field(min_length=1)
    kinds: tuple[str, ...] = Field(min_length=1)
    provision: str
    excerpt: str
    note: str | None = None

    @model_validator(mode="after")
    def _known(self) -> MeterExemption:
        for category in self.categories:
            if category not in SERVICE_CATEGORIES:
                msg = (
                    f"meter_exemption.categories: '{category}'; "
                    f"expected one of {', '.join(SERVICE_CATEGORIES)}"
                )
                raise ValueError(msg)
        for kind in self.kinds:
            if kind not in KINDS:
                msg = f"meter_exemption.kinds: '{kind}'; expected one of {', '.join(KINDS)}"
                raise ValueError(msg)
        return self

    def exempts(self, kind: str, category: str | None) -> bool:
        """Whether a finding of ``kind`` about a vehicle of ``category`` is exempt."""
        return kind in self.kinds and category in self.categories


class Rulebook(_Frozen):
    """One municipality's rules for one service (taxi or fretamento)."""

    schema_: int = Field(alias="schema")
    municipality: str = Field(pattern=r"^\d{7}$")
    municipality_name: str
    uf: str
    service: Literal["taxi", "fretamento"]
    law: str
    law_file: str
    fine_unit: Literal["UFM", "BRL", "UPF"]
    fine_payer: str
    fine_payer_provision: str | None = None
    fine_payer_excerpt: str | None = None
    gravity_set_by_regulation: bool = False
    note: str | None = None
    reincidence: Reincidence
    deadlines: dict[str, Deadline] = Field(default_factory=dict)
    gravities: dict[str, Gravity] = Field(default_factory=dict)
    confidence_floor: dict[str, float] = Field(
        default_factory=lambda: {"default": DEFAULT_CONFIDENCE_FLOOR}
    )
    """Minimum confidence per finding kind (``default`` for the others): a finding below it is
    listed for review, never proposed."""
    uncovered: dict[str, str] = Field(default_factory=dict)
    """Finding kinds deliberately left without a rule, with the reason (pt-BR)."""
    rules: tuple[Rule, ...]
    review: tuple[ReviewCase, ...] = ()
    """Sub-cases no rule covers that are listed for review with their reason (``[[review]]``)."""
    planning: Planning | None = None
    meter_exemption: MeterExemption | None = None
    detector_thresholds: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """``{kind: {parameter: value, "provision": ..., "note": ...}}``: limits the law fixes for
    a detector (:meth:`thresholds`)."""
    auxiliaries: AuxiliaryCap | None = None
    """``[auxiliaries]``: the cap on auxiliares per prefixo, where the law fixes one."""

    @model_validator(mode="after")
    def _consistent(self) -> Rulebook:
        for name in self.gravities:
            if name not in GRAVITIES:
                msg = f"gravities.{name}: expected one of {', '.join(GRAVITIES)}"
                raise ValueError(msg)
        for rule in self.rules:
            if rule.gravity is not None and self.gravities and rule.gravity not in self.gravities:
                msg = f"rule {rule.provision}: gravity '{rule.gravity}' has no [gravities] table"
                raise ValueError(msg)
        if not (LAW_DIR / self.law_file).is_file():
            msg = f"law_file '{self.law_file}' is not in enforcement/laws/"
            raise ValueError(msg)
        check_confidence_floor(self.confidence_floor, where="confidence_floor")
        from tracking.detectors.detect import check_thresholds

        check_thresholds(self.thresholds())
        for kind, table in self.detector_thresholds.items():
            if not isinstance(table.get("provision"), str):
                msg = f"detector_thresholds.{kind}: 'provision' (the article) is required"
                raise ValueError(msg)
        for kind in self.uncovered:
            if kind not in KINDS:
                msg = f"uncovered.{kind}: not a finding kind; expected one of {', '.join(KINDS)}"
                raise ValueError(msg)
            if any(r.kind == kind for r in self.rules):
                msg = f"uncovered.{kind}: the kind has a rule"
                raise ValueError(msg)
        for case in self.review:
            if case.kind in self.uncovered:
                msg = f"review {case.kind} ({case.case}): the kind is in [uncovered]"
                raise ValueError(msg)
        return self

    def thresholds(self) -> dict[str, dict[str, Any]]:
        """Detector thresholds the law fixes: ``{kind: {parameter: value}}``.

        ``driver_not_allowed`` gets ``max_auxiliaries`` from ``[auxiliaries]``. Where
        ``operating_while_barred`` judges the inspection's age
        (``max_inspection_age_days``) and ``[planning]`` has ``inspection_bands``, the bands
        go with it (``inspection_bands``: the interval by the vehicle's age), read from the
        one table.
        """
        out = {
            kind: {k: v for k, v in table.items() if k not in _THRESHOLD_NOTES}
            for kind, table in self.detector_thresholds.items()
        }
        if self.auxiliaries is not None:
            out.setdefault("driver_not_allowed", {})["max_auxiliaries"] = self.auxiliaries.max
        barred = out.get("operating_while_barred")
        bands = self.planning.inspection_bands if self.planning is not None else ()
        if barred is not None and "max_inspection_age_days" in barred and bands:
            barred["inspection_bands"] = [
                b.model_dump(exclude={"excerpt"})
                for b in sorted(bands, key=lambda b: b.age_min_years)
            ]
        return out

    @cached_property
    def law_limits(self) -> dict[str, dict[str, Any]]:
        """Return :meth:`thresholds` computed once: read it, never change it.

        Proposals compare each finding's limits with it.
        """
        return self.thresholds()

    def threshold_provision(self, kind: str) -> str:
        """Return the articles behind a kind's law limits (:meth:`thresholds`)."""
        found = [self.detector_thresholds.get(kind, {}).get("provision")]
        if kind == "driver_not_allowed" and self.auxiliaries is not None:
            found.append(self.auxiliaries.provision)
        return "; ".join(str(p) for p in found if p)

    def floor_for(self, kind: str, override: Mapping[str, float] | None = None) -> float:
        """Confidence floor of a kind: ``override`` merged over the rulebook's table."""
        table = {**self.confidence_floor, **(override or {})}
        return float(table.get(kind, table.get("default", DEFAULT_CONFIDENCE_FLOOR)))

    def rule_for(self, kind: str, details: Mapping[str, Any]) -> Rule | None:
        """Return the first rule that a finding falls under, or None."""
        return next((r for r in self.rules if r.matches(kind, details)), None)

    def review_for(self, kind: str, details: Mapping[str, Any]) -> ReviewCase | None:
        """Return the first review case a finding no rule covers falls under, or None."""
        return next((c for c in self.review if c.matches(kind, details)), None)

    def detail_keys(self) -> frozenset[str]:
        """Return the ``details`` keys the rules and review cases read (and their omissions)."""
        omissions = [(r.one_omission_per, "reasons") for r in self.rules if r.one_omission_per]
        return frozenset(k for c in (*self.rules, *self.review) for k in c.when).union(*omissions)

    def law_text(self) -> str:
        """Return the text of the law the rulebook quotes."""
        return (LAW_DIR / self.law_file).read_text(encoding="utf-8")


def check_confidence_floor(table: Mapping[str, Any], *, where: str) -> None:
    """Check a confidence floor table: keys ``default`` or finding kinds, values in [0, 1].

    Raises
    ------
    ValueError
        A key or a value out of place; the message names it and the allowed values.
    """
    for key, value in table.items():
        if key != "default" and key not in KINDS:
            msg = f"{where}.{key}: esperado 'default' ou um tipo de achado ({', '.join(KINDS)})"
            raise ValueError(msg)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            msg = f"{where}.{key} foi {value!r}; esperado um número entre 0 e 1"
            raise ValueError(msg)


def normalize_whitespace(text: str) -> str:
    """Collapse every run of whitespace to one space, as excerpts are compared."""
    return re.sub(r"\s+", " ", text).strip()


def excerpts(rulebook: Rulebook) -> list[tuple[str, str]]:
    """Every verbatim excerpt of a rulebook, as ``(where, text)`` pairs."""
    found: list[tuple[str, str]] = []

    def walk(value: Any, where: str) -> None:
        if isinstance(value, BaseModel):
            value = {k: getattr(value, k) for k in type(value).model_fields}
        if isinstance(value, dict):
            for k, v in value.items():
                if k.endswith("excerpt") and isinstance(v, str):
                    found.append((f"{where}.{k}", v))
                else:
                    walk(v, f"{where}.{k}")
        elif isinstance(value, tuple | list):
            for i, v in enumerate(value):
                walk(v, f"{where}[{i}]")

    walk(rulebook, rulebook.municipality + "-" + rulebook.service)
    return found


def read_rulebook(path: Path) -> Rulebook:
    """Read and validate one rulebook file.

    Raises
    ------
    RulebookError
        The file is not valid TOML or does not follow the schema; the message names the field.
    """
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        return Rulebook.model_validate(data)
    except tomllib.TOMLDecodeError as exc:
        msg = f"{path.name}: TOML inválido ({exc})"
        raise RulebookError(msg) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        msg = f"{path.name}: {where}: {first['msg']}"
        raise RulebookError(msg) from None


@cache
def bundled_rulebooks() -> dict[tuple[str, str], Rulebook]:
    """Every rulebook shipped with Pontual, keyed by ``(municipality, service)``."""
    books = [read_rulebook(p) for p in sorted(RULEBOOK_DIR.glob("*.toml"))]
    return {(b.municipality, b.service): b for b in books}


def auxiliary_cap(municipality: str | None) -> tuple[AuxiliaryCap, str] | None:
    """Return the cap on auxiliares of a municipality's taxi law and the municipality's name.

    None when the municipality is unknown, has no bundled taxi rulebook, or its law sets no cap:
    the registry then holds every link the regulator records.
    """
    book = bundled_rulebooks().get((municipality or "", "taxi"))
    if book is None or book.auxiliaries is None:
        return None
    return book.auxiliaries, book.municipality_name


def auxiliary_caps_sentence() -> str:
    """Say in pt-BR which bundled laws cap the auxiliares (for the registry's forms)."""
    books = sorted(
        (b for (_, s), b in bundled_rulebooks().items() if s == "taxi"),
        key=lambda b: b.municipality_name,
    )
    parts = [
        f"no máximo {b.auxiliaries.max} em {b.municipality_name} ({b.auxiliaries.provision})"
        if b.auxiliaries is not None
        else f"sem limite em {b.municipality_name}"
        for b in books
    ]
    text = "Auxiliares ao mesmo tempo em um prefixo, pela lei do município dele: "
    text += "; ".join(parts)
    return text + "."


def rulebooks_for(municipality: str) -> dict[str, Rulebook]:
    """Return the rulebooks of a municipality, by service.

    Raises
    ------
    UnknownMunicipalityError
        No rulebook is configured for the code; the message lists the ones that are.
    """
    books = {s: b for (m, s), b in bundled_rulebooks().items() if m == municipality}
    if not books:
        books_all = bundled_rulebooks().items()
        known = sorted({f"{m} ({b.municipality_name})" for (m, _), b in books_all})
        msg = (
            f"nenhum regulamento configurado para o município '{municipality}'; "
            f"disponíveis: {', '.join(known)}"
        )
        raise UnknownMunicipalityError(msg)
    return books
