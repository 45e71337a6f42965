"""Coverage of each seed law: every provision that defines an infraction or an obligation.

Each rulebook has a sibling list, ``enforcement/provisions/<IBGE>-<service>.toml``: one
``[[provisions]]`` entry per article, inciso or parágrafo of the infraction articles (those named
in ``infraction_articles``, whose incisos and parágrafos :func:`parse_provisions` reads from the
law so that none is forgotten) and of the operating obligations they refer to, each with its
verbatim excerpt. The status is derived, never typed for covered provisions:

``coberto``
    some rule of the rulebook cites the provision (same article, parágrafo and inciso), or the
    entry's ``same_as`` provision is covered; the rules are listed.
``não detectável``
    no rule, and the entry says why GPS fixes and the registry cannot evidence it (``why``).
``não se aplica``
    no rule, and the provision is no conduct a finding could show (a definition, an amount, a
    faculty), with ``why``.

So a rule added to a rulebook flips its provision to ``coberto`` without editing the list; the
entry's fallback status says what is true when no rule cites it. A provision a rule covers
(directly or through ``same_as``) may go without a fallback: should that rule go, the list is
refused until someone writes what is then true.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from enforcement._errors import RulebookError
from enforcement.rulebook import Rule, Rulebook, bundled_rulebooks, normalize_whitespace
from tracking.detectors.findings import LIMIT_GATED_REASONS

PROVISIONS_DIR = Path(__file__).parent / "provisions"
Fallback = Literal["não detectável", "não se aplica"]
STATUS_LABELS = {
    "coberto": "coberto",
    "não detectável": "não detectável por GPS/cadastro",
    "não se aplica": "não se aplica",
}
"""How each status is written for people."""


def _norm_article(value: str) -> str:
    return re.sub(r"[^0-9A-Za-z-]", "", value.replace("art.", "")).strip()


def _norm_paragraph(value: str | None) -> str:
    if not value:
        return ""
    text = value.lower().replace("parágrafo", "").replace("§", "")
    text = re.sub(r"[º°ª\s.]", "", text)
    return "único" if text in {"único", "unico"} else text


def _norm_inciso(value: str | None) -> str:
    return (value or "").strip().upper()


def provision_key(
    article: str, paragraph: str | None = None, inciso: str | None = None
) -> tuple[str, str, str]:
    """Identity of a provision, comparable across rules and lists: article, parágrafo, inciso."""
    return (_norm_article(article), _norm_paragraph(paragraph), _norm_inciso(inciso))


def cite(article: str, paragraph: str | None = None, inciso: str | None = None) -> str:
    """Cite a provision the way the rulebooks do (``art. 58, VIII``; ``art. 3º, § 1º``)."""
    num = _norm_article(article)
    text = f"art. {num}º" if num.isdigit() and int(num) < 10 else f"art. {num}"
    par = _norm_paragraph(paragraph)
    if par == "único":
        text += ", parágrafo único"
    elif par:
        text += f", § {par}º"
    if inciso:
        text += f", {_norm_inciso(inciso)}"
    return text


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SameAs(_Frozen):
    """Another provision of the same law whose coverage this one shares (e.g. a repeated inciso)."""

    article: str
    paragraph: str | None = None
    inciso: str | None = None


class Provision(_Frozen):
    """One provision of a seed law, with what the platform makes of it when no rule cites it."""

    article: str
    paragraph: str | None = None
    inciso: str | None = None
    excerpt: str = Field(min_length=1)
    status: Fallback | None = None
    why: str | None = None
    same_as: SameAs | None = None

    @model_validator(mode="after")
    def _status_with_why(self) -> Provision:
        if (self.status is None) != (self.why is None):
            msg = f"{self.cite}: give status and why together"
            raise ValueError(msg)
        return self

    @property
    def key(self) -> tuple[str, str, str]:
        """See :func:`provision_key`."""
        return provision_key(self.article, self.paragraph, self.inciso)

    @property
    def cite(self) -> str:
        """See :func:`cite`."""
        return cite(self.article, self.paragraph, self.inciso)


class ProvisionList(_Frozen):
    """The provisions of one rulebook's law (``enforcement/provisions/<IBGE>-<service>.toml``)."""

    schema_: int = Field(alias="schema")
    municipality: str = Field(pattern=r"^\d{7}$")
    service: Literal["taxi", "fretamento"]
    infraction_articles: tuple[str, ...]
    """Articles whose every inciso and parágrafo must be listed (read by parse_provisions)."""
    note: str | None = None
    provisions: tuple[Provision, ...]

    @model_validator(mode="after")
    def _unique(self) -> ProvisionList:
        seen: set[tuple[str, str, str]] = set()
        for p in self.provisions:
            if p.key in seen:
                msg = f"{p.cite} listed twice"
                raise ValueError(msg)
            seen.add(p.key)
        return self


@dataclass(frozen=True, kw_only=True)
class Coverage:
    """A provision and its derived status."""

    provision: Provision
    status: Literal["coberto", "não detectável", "não se aplica"]
    rules: tuple[Rule, ...]
    why: str

    @property
    def label(self) -> str:
        """The status as written for people."""
        return STATUS_LABELS[self.status]


def read_provisions(path: Path) -> ProvisionList:
    """Read and validate one provision list.

    Raises
    ------
    RulebookError
        The file is not valid TOML or does not follow the schema; the message names the field.
    """
    try:
        return ProvisionList.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
    except tomllib.TOMLDecodeError as exc:
        msg = f"{path.name}: TOML inválido ({exc})"
        raise RulebookError(msg) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        msg = f"{path.name}: {where}: {first['msg']}"
        raise RulebookError(msg) from None


@cache
def bundled_provisions() -> dict[tuple[str, str], ProvisionList]:
    """Every provision list shipped with Pontual, keyed by ``(municipality, service)``."""
    lists = [read_provisions(p) for p in sorted(PROVISIONS_DIR.glob("*.toml"))]
    return {(p.municipality, p.service): p for p in lists}


def _rule_key(rule: Rule) -> tuple[str, str, str]:
    return provision_key(rule.article, rule.paragraph, rule.inciso)


def coverage(book: Rulebook, provisions: ProvisionList) -> list[Coverage]:
    """Derive each provision's status from the rulebook's rules (see the module docstring).

    Raises
    ------
    RulebookError
        A provision without a rule and without a fallback status, or a ``same_as`` that is not
        in the list.
    """
    by_key: dict[tuple[str, str, str], list[Rule]] = {}
    for rule in book.rules:
        by_key.setdefault(_rule_key(rule), []).append(rule)
    listed = {p.key for p in provisions.provisions}
    out = []
    for p in provisions.provisions:
        rules = list(by_key.get(p.key, ()))
        if p.same_as is not None:
            target = provision_key(p.same_as.article, p.same_as.paragraph, p.same_as.inciso)
            if target not in listed:
                msg = f"{book.municipality}-{book.service}: {p.cite}: same_as fora da lista"
                raise RulebookError(msg)
            rules += by_key.get(target, [])
        if rules:
            out.append(Coverage(provision=p, status="coberto", rules=tuple(rules), why=""))
        elif p.status is None or p.why is None:
            msg = f"{book.municipality}-{book.service}: {p.cite}: sem regra e sem status"
            raise RulebookError(msg)
        else:
            out.append(Coverage(provision=p, status=p.status, rules=(), why=p.why))
    return out


def bundled_coverage() -> list[tuple[Rulebook, list[Coverage]]]:
    """Coverage of every bundled rulebook that has a provision list, in rulebook order."""
    lists = bundled_provisions()
    return [
        (book, coverage(book, lists[key]))
        for key, book in bundled_rulebooks().items()
        if key in lists
    ]


# --- reading the laws -------------------------------------------------------------------------

_ARTICLE = re.compile(r"^[^\w\n]*(?:~rt|Art|Arto)[o]?[.,]?\s*(\d+)", re.MULTILINE)
_INCISO = re.compile(r"(?:^|(?<=[.:;] ))[\s.,•'\"]*([IVXL]+)\s*[-_–]\s*(?=\S)", re.MULTILINE)
_PARAGRAPH = re.compile(r"^\s*(?:§\s*(\d+)\s*[º°o]|(Parágrafo único))", re.MULTILINE)


def article_text(law: str, article: str) -> str:
    """Return one article of a law: from its heading to the next article's heading."""
    heads = [(m.group(1), m.start()) for m in _ARTICLE.finditer(law)]
    for i, (num, start) in enumerate(heads):
        if num == _norm_article(article):
            end = heads[i + 1][1] if i + 1 < len(heads) else len(law)
            return law[start:end]
    msg = f"art. {article} não encontrado no texto"
    raise RulebookError(msg)


def parse_provisions(law: str, article: str) -> set[tuple[str, str, str]]:
    """Keys of the incisos and parágrafos of one article, as the law's text numbers them.

    OCR-damaged numerals (``111-`` for III) are not recognised: the list must carry them by hand.
    """
    text = article_text(law, article)
    found = {provision_key(article, None, m.group(1)) for m in _INCISO.finditer(text)}
    for m in _PARAGRAPH.finditer(text):
        found.add(provision_key(article, "único" if m.group(2) else m.group(1)))
    return found


def excerpt_in_law(excerpt: str, law: str) -> bool:
    """Whether an excerpt is the law's own words, after whitespace is normalised."""
    return normalize_whitespace(excerpt) in normalize_whitespace(law)


# --- rendering --------------------------------------------------------------------------------

SERVICE_NAMES = {"taxi": "táxi", "fretamento": "fretamento"}
_EXCERPT_CHARS = 110


def _short(text: str) -> str:
    text = normalize_whitespace(text)
    if len(text) <= _EXCERPT_CHARS:
        return text
    return text[: _EXCERPT_CHARS - 1].rsplit(" ", 1)[0] + " …"


def unset_limit(book: Rulebook, rule: Rule) -> str | None:
    """Return the limit a rule's reason needs when the rulebook does not fix it, else None.

    Such a rule finds nothing until the regulator gives the limit in ``--thresholds``
    (:data:`tracking.detectors.findings.LIMIT_GATED_REASONS`).
    """
    reason = rule.when.get("reason", rule.when.get("reasons"))
    limit = LIMIT_GATED_REASONS.get((rule.kind, reason)) if isinstance(reason, str) else None
    if limit is None or limit in book.thresholds().get(rule.kind, {}):
        return None
    return limit


def is_off(book: Rulebook, item: Coverage) -> bool:
    """Whether a covered provision's every rule waits for a limit the rulebook does not fix."""
    return bool(item.rules) and all(unset_limit(book, r) for r in item.rules)


def _rule_label(book: Rulebook, rule: Rule) -> str:
    case = rule.case
    limit = unset_limit(book, rule)
    if limit is not None:
        case += f"{'; ' if case else ''}desligada: o regulamento não fixa `{limit}`"
    return f"`{rule.kind}`" + (f" ({case})" if case else "")


def counts(items: list[Coverage]) -> dict[str, int]:
    """Provisions per status: ``coberto``, ``não detectável``, ``não se aplica``."""
    out = dict.fromkeys(STATUS_LABELS, 0)
    for c in items:
        out[c.status] += 1
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def coverage_markdown(book: Rulebook, items: list[Coverage]) -> str:
    """One rulebook's provisions as a Markdown section (heading, counts and table)."""
    n = counts(items)
    off = sum(is_off(book, c) for c in items)
    off_text = f" ({off} só com um limite informado em `--thresholds`)" if off else ""
    lines = [
        f"## {book.municipality_name} ({book.municipality}), {SERVICE_NAMES[book.service]}",
        "",
        f"{book.law}. {len(items)} dispositivos: {n['coberto']} cobertos{off_text}, "
        f"{n['não detectável']} não detectáveis por GPS/cadastro, "
        f"{n['não se aplica']} em que não se aplica.",
        "",
        "| dispositivo | texto | situação | regras ou motivo |",
        "|---|---|---|---|",
    ]
    for c in items:
        detail = ", ".join(dict.fromkeys(_rule_label(book, r) for r in c.rules)) or c.why
        lines.append(
            f"| {c.provision.cite} | {_cell(_short(c.provision.excerpt))} | {c.label} "
            f"| {_cell(detail)} |"
        )
    return "\n".join(lines) + "\n"


COVERAGE_DOC_HEADER = """\
# Cobertura dos regulamentos

Cada dispositivo que tipifica infração ou fixa obrigação de operação nos textos incluídos
(`enforcement/laws/`), com a situação no Pontual: **coberto** (as regras dos regulamentos em
`enforcement/rulebooks/` que o citam, por tipo de achado e caso), **não detectável por
GPS/cadastro** (nenhum achado o evidencia com as posições e o cadastro que o Pontual guarda hoje;
o motivo diz o que falta) ou **não se aplica** (definição, valor de multa, faculdade; por quê).
A lista está em `enforcement/provisions/`; a situação “coberto” vem das regras, não da lista:
uma regra nova que cite o dispositivo o torna coberto.

Arquivo gerado (`python scripts/gen_coverage.py`; igual a `pontual rulebooks --markdown`, a
partir da seção de cobertura): não editar à mão. Um teste falha se ele divergir dos regulamentos.
"""


def coverage_document() -> str:
    """Return the full coverage document (``docs/cobertura.md``)."""
    sections = [coverage_markdown(book, items) for book, items in bundled_coverage()]
    return COVERAGE_DOC_HEADER + "\n" + "\n".join(sections)


README_BEGIN = "<!-- cobertura: gerado por scripts/gen_coverage.py -->"
README_END = "<!-- /cobertura -->"


def readme_summary() -> str:
    """Return the README's coverage table between its markers (counts, link to docs)."""
    lines = [
        README_BEGIN,
        "| município | serviço | dispositivos | cobertos | não detectáveis por GPS/cadastro "
        "| não se aplica |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for book, items in bundled_coverage():
        n = counts(items)
        off = sum(is_off(book, c) for c in items)
        covered = f"{n['coberto']}" + (f" ({off} só com limite em `--thresholds`)" if off else "")
        lines.append(
            f"| {book.municipality_name} ({book.municipality}) | {SERVICE_NAMES[book.service]} "
            f"| {len(items)} | {covered} | {n['não detectável']} | {n['não se aplica']} |"
        )
    lines += [
        "",
        "Lista completa, dispositivo por dispositivo, com as regras ou o motivo: "
        "[docs/cobertura.md](docs/cobertura.md).",
        README_END,
    ]
    return "\n".join(lines)


def replace_readme_summary(readme: str) -> str:
    """Return the README with its coverage block replaced by :func:`readme_summary`.

    Raises
    ------
    RulebookError
        The README has no coverage markers.
    """
    start, end = readme.find(README_BEGIN), readme.find(README_END)
    if start < 0 or end < start:
        msg = "README sem os marcadores da tabela de cobertura"
        raise RulebookError(msg)
    return readme[:start] + readme_summary() + readme[end + len(README_END) :]
