"""Regenerate the coverage table of README.md and docs/cobertura.md from the rulebooks.

Run after changing a rulebook or a provision list (tests/enforcement/test_coverage.py fails
until the committed files equal the generated ones)::

    .venv/bin/python scripts/gen_coverage.py
"""

from __future__ import annotations

from pathlib import Path

from enforcement.coverage import coverage_document, replace_readme_summary

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    """Write docs/cobertura.md and the README's coverage block."""
    (ROOT / "docs" / "cobertura.md").write_text(coverage_document(), encoding="utf-8")
    readme = ROOT / "README.md"
    readme.write_text(replace_readme_summary(readme.read_text(encoding="utf-8")), "utf-8")


if __name__ == "__main__":
    main()
