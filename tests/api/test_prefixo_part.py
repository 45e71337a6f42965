"""The prefixo filter in SQL (the fiscal's queue and alerts) and in Python (the supervisor's)
find the same prefixos."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from api.queries import prefixo_part
from api.web.supervisor import matches_prefixo

IDS = ["SIM-4227", "sim_42.27", "P%4227", "U_TAG", "4227", "AB 12-3", "X"]


@pytest.mark.parametrize("wanted", ["4227", "sim4227", "SIM 4227", " sim-42 ", "ab123", "b1", "x"])
def test_sql_and_python_agree(db_session, wanted: str) -> None:
    """Any case, any part, separators aside: the same ids either way."""
    cond, params = prefixo_part("v", wanted)
    found = db_session.execute(
        text(f"SELECT v FROM unnest(CAST(:ids AS text[])) AS t(v) WHERE {cond}"),  # noqa: S608
        {"ids": IDS, **params},
    ).scalars()
    assert set(found) == {v for v in IDS if matches_prefixo(v, wanted)}


@pytest.mark.parametrize(("wanted", "expected"), [("%", ["P%4227"]), ("_", ["U_TAG", "sim_42.27"])])
def test_wildcards_are_plain_characters(db_session, wanted: str, expected: list[str]) -> None:
    """A separator alone is matched as typed: '%' and '_' are characters, not wildcards."""
    cond, params = prefixo_part("v", wanted)
    found = db_session.execute(
        text(f"SELECT v FROM unnest(CAST(:ids AS text[])) AS t(v) WHERE {cond}"),  # noqa: S608
        {"ids": IDS, **params},
    ).scalars()
    assert set(found) == set(expected)
