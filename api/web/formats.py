"""How numbers, dates and durations are written to people on the console's pages (pt-BR)."""

from __future__ import annotations

import datetime as dt
import math
import unicodedata
from zoneinfo import ZoneInfo

from api.audit import READ_PERSONAL_DATA
from geo.calendar import brasilia_time

NONE = "—"


MAX_DIGITS = 18
"""Most digits of a count or an id read from an address (a signed 64-bit integer holds 18)."""


def digits(text: str) -> bool:
    """Tell whether ``text`` is ASCII digits only: what ``int`` reads as a count or an id.

    ``str.isdigit`` also accepts "²" and "①", which ``int`` refuses; more than
    :data:`MAX_DIGITS` digits is no count (and ``int`` refuses 4,300).
    """
    return len(text) <= MAX_DIGITS and text.isascii() and text.isdigit()


def integer(value: int | None) -> str:
    """``1234567`` → ``"1.234.567"``; None → ``"—"``."""
    if value is None:
        return NONE
    return f"{int(value):,}".replace(",", ".")


def decimal(value: float | None, *, digits: int = 1) -> str:
    """``1234.56`` → ``"1.234,6"`` (``digits`` after the comma); None or NaN → ``"—"``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NONE
    text = f"{value:,.{digits}f}"
    return text.replace(",", "_").replace(".", ",").replace("_", ".")


def percent(share: float | None) -> str:
    """``0.2`` → ``"20%"`` (whole percent); None or NaN → ``"—"``."""
    if share is None or (isinstance(share, float) and math.isnan(share)):
        return NONE
    return f"{round(share * 100):d}%"


def date(value: dt.date | None) -> str:
    """``2024-03-04`` → ``"04/03/2024"``; None → ``"—"``."""
    if value is None:
        return NONE
    return value.strftime("%d/%m/%Y")


def iso_date(value: str | dt.date | None) -> str:
    """``"2024-03-04"`` (a plan's JSON day) or a date → ``"04/03/2024"``; None or '' → ``"—"``."""
    if not value:
        return NONE
    return date(value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value)[:10]))


def clock(value: dt.datetime, *, timezone: str) -> str:
    """Say the local time of an instant, ``"14:05"``."""
    return value.astimezone(ZoneInfo(timezone)).strftime("%H:%M")


def clock_s(value: dt.datetime, *, timezone: str) -> str:
    """Say the local time of an instant with seconds, ``"14:05:09"``."""
    return value.astimezone(ZoneInfo(timezone)).strftime("%H:%M:%S")


def local_datetime(value: dt.datetime, *, timezone: str) -> str:
    """Say the local date and time of an instant, ``"04/03/2024 14:05"``."""
    return value.astimezone(ZoneInfo(timezone)).strftime("%d/%m/%Y %H:%M")


def duration(seconds: float) -> str:
    """Say a wait or a stay: ``"menos de 1 min"``, ``"12 min"``, ``"1 h 05 min"``."""
    minutes = int(seconds // 60)
    if minutes < 1:
        return "menos de 1 min"
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def file_size(size: int) -> str:
    """Say a file's size as people read it: ``"1,9 MB"``, ``"340 KB"``, ``"512 bytes"``.

    MB and KB are of 1024 (as the browsers and file managers count); rounded down, so that a
    limit is never said larger than it is.
    """
    if size >= 1024 * 1024:
        tenths = size * 10 // (1024 * 1024)
        return f"{tenths // 10},{tenths % 10} MB"
    if size >= 1024:
        return f"{size // 1024} KB"
    return f"{size} bytes" if size != 1 else "1 byte"


def zone_label(zone: str) -> str:
    """Name a time zone for people: "horário de Brasília" (UTC−3), else "UTC−4" and so on.

    The pages said the IANA name (``America/Sao_Paulo``); Brazil has had no daylight saving
    time since 2019, so the current offset names the zone.
    """
    now = dt.datetime.now(ZoneInfo(zone))
    if brasilia_time(zone, now):
        return "horário de Brasília"
    hours = (now.utcoffset() or dt.timedelta(0)).total_seconds() / 3600
    sign = "+" if hours >= 0 else "−"
    return f"UTC{sign}{abs(hours):g}"


def plural(count: int, one: str, many: str, *, none: str | None = None) -> str:
    """Say a counted noun, agreeing in number: the one helper for counts on the pages.

    Parameters
    ----------
    count : int
    one : str
        The words after the number when ``count`` is 1 (``"proposta nova gerada"``).
    many : str
        The words after the number otherwise (``"propostas novas geradas"``); 0 takes them too.
    none : str, optional
        The whole text for 0, instead of the number (``"nenhuma proposta nova gerada"``).

    Examples
    --------
    >>> plural(1, "veículo", "veículos")
    '1 veículo'
    >>> plural(1234, "veículo", "veículos")
    '1.234 veículos'
    >>> plural(0, "conta", "contas", none="nenhuma conta")
    'nenhuma conta'
    """
    if count == 0 and none is not None:
        return none
    return f"{integer(count)} {one if count == 1 else many}"


ACTIONS = {
    "create": "criação",
    "update": "alteração",
    "import": "importação",
    "retire": "desativação",
    "disable": "desativação",
    "revoke": "revogação",
    "grant": "concessão",
    "exclude": "exclusão do ponto",
    "end": "encerramento",
    "end_term": "fim do mandato",
    "elect": "eleição",
    "homologate": "homologação",
    "set_role": "papel alterado",
    "set_password": "senha alterada",
    "confirm": "auto lavrado",
    "dismiss": "proposta descartada",
    "notify": "notificação entregue",
    "file_defence": "defesa apresentada",
    "decide_defence": "defesa julgada",
    "notify_decision": "decisão notificada",
    "finalize": "decisão definitiva",
    "archive": "arquivamento",
    "fix_retention": "retenção aplicada",
    "fix_retention_dry_run": "retenção simulada",
    READ_PERSONAL_DATA: "leitura de dados pessoais",
}
"""pt-BR names of the audited actions (a code without one is shown as written)."""


def actor_label(actor: str) -> str:
    """Who acted, written one way: ``user:ana`` → ``ana``, ``os:root`` → ``root (linha de …)``."""
    kind, sep, name = actor.partition(":")
    if sep and kind == "user":
        return name
    if sep and kind == "os":
        return f"{name} (linha de comando)"
    return actor


FIELD_LABELS = {
    "acao": "Ação", "address": "Endereço", "as_of": "Data do arquivo", "ate": "Até",
    "ator": "Quem", "capacity": "Vagas", "cnh_category": "Categoria da CNH",
    "cnh_number": "Número da CNH", "cnh_valid_until": "CNH válida até", "de": "De",
    "decisao": "Decisão", "document": "Documento", "driver_id": "Identificador do condutor",
    "entidade": "Entidade", "envio": "Envio", "fim_prazo": "Fim do prazo",
    "finding_id": "Identificador do achado", "proposal_id": "Identificador da proposta",
    "full_name": "Nome completo", "fundamentacao": "Fundamentação", "ground": "Fundamento",
    "ictp_valid_until": "ICTP válida até", "id_prefix": "Prefixo dos stand_id",
    "kind": "Tipo", "label": "Descrição", "lat": "Latitude", "lon": "Longitude",
    "mode": "Forma do ponto", "motivo": "Motivo", "municipality": "Município",
    "municipality_code": "Município (código IBGE)", "municipio": "Município", "name": "Nome",
    "note": "Observação", "on": "Data", "pagina": "Página", "password": "Senha",
    "password_mode": "Senha", "password_repeat": "Repita a senha", "pontuacao": "Pontuação",
    "q": "Busca", "radius_m": "Raio (m)", "reason": "Motivo",
    "resposta_excecao": "Resposta à exceção", "retire_missing": "Desativar ausentes",
    "role": "Papel", "stand_id": "Identificador do ponto", "stands": "Pontos do supervisor",
    "status": "Situação", "synthetic": "Dados fictícios", "texto": "Texto", "until": "Até",
    "username": "Usuário", "valid_from": "Desde", "valid_until": "Até",
    "vehicle_id": "Prefixo", "vertices": "Vértices", "volta": "Retorno",
    "geometry": "Área do ponto", "tipo": "Tipo", "situacao": "Situação", "ponto": "Ponto",
    "veiculo": "Veículo", "confianca": "Confiança mínima", "desde": "Desde",
    "prefixo": "Prefixo",
}  # fmt: skip
"""The console's form and query fields by their pt-BR label (the forms' own wording)."""


def field_label(name: str) -> str:
    """Return a form field's pt-BR label (:data:`FIELD_LABELS`), else its name."""
    return FIELD_LABELS.get(name, name)


def clipped(value: str, limit: int = 40) -> str:
    r"""Quote an echoed input, cut to ``limit`` characters ("…" marking the cut).

    Control characters are shown escaped (``\x00``), so that "2 " or "2\x00" is not read as
    the stand "2".
    """
    shown = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in value[:limit])
    return f"“{shown if len(value) <= limit else shown[: limit - 1] + '…'}”"


def plain(value: str) -> str:
    """Fold case, accents and blanks, so that "praca" finds "Praça" and "SAO" finds "São"."""
    folded = unicodedata.normalize("NFKD", value.casefold())
    return " ".join("".join(c for c in folded if not unicodedata.combining(c)).split())
