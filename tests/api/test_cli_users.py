"""Tests of api.cli_users: `pontual users` and `pontual devices`."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

Run = Callable[..., subprocess.CompletedProcess[str]]
PONTUAL = Path(sys.executable).with_name("pontual")


def _run(url: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PONTUAL_")}
    return subprocess.run(
        [str(PONTUAL), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=clean | {"DATABASE_URL": url},
        timeout=120,
        check=False,
    )


class TestUsersCommands:
    def test_create_list_set_role_passwd_disable(self, api_database_url: str) -> None:
        """Create (password from stdin), list, change role and password, disable."""
        url = api_database_url
        out = _run(
            url,
            "users",
            "create",
            "cli_ana",
            "--role",
            "agent",
            "--password-stdin",
            stdin="senha-forte-1\n",
        )
        assert out.returncode == 0, out.stderr
        assert "criado com o papel agent" in out.stdout
        assert "cli_ana\tagent\tativo" in _run(url, "users", "list").stdout
        assert _run(url, "users", "set-role", "cli_ana", "planner").returncode == 0
        changed = _run(url, "users", "passwd", "cli_ana", "--password-stdin", stdin="outra-2x-9\n")
        assert changed.returncode == 0, changed.stderr
        assert _run(url, "users", "disable", "cli_ana").returncode == 0
        assert "cli_ana\tplanner\tdesativado" in _run(url, "users", "list").stdout

    def test_unknown_role_is_a_clear_error(self, api_database_url: str) -> None:
        """An unknown role fails with a pt-BR message and exit code 1."""
        bad = _run(
            api_database_url,
            "users",
            "create",
            "cli_bia",
            "--role",
            "rei",
            "--password-stdin",
            stdin="senha-forte-1\n",
        )
        assert bad.returncode == 1
        assert "papel 'rei' desconhecido" in bad.stderr


class TestDevicesCommands:
    def test_add_prints_token_once(self, run_pontual: Run, api_database_url: str) -> None:
        """`devices add` prints a token; `devices list` never shows it."""
        added = run_pontual("devices", "add", "CLI-1", DATABASE_URL=api_database_url)
        assert added.returncode == 0, added.stderr
        token = added.stdout.strip().splitlines()[-1]
        assert token.startswith("pd") and len(token) == 34
        listed = run_pontual("devices", "list", DATABASE_URL=api_database_url)
        assert "CLI-1" in listed.stdout
        assert token not in listed.stdout


class TestWeakPasswords:
    def test_cli_refuses_weak_passwords(self, api_database_url: str) -> None:
        """``pontual users create`` and ``passwd`` refuse a common password and the username."""
        url = api_database_url
        weak = _run(
            url,
            "users",
            "create",
            "passe_cli",
            "--role",
            "agent",
            "--password-stdin",
            stdin="12345678\n",
        )
        assert weak.returncode == 1
        assert "sequência simples" in weak.stderr
        created = _run(
            url,
            "users",
            "create",
            "passe_cli",
            "--role",
            "agent",
            "--password-stdin",
            stdin="cavalo-azul-pula\n",
        )
        assert created.returncode == 0, created.stderr
        same = _run(url, "users", "passwd", "passe_cli", "--password-stdin", stdin="passe_cli\n")
        assert same.returncode == 1
        assert "nome de usuário" in same.stderr
