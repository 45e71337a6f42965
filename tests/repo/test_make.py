"""The Makefile: its system step waits for another apt/dpkg process, bounded, and says so;
its list of rooms is the project's."""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WAIT = ROOT / "scripts" / "wait-apt-lock.sh"


def _wait(lock: Path, *, timeout_s: int) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"APT_LOCK_FILES": str(lock), "APT_LOCK_TIMEOUT_S": str(timeout_s)}
    return subprocess.run(
        [str(WAIT)], env=env, capture_output=True, text=True, timeout=60, check=False
    )


class TestWaitForAptLock:
    def test_free_lock_passes_at_once(self, tmp_path: Path) -> None:
        """No process holds the lock: exit 0, nothing said."""
        lock = tmp_path / "lock-frontend"
        lock.touch()
        done = _wait(lock, timeout_s=5)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")

    def test_held_lock_times_out_with_a_message(self, tmp_path: Path) -> None:
        """A lock held past the bound: exit 1, the lock file named, in pt-BR."""
        lock = tmp_path / "lock-frontend"
        with lock.open("w") as handle:
            fcntl.lockf(handle, fcntl.LOCK_EX)  # the kind of lock apt and dpkg take
            done = _wait(lock, timeout_s=2)
        assert done.returncode == 1
        assert f"Aguardando outro processo do apt/dpkg liberar {lock}" in done.stdout
        assert done.stderr.startswith(f"erro: {lock} continua bloqueado")

    def test_waits_until_released(self, tmp_path: Path) -> None:
        """A lock released during the wait: exit 0 after saying it waited."""
        lock = tmp_path / "lock-frontend"
        handle = lock.open("w")
        fcntl.lockf(handle, fcntl.LOCK_EX)
        timer = threading.Timer(2.0, handle.close)
        timer.start()
        try:
            done = _wait(lock, timeout_s=30)
        finally:
            timer.cancel()
            handle.close()
        assert done.returncode == 0 and "Aguardando" in done.stdout


class TestMakefile:
    MAKEFILE = (ROOT / "Makefile").read_text(encoding="utf-8")

    def test_every_apt_get_waits_first(self) -> None:
        """Each apt-get call of the system step comes after the bounded wait."""
        recipe = self.MAKEFILE[self.MAKEFILE.index("\nsystem:") :]
        recipe = recipe[: recipe.index("\n\n")]
        calls = re.findall(r"(scripts/wait-apt-lock\.sh|\$\(APT_GET\) \w+)", recipe)
        assert calls == [
            "scripts/wait-apt-lock.sh",
            "$(APT_GET) update",
            "scripts/wait-apt-lock.sh",
            "$(APT_GET) install",
        ]
        assert "DPkg::Lock::Timeout=600" in self.MAKEFILE
        assert 'timeout_s="${APT_LOCK_TIMEOUT_S:-600}"' in WAIT.read_text(encoding="utf-8")

    def test_sudo_keeps_the_noninteractive_frontend(self) -> None:
        """DEBIAN_FRONTEND reaches apt-get through sudo (sudo drops the caller's environment)."""
        assert "$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get" in self.MAKEFILE

    def test_one_list_of_rooms(self) -> None:
        """The Makefile's ROOMS (type-checked, compiled), pyproject's packages and coverage
        sources, and the rooms whose errors reach users as written are the same list."""
        import tomllib

        from api._errors import ROOMS

        (make_rooms,) = re.findall(r"^ROOMS := (.+)$", self.MAKEFILE, flags=re.MULTILINE)
        project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
        packages = project["tool"]["setuptools"]["packages"]["find"]["include"]
        assert make_rooms.split() == list(ROOMS)
        assert packages == [f"{room}*" for room in ROOMS]
        assert project["tool"]["coverage"]["run"]["source"] == list(ROOMS)
        assert sorted(ROOMS) == sorted(
            p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()
        )
