"""`pontual rulebooks`: what each bundled rulebook makes of each finding kind."""

from __future__ import annotations

from typing import Annotated

import typer


def rulebooks(
    municipality: Annotated[
        str | None, typer.Option(help="Código IBGE (padrão: todos os regulamentos incluídos).")
    ] = None,
    markdown: Annotated[bool, typer.Option("--markdown", help="Tabela em Markdown.")] = False,
) -> None:
    """Mostra, por regulamento, o dispositivo, a gravidade e a multa de cada tipo de achado."""
    from enforcement.proposals import format_fine
    from enforcement.rulebook import bundled_rulebooks, rulebooks_for

    books = (
        list(rulebooks_for(municipality).values())
        if municipality
        else list(bundled_rulebooks().values())
    )
    header = ("município", "serviço", "achado", "caso", "dispositivo", "gravidade", "multa")
    rows = []
    for book in books:
        for rule in book.rules:
            grav = book.gravities.get(rule.gravity or "")
            fine = rule.fine or (grav.fine if grav else None)
            fine_text = format_fine(float(fine.amount), fine.unit) if fine else "—"
            if fine and grav and grav.fine_from_incidence > 1:
                fine_text += f" (a partir da {grav.fine_from_incidence}ª)"
            if fine and grav and grav.fine_progression == "double":
                fine_text += " (dobra na reincidência)"
            case = ", ".join(
                f"{k}={v if isinstance(v, str) else '|'.join(v)}" for k, v in rule.when.items()
            )
            rows.append(
                (
                    f"{book.municipality_name} ({book.municipality})",
                    book.service,
                    rule.kind,
                    case or "—",
                    rule.provision,
                    rule.gravity or ("por regulamento" if book.gravity_set_by_regulation else "—"),
                    fine_text,
                )
            )
    if markdown:
        typer.echo("| " + " | ".join(header) + " |")
        typer.echo("|" + "---|" * len(header))
        for r in rows:
            typer.echo("| " + " | ".join(r) + " |")
        return
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    for r in (header, *rows):
        typer.echo("  ".join(str(x).ljust(w) for x, w in zip(r, widths, strict=True)).rstrip())
