"""Encryption of the secrets the server must read back: the webhooks' HMAC secrets.

A webhook secret signs every delivery (``X-Pontual-Signature``), so the server needs it in
clear at sending time: it is stored encrypted (Fernet: AES-128-CBC and HMAC-SHA256,
``cryptography``), never hashed. The key is ``PONTUAL_SECRET_KEY`` (urlsafe base64 of 32 bytes,
as ``Fernet.generate_key()`` prints) or else the file ``secret.key`` of the data directory,
created on first use with mode 0600. Several hosts on one database must share the key (set
``PONTUAL_SECRET_KEY`` on each). Stored values carry the prefix :data:`PREFIX`; a value
without it is a secret stored in clear by an older version: read as is, and encrypted by
:func:`encrypt_stored_secrets` when a server starts.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken
from sqlalchemy import Engine, text

from api.settings import Settings

PREFIX = "fernet:"
KEY_FILE = "secret.key"


class SecretKeyError(RuntimeError):
    """The key is malformed, or a stored secret was encrypted with another key."""


def _key_from_file(data_dir: Path) -> bytes:
    path = data_dir / KEY_FILE
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process created it meanwhile
            pass
        else:
            with os.fdopen(fd, "wb") as out:
                out.write(Fernet.generate_key() + b"\n")
    return path.read_bytes().strip()


@functools.lru_cache(maxsize=4)
def _fernet(key: bytes) -> Fernet:
    try:
        return Fernet(key)
    except ValueError:
        msg = (
            "chave de criptografia inválida (PONTUAL_SECRET_KEY ou secret.key): esperado "
            "base64 urlsafe de 32 bytes, como imprime Fernet.generate_key()"
        )
        raise SecretKeyError(msg) from None


def fernet(settings: Settings) -> Fernet:
    """Return the cipher of the configured key (see the module)."""
    if settings.secret_key is not None:
        key = settings.secret_key.get_secret_value().strip().encode()
    else:
        key = _key_from_file(settings.data_dir)
    return _fernet(key)


def encrypt_secret(value: str, *, settings: Settings) -> str:
    """Return ``value`` encrypted for storage (``fernet:<token>``)."""
    return PREFIX + fernet(settings).encrypt(value.encode()).decode()


def decrypt_secret(stored: str, *, settings: Settings) -> str:
    """Return the secret in clear from its stored form (a value without the prefix as is).

    Raises
    ------
    SecretKeyError
        If the value was encrypted with another key.
    """
    if not stored.startswith(PREFIX):
        return stored
    try:
        return fernet(settings).decrypt(stored.removeprefix(PREFIX).encode()).decode()
    except InvalidToken:
        msg = (
            "segredo de webhook cifrado com outra chave: configure a mesma PONTUAL_SECRET_KEY "
            "(ou o mesmo secret.key) em todos os servidores"
        )
        raise SecretKeyError(msg) from None


def encrypt_stored_secrets(engine: Engine, *, settings: Settings) -> int:
    """Encrypt the webhook secrets stored in clear by an older version; return how many."""
    n = 0
    with engine.begin() as conn:
        rows = conn.execute(
            text("SELECT webhook_id, secret FROM webhooks WHERE secret NOT LIKE :p FOR UPDATE"),
            {"p": PREFIX + "%"},
        ).all()
        for webhook_id, secret in rows:
            conn.execute(
                text("UPDATE webhooks SET secret = :s WHERE webhook_id = :w"),
                {"s": encrypt_secret(secret, settings=settings), "w": webhook_id},
            )
            n += 1
    return n
