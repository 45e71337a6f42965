"""How two systems may write the same registry id (a driver's code, a vehicle's prefixo)."""

from __future__ import annotations

import re
import unicodedata

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
