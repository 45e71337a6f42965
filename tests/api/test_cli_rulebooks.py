import pytest

from enforcement.proposals import format_fine


class TestRulebooksCli:
    def test_table_of_one_municipality(self, run_pontual) -> None:
        """Pinto Bandeira's table names the provision, gravity and fine of each kind."""
        done = run_pontual("rulebooks", "--municipality", "4314548", "--markdown")
        assert done.returncode == 0, done.stderr
        line = next(r for r in done.stdout.splitlines() if "(queue_jump) |" in r)
        assert "art. 24, II" in line and "média" in line and "R$ 507,00 (a partir da 2ª)" in line
        assert "4314902" not in done.stdout

    def test_markdown_says_what_changed_in_the_legal_layer(self, run_pontual) -> None:
        """PB inactivity has no proposal (art. 32 VIII is a registry fact); exceptions, the
        pontuação to choose, POA 58 IX's repetition and PV art. 9's numbering are shown."""
        done = run_pontual("rulebooks", "--markdown")
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()

        def row(*parts: str) -> str:
            return next(r for r in lines if all(p in r for p in parts))

        pb = row("Pinto Bandeira", "(inactivity) |")
        assert "sem proposta" in pb and "art. 32, VIII" in pb and "fato do cadastro" in pb
        assert "responder à exceção 'salvo com autorização do usuário'" in row(
            "Pinto Bandeira", "(longer_route) |"
        )
        assert "escolher a pontuação (condutor ou autorizatário)" in row(
            "Porto Alegre", "reason=reserved"
        )
        assert "só repetido (5 em 1 h) ou persistente (≥ 600 s)" in row("(gps_anomaly) |")
        two = row("(gps_anomaly) | pattern=two_tracks")
        assert "só revisão (art. 59, VI): dois rastreadores sob o mesmo prefixo" in two
        assert "numeração do inciso a confirmar no texto oficial" in row("art. 9º, VIII")
        rules_table = lines[: lines.index("")] if "" in lines else lines
        assert all(r.count(" | ") == 7 for r in rules_table if r.startswith("| ")), "8 columns"

    def test_markdown_lists_every_provision(self, run_pontual) -> None:
        """After the rules, each seed's provisions with their status: POA 27 § único is not
        detectable (no passenger in the fixes), 59 XIII covered by its kind."""
        done = run_pontual("rulebooks", "--municipality", "4314902", "--markdown")
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert "## Porto Alegre (4314902), táxi" in lines
        row = next(r for r in lines if r.startswith("| art. 27, parágrafo único |"))
        assert "| não detectável por GPS/cadastro |" in row and "passageiro" in row
        row = next(r for r in lines if r.startswith("| art. 59, XIII |"))
        assert "| coberto | `unlicensed_stand_use` (subtype=boarding) |" in row

    def test_plain_text_gives_the_counts(self, run_pontual) -> None:
        """Without --markdown, one count line per rulebook of the municipality."""
        done = run_pontual("rulebooks", "--municipality", "4314548")
        assert done.returncode == 0, done.stderr
        line = next(r for r in done.stdout.splitlines() if "dispositivos," in r)
        assert line.strip().startswith(
            "Pinto Bandeira (4314548), táxi: 92 dispositivos, 17 cobertos (1 só com um limite"
        )

    def test_the_cli_says_how_a_run_gets_the_limits(self, run_pontual) -> None:
        """The hint about --thresholds is the CLI's (the rulebooks' notes are read in the
        console): a limit the law leaves open, and the fretamento limits a taxi run lacks."""
        done = run_pontual("rulebooks", "--municipality", "4314902", "--markdown")
        assert done.returncode == 0, done.stderr
        row = next(
            r for r in done.stdout.splitlines() if "| taxi |" in r and "inspection_overdue" in r
        )
        assert "só com um limite em --thresholds ([operating_while_barred] " in row
        plain = run_pontual("rulebooks", "--municipality", "4314902")
        lines = plain.stdout.splitlines()
        limits = lines[lines.index("Limites que a lei fixa para os detectores:") + 1 :]
        fretamento = next(r for r in limits if "fretamento" in r)
        assert "max_vehicle_age_years = 15" in fretamento and "(art. 12" in fretamento
        assert fretamento.endswith("informe-os em --thresholds")

    def test_the_law_limits_of_pinto_bandeira(self, run_pontual) -> None:
        """The cap on auxiliares (art. 14) is listed with its article, a list as a list."""
        done = run_pontual("rulebooks", "--municipality", "4314548")
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        limits = lines[lines.index("Limites que a lei fixa para os detectores:") + 1 :]
        assert any("[driver_not_allowed] max_auxiliaries = 2 (art. 14)" in r for r in limits)
        assert any('[flag2_misuse] holidays = ["09-20"] (art. 16)' in r for r in limits)

    def test_unknown_code(self, run_pontual) -> None:
        """An unknown code fails with one line."""
        done = run_pontual("rulebooks", "--municipality", "123")
        assert done.returncode == 1 and done.stderr.startswith("erro: código IBGE '123' inválido")

    def test_municipality_without_rulebook(self, run_pontual) -> None:
        """A real municipality without a bundled rulebook says which ones exist."""
        done = run_pontual("rulebooks", "--municipality", "3550308")
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
