import pytest

from enforcement.proposals import format_fine


class TestRulebooksCli:
    def test_table_of_one_municipality(self, run_pontual) -> None:
        """Pinto Bandeira's table names the provision, gravity and fine of each kind."""
        done = run_pontual("rulebooks", "--municipality", "4314548", "--markdown")
        assert done.returncode == 0, done.stderr
        line = next(r for r in done.stdout.splitlines() if "| queue_jump |" in r)
        assert "art. 24, II" in line and "média" in line and "R$ 507,00 (a partir da 2ª)" in line
        assert "4314902" not in done.stdout

    def test_unknown_code(self, run_pontual) -> None:
        """An unknown code fails with one line."""
        done = run_pontual("rulebooks", "--municipality", "123")
        assert done.returncode == 1 and done.stderr.startswith("erro: nenhum regulamento")


class TestFormatFine:
    @pytest.mark.parametrize(
        ("amount", "unit", "text"),
        [(1015.0, "BRL", "R$ 1.015,00"), (304.0, "BRL", "R$ 304,00"), (200.0, "UFM", "200 UFM"),
         (12.5, "UPF", "12,5 UPF")],
    )  # fmt: skip
    def test_pt_br(self, amount: float, unit: str, text: str) -> None:
        """Reais with thousands dot and decimal comma; fiscal units as numbers."""
        assert format_fine(amount, unit) == text
