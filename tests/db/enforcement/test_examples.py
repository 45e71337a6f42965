"""docs/examples: written by the real review workflow, identical to the committed files."""

from __future__ import annotations

import io
from pathlib import Path

from pypdf import PdfReader

from db.enforcement.examples import FILES
from enforcement.rulebook import normalize_whitespace

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"


class TestExamples:
    def test_command_writes_the_committed_files(self, run_pontual, database_url, tmp_path):
        """`pontual proposals examples` regenerates docs/examples byte for byte: the committed
        auto and notificação come from the code and cannot drift from it."""
        done = run_pontual(
            "proposals", "examples", "--out", str(tmp_path), DATABASE_URL=database_url
        )
        assert done.returncode == 0, done.stderr
        for name in FILES:
            assert (tmp_path / name).read_bytes() == (EXAMPLES / name).read_bytes(), name
        leftovers = {p.name for p in tmp_path.iterdir()} - set(FILES)
        assert leftovers == set()

    def test_defence_deadline_counts_business_days(self):
        """The example's defence period is the rulebook's 30 business days (PB art. 53, CPC),
        from the notification on 24/03/2025: 08/05/2025, not the 30 calendar days' 23/04."""
        text = normalize_whitespace((EXAMPLES / "auto-de-infracao-exemplo.html").read_text())
        assert "30 dias úteis da notificação (art. 53): até 08/05/2025 23:59:59" in text
        assert "23/04/2025" not in text

    def test_notificacao_holds_the_art_38_fields(self):
        """PB art. 38: permissionário, número da permissão, the provision and its text, in PDF
        and HTML."""
        html = normalize_whitespace(
            (EXAMPLES / "notificacao-de-penalidade-exemplo.html").read_text()
        )
        reader = PdfReader(
            io.BytesIO((EXAMPLES / "notificacao-de-penalidade-exemplo.pdf").read_bytes())
        )
        pdf = normalize_whitespace(" ".join(page.extract_text() for page in reader.pages))
        for text in (html, pdf):
            assert "NOTIFICAÇÃO DE PENALIDADE" in text.upper()
            assert "Nome do permissionário" in text and "Maria Exemplo Rossi" in text
            assert "Nº da permissão" in text and "007/2016" in text
            assert "Dispositivo infringido" in text and "art. 25, III" in text
            assert "Seguir itinerário mais extenso e/ou desnecessário" in text
            assert "Resposta do agente:" in text  # the exception, answered
            assert "auto AI-4314548-2024-000001 de 12/08/2024" in text  # the earlier auto
