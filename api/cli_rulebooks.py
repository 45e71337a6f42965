"""`pontual rulebooks`: what each bundled rulebook makes of each finding kind."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from api.inputs import checked_municipality

if TYPE_CHECKING:
    from enforcement.coverage import Coverage
    from enforcement.rulebook import Rule, Rulebook


def rulebooks(
    municipality: Annotated[
        str | None,
        typer.Option(
            help="Código IBGE (padrão: todos os regulamentos incluídos).",
            callback=checked_municipality,
        ),
    ] = None,
    markdown: Annotated[bool, typer.Option("--markdown", help="Tabela em Markdown.")] = False,
) -> None:
    """Mostra, por regulamento, o dispositivo, a gravidade e a multa de cada tipo de achado.

    A última coluna diz o que o agente responde ao confirmar (exceção do dispositivo, pontuação
    a escolher) e o que um achado precisa para virar proposta (piso de confiança, repetição);
    os tipos deixados sem regra aparecem com o motivo, e os casos que só vão para revisão com o
    dispositivo a ponderar e o motivo. Depois, a cobertura de cada texto: com
    --markdown, todos os dispositivos que tipificam infração ou fixam obrigação de operação, cada
    um coberto (por quais regras), não detectável por GPS/cadastro ou em que não se aplica (por
    quê); sem --markdown, as contagens.
    """
    from enforcement.coverage import SERVICE_NAMES, counts, coverage_markdown, is_off
    from enforcement.proposals import format_fine
    from enforcement.rulebook import bundled_rulebooks, rulebooks_for

    books = (
        list(rulebooks_for(municipality).values())
        if municipality
        else list(bundled_rulebooks().values())
    )
    header = (
        "município",
        "serviço",
        "achado",
        "caso",
        "dispositivo",
        "gravidade",
        "multa",
        "na confirmação e antes da proposta",
    )
    rows: list[tuple[str, ...]] = []
    for book in books:
        where = f"{book.municipality_name} ({book.municipality})"
        for rule in book.rules:
            grav = book.gravities.get(rule.gravity or "")
            fine = rule.fine or (grav.fine if grav else None)
            fine_text = format_fine(float(fine.amount), fine.unit) if fine else "—"
            if fine and grav and grav.fine_from_incidence > 1:
                fine_text += f" (a partir da {grav.fine_from_incidence}ª)"
            if fine and grav and grav.fine_progression == "double":
                fine_text += " (dobra na reincidência)"
            case = rule.case
            rows.append(
                (
                    where,
                    book.service,
                    _kind(rule.kind),
                    case or "—",
                    rule.provision,
                    rule.gravity or ("por regulamento" if book.gravity_set_by_regulation else "—"),
                    fine_text,
                    _conditions(book, rule),
                )
            )
        for kind, reason in book.uncovered.items():
            rows.append(
                (where, book.service, _kind(kind), "—", f"sem proposta: {reason}", "—", "—", "—")
            )
        for c in book.review:
            listed = f"só revisão ({c.provision}): {c.reason}"
            rows.append((where, book.service, _kind(c.kind), c.case, listed, "—", "—", "—"))
    if markdown:
        typer.echo("| " + " | ".join(header) + " |")
        typer.echo("|" + "---|" * len(header))
        for r in rows:
            typer.echo("| " + " | ".join(str(x).replace("|", "\\|") for x in r) + " |")
        for book, items in _coverage(books):
            typer.echo("")
            typer.echo(coverage_markdown(book, items), nl=False)
        return
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    for r in (header, *rows):
        typer.echo("  ".join(str(x).ljust(w) for x, w in zip(r, widths, strict=True)).rstrip())
    covered = _coverage(books)
    if covered:
        typer.echo("")
        typer.echo("Cobertura dos dispositivos (lista completa com --markdown):")
    for book, items in covered:
        n = counts(items)
        off = sum(is_off(book, c) for c in items)
        off_text = f" ({off} só com um limite informado em --thresholds)" if off else ""
        typer.echo(
            f"  {book.municipality_name} ({book.municipality}), {SERVICE_NAMES[book.service]}: "
            f"{len(items)} dispositivos, {n['coberto']} cobertos{off_text}, "
            f"{n['não detectável']} não detectáveis por GPS/cadastro, "
            f"{n['não se aplica']} em que não se aplica"
        )
    limits = [line for book in books for line in _law_limits(book)]
    if limits:
        typer.echo("")
        typer.echo("Limites que a lei fixa para os detectores:")
        for line in limits:
            typer.echo(line)


def _law_limits(book: Rulebook) -> list[str]:
    """Say, per detector, the limits the rulebook's law fixes and how a run gets them."""
    from enforcement.coverage import SERVICE_NAMES

    how = (
        "pontual analyze --municipality e a detecção ao vivo os aplicam; --thresholds os substitui"
        if book.service == "taxi"
        else "pontual analyze --municipality aplica os do táxi: numa análise de frota de "
        f"{SERVICE_NAMES[book.service]}, informe-os em --thresholds"
    )
    where = f"{book.municipality_name} ({book.municipality}), {SERVICE_NAMES[book.service]}"
    return [
        f"  {where}: [{kind}] "
        + ", ".join(f"{k} = {_toml(v)}" for k, v in values.items())
        + f" ({book.threshold_provision(kind)}); {how}"
        for kind, values in book.thresholds().items()
    ]


def _toml(value: object) -> str:
    """Write a threshold's value as in a --thresholds file."""
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return f"[{len(value)} faixas]"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return str(value)


def _coverage(books: list[Rulebook]) -> list[tuple[Rulebook, list[Coverage]]]:
    """Coverage of the given rulebooks that have a provision list."""
    from enforcement.coverage import bundled_provisions, coverage

    lists = bundled_provisions()
    return [
        (b, coverage(b, lists[(b.municipality, b.service)]))
        for b in books
        if (b.municipality, b.service) in lists
    ]


def _kind(kind: str) -> str:
    """Name a finding kind for people, with the code the thresholds' TOML tables use."""
    from tracking.detectors.findings import kind_name

    return f"{kind_name(kind)} ({kind})"


def _conditions(book: Rulebook, rule: Rule) -> str:
    """Say what the agent answers on confirming and what a finding needs to be proposed."""
    from enforcement.coverage import unset_limit

    out = []
    if rule.exception is not None:
        out.append(f"responder à exceção '{rule.exception.excerpt}'")
    if rule.pontuacao_choices:
        out.append(f"escolher a pontuação ({' ou '.join(rule.pontuacao_choices)})")
    if rule.repetition is not None:
        rep = rule.repetition
        text = f"só repetido ({rep.min_findings} em {rep.window_hours:g} h)"
        if rep.min_duration_s is not None:
            text += f" ou persistente (≥ {rep.min_duration_s:g} s)"
        out.append(text)
    if rule.citation_uncertain:
        out.append(rule.citation_uncertain.split(":")[0])
    if (limit := unset_limit(book, rule)) is not None:
        out.append(f"só com um limite em --thresholds ([{rule.kind}] {limit}), que a lei não fixa")
    floor = max(book.floor_for(rule.kind), rule.confidence_min)
    out.append(f"confiança ≥ {floor:g}")
    return "; ".join(out)
