"""`pontual import ...` end to end, on a throwaway database and the bundled real files."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from factories import migrated_database
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

ROOT = Path(__file__).resolve().parents[2]
POA_STANDS = ROOT / "data" / "brazil" / "taxi_stands" / "pontos_taxi_poa_2020-03-10.geojson"
POA_FLEET = ROOT / "data" / "brazil" / "taxi_fleet" / "frota_taxi_poa_2020-03-12.csv"
PORTO_STANDS = ROOT / "data" / "porto" / "derived" / "taxi_stands.csv"

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def import_db(database_url: str) -> Iterator[str]:
    """A migrated database of its own: the CLI commits, the shared test database must not see it."""
    with migrated_database(database_url, prefix="pontual_cli") as url:
        engine = create_engine(url, poolclass=NullPool)
        with engine.begin() as conn:  # `import municipalities` is covered by the fleet tests
            conn.execute(
                text(
                    "INSERT INTO municipalities (code, name, uf) "
                    "VALUES ('4314902', 'Porto Alegre', 'RS')"
                )
            )
        engine.dispose()
        yield url


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


class TestImportCommands:
    def test_registry_then_pings(self, run_pontual: Run, import_db: str, tmp_path: Path) -> None:
        """Stands, fleet and pings load, each command printing what it stored."""
        env = {"PONTUAL_DATABASE_URL": import_db}
        stands = _ok(run_pontual("import", "stands", str(POA_STANDS), **env))
        assert "379 criados" in stands
        assert "Com geometria utilizável: 363 de 379." in stands
        fleet = _ok(run_pontual("import", "fleet", str(POA_FLEET), **env))
        assert "3677 criados" in fleet and "2520 criadas" in fleet
        listed = _ok(run_pontual("stands", "list", "--municipality", "4314902", **env))
        rows = [line.split("\t") for line in listed.splitlines()[:-1]]
        assert "tipo?" not in listed and "? vaga" not in listed
        assert [r[0] for r in rows[:11]] == [str(i) for i in range(1, 12)]  # 10 after 9
        assert rows[0][2:5] == [
            "ponto fixo (tem licenças)",
            "vagas não informadas",
            "366 prefixo(s) licenciado(s)",
        ]
        unplaced = next(r for r in rows if r[0] == "441")
        assert unplaced[2] == "tipo não informado" and "sem localização" in unplaced[5]

        pings = tmp_path / "pings.csv"
        pings.write_text(
            "vehicle_id,timestamp,lat,lon,meter\n"
            "3247,2024-01-01T10:00:00Z,-30.03,-51.22,free\n"
            "3247,2024-01-01T10:00:15Z,-30.031,-51.22,busy\n",
            encoding="utf-8",
        )
        stored = _ok(run_pontual("import", "pings", str(pings), **env))
        assert "gravados: 1;" in stored and "rejeitados: 1 (1 novos" in stored
        assert "`pontual db partitions` (diário)" in stored  # a closed day: its place index

    def test_porto_csv_as_is(self, run_pontual: Run, import_db: str) -> None:
        """Porto's bundled stands CSV loads as it is; ids sort by their number (PT-2, PT-10)."""
        env = {"PONTUAL_DATABASE_URL": import_db}
        done = _ok(
            run_pontual(
                "import", "stands", str(PORTO_STANDS), "--stand-radius-m", "100",
                "--id-prefix", "PT-", **env,
            )
        )  # fmt: skip
        assert "63 criados" in done and "Com geometria utilizável: 63 de 63." in done
        ids = [line.split("\t")[0] for line in _ok(run_pontual("stands", "list", **env))
               .splitlines()[:-1]]  # fmt: skip
        assert ids[:3] == ["PT-1", "PT-2", "PT-3"] and ids.index("PT-10") == 9

    def test_bad_radius_names_the_flag(self, run_pontual: Run, import_db: str) -> None:
        """A radius that is not > 0 is refused naming --stand-radius-m."""
        done = run_pontual(
            "import", "stands", str(PORTO_STANDS), "--stand-radius-m", "0",
            PONTUAL_DATABASE_URL=import_db,
        )  # fmt: skip
        assert done.returncode == 1 and done.stderr.startswith("erro: --stand-radius-m era 0.0")

    def test_unregistered_municipality_is_named(
        self, run_pontual: Run, import_db: str, tmp_path: Path
    ) -> None:
        """A stand of a municipality the registry lacks: a pt-BR error naming the code, not the
        database's foreign-key failure; nothing is stored."""
        path = tmp_path / "pontos.csv"
        path.write_text("stand_id,lat,lon,municipality\nM1,-30.03,-51.22,1234567\n")
        done = run_pontual("import", "stands", str(path), PONTUAL_DATABASE_URL=import_db)
        assert done.returncode == 1
        assert done.stderr.startswith("erro: município '1234567' não cadastrado"), done.stderr
        assert "Traceback" not in done.stderr and "ForeignKey" not in done.stderr
        engine = create_engine(import_db, poolclass=NullPool)
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM stands")).scalar() == 0
        engine.dispose()

    def test_missing_file_is_an_error(self, run_pontual: Run, import_db: str) -> None:
        """A stands file that does not exist ends with 'erro:' and exit 1."""
        result = run_pontual(
            "import", "stands", "nao_existe.geojson", PONTUAL_DATABASE_URL=import_db
        )
        assert result.returncode == 1
        assert "erro:" in result.stderr

    def test_allowed_places(self, run_pontual: Run, import_db: str, tmp_path: Path) -> None:
        """Porto's stands as allowed places (points: the radius is asked for), then the list
        without them: retired; the command says so."""
        env = {"PONTUAL_DATABASE_URL": import_db}
        args = ["import", "allowed-places", str(PORTO_STANDS), "--actor", "t-1"]
        done = run_pontual(*args, **env)
        assert done.returncode == 1 and "--stand-radius-m" in done.stderr
        assert _ok(run_pontual(*args, "--stand-radius-m", "40", **env)).startswith(
            "Áreas de espera permitida: 63 criados, 0 atualizados, 0 inalterados, 0 desativados."
        )
        one = tmp_path / "uma.csv"
        lines = PORTO_STANDS.read_text(encoding="utf-8").splitlines()
        one.write_text("\n".join(lines[:2]) + "\n", encoding="utf-8")  # the header and one
        out = _ok(run_pontual(*args[:2], str(one), *args[3:], "--stand-radius-m", "40", **env))
        assert "0 criados, 0 atualizados, 1 inalterados, 62 desativados" in out
