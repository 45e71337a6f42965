import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from enforcement._errors import RulebookError, UnknownMunicipalityError
from enforcement.rulebook import (
    RULEBOOK_DIR,
    auxiliary_cap,
    bundled_rulebooks,
    excerpts,
    normalize_whitespace,
    read_rulebook,
    rulebooks_for,
)

BUNDLED = sorted(RULEBOOK_DIR.glob("*.toml"))
EXPECTED = {
    ("4314902", "taxi"),
    ("4314902", "fretamento"),
    ("4314548", "taxi"),
    ("1100205", "taxi"),
}


class TestBundledRulebooks:
    def test_one_per_municipality_and_service(self) -> None:
        """Porto Alegre (taxi and fretamento), Pinto Bandeira and Porto Velho are bundled."""
        assert set(bundled_rulebooks()) == EXPECTED

    @pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
    def test_every_excerpt_occurs_in_its_law(self, path: Path) -> None:
        """Every excerpt is the law's own words, after whitespace is normalised."""
        book = read_rulebook(path)
        law = normalize_whitespace(book.law_text())
        found = excerpts(book)
        assert len(found) >= len(book.rules)
        missing = [where for where, text in found if normalize_whitespace(text) not in law]
        assert missing == []

    @pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
    def test_file_name_is_municipality_and_service(self, path: Path) -> None:
        """``<IBGE>-<service>.toml`` names what the file holds."""
        book = read_rulebook(path)
        assert path.stem == f"{book.municipality}-{book.service}"

    @pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
    def test_fallback_rules_come_last(self, path: Path) -> None:
        """A rule without ``when`` never hides a more specific rule of its kind after it."""
        book = read_rulebook(path)
        for i, rule in enumerate(book.rules):
            if not rule.when:
                later = [r for r in book.rules[i + 1 :] if r.kind == rule.kind]
                assert later == [], rule.provision

    @pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
    def test_notes_name_no_command_line_option(self, path: Path) -> None:
        """Notes and reasons reach the console's agents and planners, who run no command: they
        say what the regulator fixes in words (``pontual rulebooks`` gives the options)."""
        found = [
            (where, text)
            for where, text in _texts(read_rulebook(path), path.stem)
            if where.rsplit(".", 1)[-1].endswith(("note", "reason")) or ".uncovered." in where
            if _COMMAND_LINE.search(text)
        ]
        assert found == []

    @pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
    def test_rule_notes_name_no_field_of_the_finding(self, path: Path) -> None:
        """A rule's notes reach the agent beside the evidence, which shows pt-BR labels: they
        name what the evidence shows in words, never a ``details`` key or a code."""
        found = [
            (where, word)
            for where, text in _texts(read_rulebook(path), path.stem)
            if ".rules[" in where and ".when." not in where
            if where.rsplit(".", 1)[-1].endswith(("note", "reason"))
            for word in _FIELD.findall(text)
        ]
        assert found == []

    def test_the_residual_infraction_carries_its_measure(self) -> None:
        """Porto Alegre art. 57, XI ('quando não tipificada infração específica'), b: 'Medida
        administrativa: conforme o caso, aquelas previstas no art. 58, II, da Lei nº 11.582':
        every rule penalised under it prints that measure, never 'nenhuma'."""
        book = bundled_rulebooks()[("4314902", "taxi")]
        residual = [
            r
            for r in book.rules
            if re.search(r"57, XI\b", f"{r.provision} {r.penalty_provision or ''}")
        ]
        assert len(residual) == 3
        assert {(r.measure_provision, "art. 58, II" in (r.measure or "")) for r in residual} == {
            ("art. 57, XI, b", True)
        }

    def test_porto_velho_gravity_is_set_by_regulation(self) -> None:
        """Porto Velho's law leaves gravities to a decree: its rules say so instead."""
        book = bundled_rulebooks()[("1100205", "taxi")]
        assert book.gravity_set_by_regulation
        assert book.rules
        assert all(r.gravity is None for r in book.rules)
        assert all(r.fine is None for r in book.rules)

    def test_excerpt_check_catches_a_changed_word(self, tmp_path: Path) -> None:
        """A paraphrase is not an excerpt: the check that guards the rulebooks can fail."""
        src = (RULEBOOK_DIR / "4314548-taxi.toml").read_text(encoding="utf-8")
        book = read_rulebook(RULEBOOK_DIR / "4314548-taxi.toml")
        first = book.rules[0].excerpt
        words = first.split()
        changed = src.replace(words[-1], words[-1] + "x", 1)
        path = tmp_path / "4314548-taxi.toml"
        path.write_text(changed, encoding="utf-8")
        law = normalize_whitespace(book.law_text())
        bad = [w for w, t in excerpts(read_rulebook(path)) if normalize_whitespace(t) not in law]
        assert bad


_COMMAND_LINE = re.compile(r"(?<![\w-])--[a-z]|\bpontual [a-z]")
"""A command-line option (``--thresholds``) or command (``pontual proposals finalize``)."""
_FIELD = re.compile(r"\bdetails\.|\b[a-z0-9]+(?:_[a-z0-9]+)+\b")
"""A ``details`` key or code as the files write it (``details.use``, ``licence_ended``)."""


def _texts(value: Any, where: str) -> list[tuple[str, str]]:
    """Every string of a rulebook (models, tables, lists) with where it is."""
    if isinstance(value, BaseModel):
        value = {k: getattr(value, k) for k in type(value).model_fields}
    if isinstance(value, str):
        return [(where, value)]
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in _texts(v, f"{where}.{k}")]
    if isinstance(value, tuple | list):
        return [t for i, v in enumerate(value) for t in _texts(v, f"{where}[{i}]")]
    return []


class TestReadRulebook:
    def test_invalid_toml_names_the_file(self, tmp_path: Path) -> None:
        """Broken TOML is a RulebookError naming the file."""
        path = tmp_path / "x.toml"
        path.write_text("schema = [", encoding="utf-8")
        with pytest.raises(RulebookError, match="x.toml: TOML inválido"):
            read_rulebook(path)

    def test_unknown_kind_names_the_field(self, tmp_path: Path) -> None:
        """A rule for a kind that is not a finding kind is refused, naming where."""
        src = (RULEBOOK_DIR / "4314548-taxi.toml").read_text(encoding="utf-8")
        path = tmp_path / "bad.toml"
        path.write_text(src.replace('kind = "longer_route"', 'kind = "speeding"', 1), "utf-8")
        with pytest.raises(RulebookError, match=r"bad.toml: rules\.\d+.*speeding"):
            read_rulebook(path)


class TestDetectorThresholds:
    def test_law_limits_of_the_bundled_rulebooks(self) -> None:
        """Pinto Bandeira (art. 10, 32 VII; 20 September, RS's data magna, a day of Bandeira 2)
        and fretamento (arts. 12 to 14) fix limits; the Porto Alegre taxi decree extends the
        ICTP 30 days (art. 5º § 2º) and punishes inactivity over 60 days (art. 60 X); the Porto
        Velho law extends the CNH through the CTB (art. 9º X).
        Porto Velho (art. 43 § 1º) and Pinto Bandeira (art. 14) cap the auxiliares at two; Porto
        Alegre's decree sets no cap."""
        books = bundled_rulebooks()
        assert books[("4314548", "taxi")].thresholds() == {
            "driver_not_allowed": {"max_auxiliaries": 2},
            "flag2_misuse": {"holidays": ["09-20"]},
            "operating_while_barred": {
                "max_vehicle_age_years": 5,
                "vehicle_age_counted_from": "manufacture",
                "max_inspection_age_days": 365,
            },
        }
        fretamento = books[("4314902", "fretamento")].thresholds()["operating_while_barred"]
        assert fretamento["vehicle_age_counted_from"] == "first_registration"
        assert (fretamento["max_vehicle_age_years"], fretamento["max_substitution_days"]) == (
            15,
            30,
        )
        assert books[("4314902", "taxi")].thresholds() == {
            "driver_not_allowed": {"ictp_grace_days": 30},
            "inactivity": {"max_idle_days": 60},
        }
        assert books[("1100205", "taxi")].thresholds() == {
            "driver_not_allowed": {"cnh_grace_days": 30, "max_auxiliaries": 2}
        }
        assert auxiliary_cap("4314902") is None and auxiliary_cap(None) is None
        found = auxiliary_cap("4314548")
        assert found is not None and (found[0].max, found[0].provision, found[1]) == (
            2,
            "art. 14",
            "Pinto Bandeira",
        )

    @pytest.mark.parametrize(
        ("old", "new", "match"),
        [
            ("max_inspection_age_days = 365", "max_inspection_days = 365", "max_inspection_days"),
            ('provision = "art. 10; art. 32, VII"\n', "", "'provision'"),
        ],
    )
    def test_bad_table_is_refused(self, tmp_path: Path, old: str, new: str, match: str) -> None:
        """An unknown threshold or a table without its article is refused."""
        src = (RULEBOOK_DIR / "4314548-taxi.toml").read_text(encoding="utf-8")
        assert old in src
        path = tmp_path / "bad.toml"
        path.write_text(src.replace(old, new, 1), "utf-8")
        with pytest.raises(RulebookError, match=match):
            read_rulebook(path)

    def test_analyze_merges_the_run_thresholds_over_the_law(self) -> None:
        """``--thresholds`` overrides the taxi rulebook's limits; the fretamento ones are not
        applied to a taxi run."""
        from api.cli_analyze import law_thresholds

        books = rulebooks_for("4314548")
        merged = law_thresholds(books, {"operating_while_barred": {"max_inspection_age_days": 400}})
        assert merged["operating_while_barred"]["max_inspection_age_days"] == 400
        assert merged["operating_while_barred"]["max_vehicle_age_years"] == 5
        assert law_thresholds(rulebooks_for("4314902"), {}) == {
            "driver_not_allowed": {"ictp_grace_days": 30},
            "inactivity": {"max_idle_days": 60},
        }

    def test_a_municipal_holiday_given_is_added_to_the_law_s(self) -> None:
        """Pinto Bandeira's 22 October given with ``--thresholds`` keeps the state's 20
        September (it replaced it, and a Bandeira 2 on 20 September was proposed)."""
        from api.cli_analyze import law_thresholds

        merged = law_thresholds(
            rulebooks_for("4314548"), {"flag2_misuse": {"holidays": ["10-22", "09-20"]}}
        )
        assert merged["flag2_misuse"]["holidays"] == ["09-20", "10-22"]


class TestRulebooksFor:
    def test_porto_alegre_has_two_services(self) -> None:
        """Porto Alegre's taxi decree and its fretamento decree."""
        assert set(rulebooks_for("4314902")) == {"taxi", "fretamento"}

    def test_unknown_code_lists_the_configured(self) -> None:
        """An unknown municipality is a clear error listing the configured ones."""
        with pytest.raises(UnknownMunicipalityError, match="nenhum regulamento.*4314548"):
            rulebooks_for("3550308")


class TestAccessibleHabitualAbsence:
    def test_accessible_taxi_falls_under_art_28(self) -> None:
        """POA: a Táxi Acessível's habitual absence is art. 28 § 2º (revogação da autorização)."""
        book = bundled_rulebooks()[("4314902", "taxi")]
        rule = book.rule_for("habitual_absence", {"accessible": True})
        assert rule is not None
        assert (rule.article, rule.paragraph) == ("28", "2º")
        assert rule.penalty == "revogação da autorização"

    @pytest.mark.parametrize("details", [{}, {"accessible": False}, {"accessible": "True"}])
    def test_other_vehicles_stay_under_art_49(self, details: dict[str, object]) -> None:
        """No flag, False, or a string that only looks like the flag: the general art. 49."""
        book = bundled_rulebooks()[("4314902", "taxi")]
        rule = book.rule_for("habitual_absence", details)
        assert rule is not None
        assert rule.article == "49"
