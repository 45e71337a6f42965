"""`pontual import ...` end to end, on a throwaway database and the bundled real files."""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from db.engine import create_database, drop_database, parse_url
from db.migrate import upgrade

ROOT = Path(__file__).resolve().parents[2]
POA_STANDS = ROOT / "data" / "brazil" / "taxi_stands" / "pontos_taxi_poa_2020-03-10.geojson"
POA_FLEET = ROOT / "data" / "brazil" / "taxi_fleet" / "frota_taxi_poa_2020-03-12.csv"

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def import_db(database_url: str) -> Iterator[str]:
    """A migrated database of its own: the CLI commits, the shared test database must not see it."""
    name = f"pontual_cli_{secrets.token_hex(4)}"
    url = parse_url(database_url).set(database=name).render_as_string(hide_password=False)
    create_database(url)
    try:
        upgrade(url)
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
    finally:
        drop_database(url)


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


class TestImportCommands:
    def test_registry_then_pings(self, run_pontual: Run, import_db: str, tmp_path: Path) -> None:
        """Stands, fleet and pings load, each command printing what it stored."""
        env = {"PONTUAL_DATABASE_URL": import_db}
        stands = _ok(run_pontual("import", "stands", str(POA_STANDS), **env))
        assert "379 criados" in stands
        assert "Com geometria utilizável: 364 de 379." in stands
        fleet = _ok(run_pontual("import", "fleet", str(POA_FLEET), **env))
        assert "3677 criados" in fleet and "2520 criadas" in fleet

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

    def test_missing_file_is_an_error(self, run_pontual: Run, import_db: str) -> None:
        """A stands file that does not exist ends with 'erro:' and exit 1."""
        result = run_pontual(
            "import", "stands", "nao_existe.geojson", PONTUAL_DATABASE_URL=import_db
        )
        assert result.returncode == 1
        assert "erro:" in result.stderr
