"""How two systems may write the same registry id (a driver's code, a vehicle's prefixo)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from fleet._errors import FleetFileError

REGISTRY_ID_MAX_CHARS = 64
REGISTRY_ID_PATTERN = r"^[^\s/?#%,;\"\x00-\x1f\x7f]+$"
"""What a registry id (a prefixo's ``vehicle_id``, a ``driver_id``) may hold: no blank or
control character, none of ``/ ? # %`` (ids go in URLs) and no ``, ; "`` (a CSV cell broken by
a quote left open, or a file split on the wrong separator, reads as one id holding its
neighbours)."""
_REGISTRY_ID = re.compile(REGISTRY_ID_PATTERN)
_NOT_ALNUM = re.compile(r"[\W_]+")
_LEADING_ZEROS = re.compile(r"(?<!\d)0+(?=\d)")


def id_form(value: str) -> str:
    """Return the loose form of an id: case, separators and leading zeros set aside.

    Two ids of one form are the same id written otherwise, as a tracker configured apart from
    the registry writes it: ``"d-01"`` → ``"D1"``; ``"123.456.789-09"`` → ``"12345678909"``;
    ``"000123"`` → ``"123"``.
    """
    bare = _NOT_ALNUM.sub("", unicodedata.normalize("NFKC", value).upper())
    return _LEADING_ZEROS.sub("", bare)


SPELLED_OTHERWISE = (
    "o mesmo identificador escrito de outro modo (maiúsculas, separadores ou zeros à esquerda)"
)


def two_spellings(value: str, other: str, row: int) -> str:
    """Say (pt-BR) that a file writes one id two ways: ``value`` here, ``other`` at ``row``."""
    return f"{value!r} e {other!r} (linha {row}): {SPELLED_OTHERWISE}; use uma só grafia"


def form_clashes(ids: Iterable[str], known: Iterable[str]) -> dict[str, str]:
    """Map each of ``ids`` to an id of ``known`` of its :func:`id_form` written otherwise.

    ``"d1"`` against ``"D1"``, ``"0123"`` against ``"123"``: one id written two ways, which the
    registry must not hold as two (the detectors read such ids as one).
    """
    by_form: dict[str, str] = {}
    for seen in known:
        by_form.setdefault(id_form(seen), seen)
    return {
        value: other
        for value in ids
        if (other := by_form.get(id_form(value))) is not None and other != value
    }


def check_registry_id(value: object, *, where: str) -> None:
    """Refuse ``value`` as a registry id (:func:`registry_id_problem`), naming ``where``.

    Raises
    ------
    FleetFileError
        ``"{where} {problem}"`` (``where``: the file, row and column).
    """
    problem = registry_id_problem(str(value))
    if problem is not None:
        msg = f"{where} {problem}"
        raise FleetFileError(msg)


def registry_id_problem(value: str) -> str | None:
    """Say (pt-BR) why ``value`` cannot be a registry id, or None when it can.

    See :data:`REGISTRY_ID_PATTERN` and :data:`REGISTRY_ID_MAX_CHARS`.
    """
    if len(value) > REGISTRY_ID_MAX_CHARS:
        return f"tem {len(value)} caracteres; no máximo {REGISTRY_ID_MAX_CHARS}"
    if not _REGISTRY_ID.match(value):
        shown = value if len(value) <= 40 else value[:40] + "…"
        return (
            f"{shown!r} não é um identificador: sem espaços, quebras de linha nem os "
            'caracteres / ? # % , ; " (uma aspa sem fechar no arquivo?)'
        )
    return None


BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
"""Bidirectional embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069): invisible,
in a name they reorder what the reader sees."""


def display_text_problem(value: str) -> str | None:
    """Say (pt-BR) why ``value`` cannot be a name shown to people, or None when it can.

    Refused: a control character (line break, tab, NUL…) and the bidirectional controls of
    :data:`BIDI_CONTROLS`.
    """
    for char in value:
        if char in BIDI_CONTROLS:
            return (
                f"contém o caractere invisível de direção do texto U+{ord(char):04X}, que "
                "reordena o que se lê; remova-o"
            )
        if unicodedata.category(char) == "Cc":
            return (
                f"contém um caractere de controle (U+{ord(char):04X}: quebra de linha, "
                "tabulação…); use uma linha só de texto"
            )
    return None
