"""The Administração pages' pure helpers: typed areas, pt-BR errors, the import triage."""

from __future__ import annotations

import pytest

from api.routes.stands import LicenceGrant, StandCreate
from api.web.admin_base import FormError, FormValueError, form_number, validate
from api.web.admin_imports import renumber, triage
from api.web.admin_stands import parse_vertices, vertices_text


class TestParseVertices:
    def test_lines_become_a_closed_lon_lat_ring(self) -> None:
        """'lat, lon' lines give a GeoJSON polygon in lon, lat order, closed."""
        geometry = parse_vertices("-30.0, -51.0\n-30.0, -51.1\n\n-30.1, -51.1\n")
        assert geometry == {
            "type": "Polygon",
            "coordinates": [[[-51.0, -30.0], [-51.1, -30.0], [-51.1, -30.1], [-51.0, -30.0]]],
        }

    def test_semicolons_allow_decimal_commas(self) -> None:
        """'-30,5; -51,25' is read with decimal commas."""
        ring = parse_vertices("-30,5; -51,25\n-30,6; -51,25\n-30,6; -51,35")["coordinates"][0]
        assert ring[0] == [-51.25, -30.5]

    def test_blank_is_an_empty_polygon(self) -> None:
        """No vertices: an empty polygon, for the registry to refuse with its message."""
        assert parse_vertices("  ") == {"type": "Polygon", "coordinates": []}

    def test_geojson_is_taken_as_is(self) -> None:
        """A GeoJSON object is passed through."""
        assert parse_vertices('{"type": "MultiPolygon", "coordinates": []}')["type"] == (
            "MultiPolygon"
        )

    @pytest.mark.parametrize(
        ("text", "message"),
        [("-30.0, abc", "linha 1: '-30.0, abc'"), ("1 2 3", "linha 1"), ("{nope", "GeoJSON")],
    )
    def test_bad_text_names_the_line(self, text: str, message: str) -> None:
        """A line that is not two numbers, or unreadable GeoJSON, is refused in pt-BR."""
        with pytest.raises(FormValueError, match=message):
            parse_vertices(text)

    def test_round_trip_with_the_edit_form(self) -> None:
        """A stored single polygon shows as lines that parse back to the same ring."""
        ring = [[-51.0, -30.0], [-51.1, -30.0], [-51.1, -30.1], [-51.0, -30.0]]
        text = vertices_text({"type": "MultiPolygon", "coordinates": [[ring]]})
        assert parse_vertices(text)["coordinates"] == [ring]

    def test_polygon_with_a_hole_stays_geojson(self) -> None:
        """A polygon with a hole (or several parts) is shown as GeoJSON, not lines."""
        outer = [[0, 0], [0, 1], [1, 1], [1, 0], [0, 0]]
        hole = [[0.2, 0.2], [0.2, 0.4], [0.4, 0.4], [0.2, 0.2]]
        text = vertices_text({"type": "Polygon", "coordinates": [outer, hole]})
        assert text.startswith("{")


class TestFormValues:
    @pytest.mark.parametrize(("text", "value"), [("25", 25.0), ("25,5", 25.5), (" ", None)])
    def test_numbers(self, text: str, value: float | None) -> None:
        """Decimal point or comma; blank is None."""
        assert form_number(text, field="radius_m") == value

    def test_not_a_number(self) -> None:
        """Text that is no number names itself."""
        with pytest.raises(FormValueError, match="era 'vinte'; esperado um número"):
            form_number("vinte", field="radius_m")

    def test_strict_model_errors_in_portuguese(self) -> None:
        """The API's strict model refuses a negative capacity and a missing id, in pt-BR."""
        with pytest.raises(FormError) as caught:
            validate(StandCreate, {"capacity": -1})
        assert caught.value.errors == {
            "stand_id": "campo obrigatório",
            "capacity": "deve ser no mínimo 0",
        }

    def test_registry_date_message_is_kept(self) -> None:
        """A date in year 0202 keeps the registry's own message (not pydantic's English)."""
        with pytest.raises(FormError) as caught:
            validate(LicenceGrant, {"vehicle_id": "A", "valid_from": "0202-12-01"})
        assert caught.value.errors["valid_from"].startswith(
            "'data' era 0202-12-01; esperado uma data entre 1990-01-01 e "
        )


class TestTriage:
    @staticmethod
    def checker(bad: set[int], pairs: set[frozenset[int]] = frozenset()):  # type: ignore[assignment]
        """A check failing on a bad row, or on both rows of a pair, naming the 1st of them."""
        calls: list[list[int]] = []

        def check(rows: list[int]) -> str | None:
            calls.append(rows)
            for position, row in enumerate(rows, start=1):
                if row in bad:
                    return f"arquivo.csv, linha {position}: ruim"
            for pair in pairs:
                if pair <= set(rows):
                    return "repetido"
            return None

        return check, calls

    def test_clean_file_takes_three_checks(self) -> None:
        """All rows good: the empty part, the whole, and the whole again for pairs."""
        check, calls = self.checker(set())
        result = triage(1000, check, max_checks=50)
        assert result.good == list(range(1000)) and not result.rejected
        assert len(calls) == 3

    def test_bad_rows_alone_are_found_with_their_reason(self) -> None:
        """Each bad row is rejected with the check's message; the rest is good."""
        check, _ = self.checker({3, 700})
        result = triage(1000, check, max_checks=200)
        assert sorted(result.rejected) == [3, 700]
        assert result.rejected[3] == "arquivo.csv, linha 1: ruim"
        assert result.good == [i for i in range(1000) if i not in (3, 700)]

    def test_the_later_of_a_repeated_pair_is_rejected(self) -> None:
        """Two rows failing only together: the later one goes."""
        check, _ = self.checker(set(), {frozenset({10, 600})})
        result = triage(1000, check, max_checks=200)
        assert result.rejected == {600: "repetido"}
        assert 10 in result.good

    def test_file_error_rejects_nothing_row_by_row(self) -> None:
        """A file the reader refuses even empty is refused whole."""
        result = triage(5, lambda rows: "coluna ausente", max_checks=50)
        assert result.file_error == "coluna ausente" and not result.good and not result.rejected

    def test_too_many_bad_rows_refuse_the_file(self) -> None:
        """Past the checks' budget the file is refused whole, in pt-BR."""
        check, _ = self.checker(set(range(0, 1000, 2)))
        result = triage(1000, check, max_checks=100)
        assert result.file_error is not None and "muitas linhas rejeitadas" in result.file_error


class TestRenumber:
    def test_part_positions_become_file_rows(self) -> None:
        """'linha 2' of a part made of file rows 5 and 9 is the file's row 10."""
        assert renumber("f.csv, linha 2: x", [4, 9]) == "f.csv, linha 10: x"

    def test_lists_and_features(self) -> None:
        """Lists of positions and GeoJSON features are renumbered too."""
        message = "stand_id duplicado em 'p.geojson': 'A' (feições 1, 2)"
        assert (
            renumber(message, [6, 41]) == "stand_id duplicado em 'p.geojson': 'A' (feições 7, 42)"
        )
