from pathlib import Path

import pytest

from enforcement._errors import RulebookError
from enforcement.coverage import (
    PROVISIONS_DIR,
    README_BEGIN,
    README_END,
    bundled_provisions,
    cite,
    counts,
    coverage,
    coverage_document,
    excerpt_in_law,
    is_off,
    parse_provisions,
    provision_key,
    read_provisions,
    readme_summary,
    replace_readme_summary,
    unset_limit,
)
from enforcement.rulebook import Rule, bundled_rulebooks
from fleet.drivers import DRIVER_FILE_COLUMNS, LINK_FILE_COLUMNS
from fleet.loaders import FLEET_REGISTRY_COLUMNS
from tracking.detectors import driver_not_allowed, operating_while_barred

ROOT = Path(__file__).resolve().parents[2]
LISTS = sorted(PROVISIONS_DIR.glob("*.toml"))
POA = ("4314902", "taxi")
PB = ("4314548", "taxi")


def _status(key: tuple[str, str], article: str, paragraph: str | None, inciso: str | None) -> str:
    book, plist = bundled_rulebooks()[key], bundled_provisions()[key]
    wanted = provision_key(article, paragraph, inciso)
    return next(c.status for c in coverage(book, plist) if c.provision.key == wanted)


class TestProvisionLists:
    def test_one_list_per_rulebook(self) -> None:
        """Every bundled rulebook has its provision list, and no list lacks a rulebook."""
        assert set(bundled_provisions()) == set(bundled_rulebooks())

    @pytest.mark.parametrize("path", LISTS, ids=lambda p: p.stem)
    def test_every_excerpt_occurs_in_its_law(self, path: Path) -> None:
        """Each provision's excerpt is the law's own words, after whitespace is normalised."""
        plist = read_provisions(path)
        law = bundled_rulebooks()[(plist.municipality, plist.service)].law_text()
        assert [p.cite for p in plist.provisions if not excerpt_in_law(p.excerpt, law)] == []

    @pytest.mark.parametrize("path", LISTS, ids=lambda p: p.stem)
    def test_every_inciso_of_the_infraction_articles_is_listed(self, path: Path) -> None:
        """No inciso or parágrafo the law's infraction articles number is left off the list."""
        plist = read_provisions(path)
        law = bundled_rulebooks()[(plist.municipality, plist.service)].law_text()
        in_law = set().union(*(parse_provisions(law, a) for a in plist.infraction_articles))
        listed = {p.key for p in plist.provisions}
        assert sorted(in_law - listed) == []

    @pytest.mark.parametrize("path", LISTS, ids=lambda p: p.stem)
    def test_every_rule_cites_a_listed_provision(self, path: Path) -> None:
        """A rule's provision is on the list, so no covered provision goes unreported."""
        plist = read_provisions(path)
        book = bundled_rulebooks()[(plist.municipality, plist.service)]
        listed = {p.key for p in plist.provisions}
        cited = {provision_key(r.article, r.paragraph, r.inciso) for r in book.rules}
        assert sorted(cited - listed) == []

    def test_missing_inciso_is_caught(self, tmp_path: Path) -> None:
        """Dropping POA art. 58, VII from the list makes the completeness check fail."""
        src = (PROVISIONS_DIR / "4314902-taxi.toml").read_text(encoding="utf-8")
        entry = '[[provisions]]\narticle = "58"\ninciso = "VII"\n'
        start = src.index(entry)
        end = src.index("[[provisions]]", start + 1)
        path = tmp_path / "4314902-taxi.toml"
        path.write_text(src[:start] + src[end:], encoding="utf-8")
        plist = read_provisions(path)
        law = bundled_rulebooks()[POA].law_text()
        listed = {p.key for p in plist.provisions}
        assert parse_provisions(law, "58") - listed == {provision_key("58", None, "VII")}

    def test_parser_reads_incisos_and_paragraphs(self) -> None:
        """POA art. 58: incisos I–XVII (XIII repeated) and §§ 1º–3º; art. 57's parágrafo único."""
        law = bundled_rulebooks()[POA].law_text()
        keys = parse_provisions(law, "58")
        romans = [
            "I",
            "II",
            "III",
            "IV",
            "V",
            "VI",
            "VII",
            "VIII",
            "IX",
            "X",
            "XI",
            "XII",
            "XIII",
            "XIV",
            "XV",
            "XVI",
            "XVII",
        ]
        assert {provision_key("58", None, r) for r in romans} <= keys
        assert {provision_key("58", p) for p in ("1", "2", "3")} <= keys
        assert len(keys) == len(romans) + 3
        assert provision_key("57", "único") in parse_provisions(law, "57")

    def test_parser_reads_wrapped_ocr_text(self) -> None:
        """Pinto Bandeira's line-wrapped text with '_' separators: art. 24 has I–IV."""
        law = bundled_rulebooks()[("4314548", "taxi")].law_text()
        assert parse_provisions(law, "24") == {
            provision_key("24", None, r) for r in ("I", "II", "III", "IV")
        }

    def test_cite_is_the_rulebooks_way(self) -> None:
        """Citations read as in the rulebooks (ordinal below 10, parágrafo único, inciso)."""
        assert cite("58", None, "viii") == "art. 58, VIII"
        assert cite("3", "§ 1º") == "art. 3º, § 1º"
        assert cite("46", "Parágrafo único") == "art. 46, parágrafo único"


class TestStatus:
    def test_rule_flips_a_provision_to_covered(self) -> None:
        """A rule citing POA 58 VII (none does) covers it, the provision list untouched."""
        book, plist = bundled_rulebooks()[POA], bundled_provisions()[POA]
        assert _status(POA, "58", None, "VII") == "não detectável"
        rule = Rule(
            kind="operating_while_barred",
            when={"reason": "unregistered_driver"},
            article="58",
            inciso="VII",
            provision="art. 58, VII",
            excerpt="VII - alterar as características do veículo",
        )
        more = book.model_copy(update={"rules": (*book.rules, rule)})
        item = next(c for c in coverage(more, plist) if c.provision.cite == "art. 58, VII")
        assert item.status == "coberto" and item.rules == (rule,)

    def test_same_as_shares_the_coverage(self) -> None:
        """POA 58 XVI repeats XIII: covered by the longer-route rule that cites XIII."""
        assert _status(POA, "58", None, "XVI") == "coberto"
        book, plist = bundled_rulebooks()[POA], bundled_provisions()[POA]
        item = next(c for c in coverage(book, plist) if c.provision.cite == "art. 58, XVI")
        assert [r.kind for r in item.rules] == ["longer_route"]

    def test_uncovered_without_status_is_refused(self, tmp_path: Path) -> None:
        """A provision with no rule and no fallback status is an error naming it."""
        src = (PROVISIONS_DIR / "4314902-taxi.toml").read_text(encoding="utf-8")
        entry = '[[provisions]]\narticle = "58"\ninciso = "VII"\n'
        start = src.index(entry)
        end = src.index("[[provisions]]", start + 1)
        block = "\n".join(
            line for line in src[start:end].splitlines() if not line.startswith(("status", "why"))
        )
        path = tmp_path / "x.toml"
        path.write_text(src[:start] + block + "\n\n" + src[end:], encoding="utf-8")
        with pytest.raises(RulebookError, match=r"art\. 58, VII: sem regra e sem status"):
            coverage(bundled_rulebooks()[POA], read_provisions(path))

    def test_status_without_why_is_refused(self, tmp_path: Path) -> None:
        """A fallback status needs its one-line why."""
        src = (PROVISIONS_DIR / "4314902-taxi.toml").read_text(encoding="utf-8")
        start = src.index('[[provisions]]\narticle = "58"\ninciso = "VII"\n')
        why = src.index("why = ", start)
        path = tmp_path / "x.toml"
        path.write_text(src[:why] + src[src.index("\n", why) + 1 :], encoding="utf-8")
        with pytest.raises(RulebookError, match="status and why together"):
            read_provisions(path)

    def test_covered_provisions(self) -> None:
        """Known covered provisions of each seed are reported as covered."""
        assert _status(POA, "59", None, "XIII") == "coberto"
        assert _status(POA, "46", "único", None) == "coberto"
        assert _status(("4314548", "taxi"), "25", None, "V") == "coberto"
        assert _status(("4314902", "fretamento"), "39", "único", None) == "coberto"
        assert _status(("1100205", "taxi"), "9", None, "VIII") == "coberto"

    def test_counts_add_up(self) -> None:
        """Every provision has exactly one status."""
        for key, book in bundled_rulebooks().items():
            items = coverage(book, bundled_provisions()[key])
            assert (
                sum(counts(items).values())
                == len(items)
                == len(bundled_provisions()[key].provisions)
            )


class TestLimitGatedRules:
    def test_each_gated_limit_is_a_keyword_of_its_detector(self) -> None:
        """Each limit gating a reason is a keyword of the kind's detector, default None."""
        import inspect

        from tracking.detectors.findings import LIMIT_GATED_REASONS

        detectors = {
            "operating_while_barred": operating_while_barred.detect_operating_while_barred,
            "driver_not_allowed": driver_not_allowed.detect_driver_not_allowed,
        }
        for (kind, reason), limit in LIMIT_GATED_REASONS.items():
            param = inspect.signature(detectors[kind]).parameters[limit]
            assert param.default is None, (kind, reason, limit)

    def test_a_rule_without_its_limit_is_said_off(self) -> None:
        """PB 32 III (no day count in the law) is covered but off; PB art. 10 (5 years) is on."""
        book = bundled_rulebooks()[PB]
        items = {c.provision.cite: c for c in coverage(book, bundled_provisions()[PB])}
        assert is_off(book, items["art. 32, III"])
        assert unset_limit(book, items["art. 32, III"].rules[0]) == "auxiliary_only_min_days"
        assert not is_off(book, items["art. 10"])
        assert "desligada" in coverage_document().split("art. 32, III |", 1)[1].split("\n", 1)[0]


class TestPortoAlegreMeter:
    def test_no_flag2_rule_because_the_decree_fixes_no_hours(self) -> None:
        """POA art. 23 fixes no Bandeira 2 hours: flag2_misuse stays without a rule, saying so."""
        book = bundled_rulebooks()[POA]
        assert not [r for r in book.rules if r.kind == "flag2_misuse"]
        assert "art. 23, II" in book.uncovered["flag2_misuse"]
        law = book.law_text().lower()
        assert "bandeira 2" not in law and "bandeira ii" not in law
        assert _status(POA, "23", None, "II") == "não detectável"

    def test_intermunicipal_meter_is_not_detectable(self) -> None:
        """Art. 27 § único needs a passenger aboard with the meter off: not in the fixes."""
        plist = bundled_provisions()[POA]
        entry = next(p for p in plist.provisions if p.cite == "art. 27, parágrafo único")
        assert _status(POA, "27", "único", None) == "não detectável"
        assert entry.why is not None and "passageiro" in entry.why


class TestGeneratedFiles:
    def test_docs_coverage_is_generated(self) -> None:
        """docs/cobertura.md equals the output generated from the rulebooks (run gen_coverage)."""
        committed = (ROOT / "docs" / "cobertura.md").read_text(encoding="utf-8")
        assert committed == coverage_document(), "run: python scripts/gen_coverage.py"

    def test_readme_table_is_generated(self) -> None:
        """README's coverage table equals the generated summary (run gen_coverage)."""
        readme = (ROOT / "README.md").read_text(encoding="utf-8")
        assert readme_summary() in readme, "run: python scripts/gen_coverage.py"
        assert readme.count(README_BEGIN) == readme.count(README_END) == 1

    def test_readme_block_is_replaced(self) -> None:
        """A stale block between the markers is replaced; text around it is kept."""
        stale = f"antes\n{README_BEGIN}\n| velho |\n{README_END}\ndepois\n"
        fresh = replace_readme_summary(stale)
        assert fresh == f"antes\n{readme_summary()}\ndepois\n"

    def test_summary_counts_each_rulebook(self) -> None:
        """The README table has one row per rulebook with the derived counts."""
        rows = [r for r in readme_summary().splitlines() if r.startswith("| Porto Alegre")]
        assert len(rows) == 2
        book, plist = bundled_rulebooks()[POA], bundled_provisions()[POA]
        items = coverage(book, plist)
        n, off = counts(items), sum(is_off(book, c) for c in items)
        taxi = next(r for r in rows if "| táxi |" in r)
        assert taxi.endswith(
            f"| {len(plist.provisions)} | {n['coberto']} ({off} só com limite em `--thresholds`) "
            f"| {n['não detectável']} | {n['não se aplica']} |"
        )


# Claims a fallback `why` once made that the registry (or a detector) has since made false, each
# with the registry column or detector reason that now refutes it.
STALE_CLAIMS: dict[str, tuple[str, ...]] = {
    "não guarda os condutores vinculados": ("links", "role", "valid_from", "valid_until"),
    "não guarda a cnh": ("drivers", "cnh_valid_until", "cnh_status"),
    "nem a credencial do condutor": ("drivers", "ictp_valid_until", "ictp_status"),
    "nenhum achado compara a idade": ("reason", "vehicle_over_age"),
    "usado só no planejamento": ("reason", "vehicle_over_age"),
    "não o do primeiro emplacamento": ("fleet", "first_registered_on"),
    "não as datas das vistorias realizadas": ("fleet", "last_inspection_on"),
    "sem a data da última vistoria realizada": ("fleet", "last_inspection_on"),
    "não guarda as substituições": ("fleet", "substitution_since"),
    "não distinguem o veículo em substituição": ("fleet", "substitution_since"),
    "não guarda o recolhimento do termo": ("fleet", "termo_recolhido_since"),
    "não a data de emissão": ("fleet", "alvara_first_issued_on"),
    "não mapeia as situações": ("reason", "reserved"),
}


def _kept(what: tuple[str, ...]) -> bool:
    """Whether the registry column(s) or detector reason that refute a claim exist today."""
    kind, *names = what
    if kind == "reason":
        return all(n in operating_while_barred.REASONS + driver_not_allowed.REASONS for n in names)
    columns = {
        "links": LINK_FILE_COLUMNS,
        "drivers": DRIVER_FILE_COLUMNS,
        "fleet": FLEET_REGISTRY_COLUMNS,
    }[kind]
    return all(n in columns for n in names)


def _stale(why: str) -> list[str]:
    return [claim for claim, what in STALE_CLAIMS.items() if claim in why.lower() and _kept(what)]


class TestFallbacksAreTrueToday:
    def test_every_refuting_column_exists(self) -> None:
        """Each stale claim names a column or reason the registry really keeps (no dead entry)."""
        assert [c for c, what in STALE_CLAIMS.items() if not _kept(what)] == []

    def test_the_check_catches_a_stale_why(self) -> None:
        """A why saying the registry keeps no drivers is flagged."""
        old = (
            "o cadastro não guarda os condutores vinculados a cada prefixo (titular, auxiliares, "
            "datas): sem ele, o driver_id das posições não prova condutor não autorizado"
        )
        assert _stale(old) == ["não guarda os condutores vinculados"]
        assert _stale("conduta pessoal do condutor: constatação em campo") == []

    @pytest.mark.parametrize("path", LISTS, ids=lambda p: p.stem)
    def test_no_fallback_denies_what_the_registry_keeps(self, path: Path) -> None:
        """No fallback why (covered or not) claims the registry lacks data it now keeps."""
        stale = {p.cite: _stale(p.why) for p in read_provisions(path).provisions if p.why}
        assert {k: v for k, v in stale.items() if v} == {}

    def test_registry_provisions_are_covered(self) -> None:
        """Provisions the drivers and vehicle registry evidence derive covered (via same_as)."""
        pb, pv, fr = ("4314548", "taxi"), ("1100205", "taxi"), ("4314902", "fretamento")
        assert _status(pb, "14", None, None) == "coberto"
        assert _status(pb, "44", None, "XV") == "coberto"
        assert _status(pb, "45", None, "VIII") == "coberto"
        assert _status(pv, "43", None, None) == "coberto"
        assert _status(fr, "8", None, "VII") == "coberto"
        assert _status(fr, "8", None, "VIII") == "coberto"
        assert _status(POA, "33", "6", None) == "coberto"
        assert _status(pb, "32", None, "III") == "coberto"  # auxiliary_only

    def test_permission_to_drive_is_not_in_the_registry(self) -> None:
        """Fretamento art. 3º § 3º II: no driver column tells a permissão para dirigir apart."""
        assert not [c for c in DRIVER_FILE_COLUMNS if "permiss" in c or "first_licen" in c]
        entry = next(
            p
            for p in bundled_provisions()[("4314902", "fretamento")].provisions
            if p.cite == "art. 3º, § 3º, II"
        )
        assert entry.why is not None and "permissão para dirigir" in entry.why
        assert _status(("4314902", "fretamento"), "3", "3", "II") == "não detectável"
