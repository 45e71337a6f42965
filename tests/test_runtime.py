"""runtime: the process-wide tricks, each with its platform guard."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import runtime
from runtime import ForkPoolReentryError, aside, forked_map, forked_share

ROOT = Path(__file__).resolve().parents[1]
LINUX = pytest.mark.skipif(not runtime.can_fork(), reason="fork pool: Linux only")


@LINUX
class TestAside:
    def test_the_child_sees_the_parents_memory_and_returns_its_result(self) -> None:
        """The callable runs in another process, reads inherited memory, returns its result."""
        big = np.arange(1_000_000)  # inherited by the fork, never pickled
        with aside(lambda: (os.getpid(), int(big.sum()))) as result:
            here = int(big[::2].sum())
            pid, total = result()
        assert pid != os.getpid()
        assert total == 499_999_500_000
        assert here == 249_999_500_000

    def test_an_error_in_the_child_is_raised_in_the_caller(self) -> None:
        """An exception of the callable comes back through the waiting function."""

        def fails() -> None:
            raise ValueError("arquivo ilegível")

        with pytest.raises(ValueError, match="arquivo ilegível"), aside(fails) as result:
            result()

    def test_without_fork_the_callable_runs_here_when_asked(self) -> None:
        """fork=False: nothing runs until the waiting function is called, then in this process."""
        calls: list[int] = []
        with aside(lambda: calls.append(os.getpid()) or 7, fork=False) as result:
            assert calls == []
            assert result() == 7
        assert calls == [os.getpid()]


@LINUX
class TestForkedMap:
    def test_results_in_order_from_other_processes(self) -> None:
        """Each item's result, in the items' order, computed in forked processes."""
        out = list(forked_map(lambda i: (i * i, os.getpid()), [1, 2, 3, 4], jobs=2))
        assert [square for square, _ in out] == [1, 4, 9, 16]
        assert os.getpid() not in {pid for _, pid in out}

    def test_one_job_runs_here(self) -> None:
        """jobs=1 maps in this process."""
        assert list(forked_map(lambda i: os.getpid(), [1, 2], jobs=1)) == [os.getpid()] * 2


@LINUX
class TestForkedShare:
    def test_the_caller_takes_the_last_items_the_children_the_first(self) -> None:
        """Results in the items' order; the last items are computed here once the caller asks."""

        def slow(i: int) -> tuple[int, int]:
            time.sleep(0.05)
            return i * i, os.getpid()

        with forked_share(slow, list(range(8)), jobs=2) as rest:
            out = rest()
        assert [square for square, _ in out] == [i * i for i in range(8)]
        here = [pid == os.getpid() for _, pid in out]
        assert not here[0] and here[-1]
        assert here == sorted(here)  # the children's items first, then this process's

    def test_an_error_in_a_child_is_raised_in_the_caller(self) -> None:
        """An exception of an item computed in a forked process comes back through ``rest``."""

        def fails(i: int) -> int:
            if i == 0:
                raise ValueError("grupo ilegível")
            time.sleep(0.2)
            return i

        with (
            pytest.raises(ValueError, match="grupo ilegível"),
            forked_share(fails, [0, 1, 2], jobs=2) as rest,
        ):
            rest()

    def test_one_job_runs_here_when_asked(self) -> None:
        """jobs=1: nothing runs until ``rest`` is called, then every item in this process."""
        calls: list[int] = []
        with forked_share(lambda i: calls.append(i) or os.getpid(), [1, 2, 3], jobs=1) as rest:
            assert calls == []
            assert rest() == [os.getpid()] * 3
        assert calls == [1, 2, 3]


@LINUX
class TestForkPoolReentry:
    def test_a_pool_inside_an_open_pool_is_refused(self) -> None:
        """Asking for a fork inside another's block raises a named error naming the rule."""
        with aside(lambda: 1) as first:
            with pytest.raises(ForkPoolReentryError, match="não é reentrante"):
                list(forked_map(str, [1, 2], jobs=2))
            assert first() == 1

    def test_a_pool_inside_a_child_is_refused(self) -> None:
        """A child of the pool (which inherits its state) may not open one of its own."""

        def nested(_: int) -> list[str]:
            return list(forked_map(str, [1, 2], jobs=2))

        with pytest.raises(ForkPoolReentryError, match="não é reentrante"):
            list(forked_map(nested, [1, 2], jobs=2))

    def test_after_a_pool_closes_another_opens(self) -> None:
        """The guard is released when a block ends, normally or by an error."""
        with pytest.raises(ValueError, match="x"), aside(lambda: int("x")) as result:
            result()
        assert list(forked_map(lambda i: i + 1, [1, 2], jobs=2)) == [2, 3]


class TestForkGuard:
    @pytest.mark.parametrize("platform", ["darwin", "win32"])
    def test_elsewhere_the_pool_runs_in_this_process(
        self, monkeypatch: pytest.MonkeyPatch, platform: str
    ) -> None:
        """Off Linux nothing forks: aside and forked_map run here, with the same results."""
        monkeypatch.setattr(runtime.sys, "platform", platform)
        assert not runtime.can_fork()
        assert list(forked_map(lambda i: (i, os.getpid()), [1, 2], jobs=2)) == [
            (1, os.getpid()),
            (2, os.getpid()),
        ]
        with aside(os.getpid) as result:
            assert result() == os.getpid()


class TestAllocators:
    def test_glibc_heap_kept_only_with_glibc(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """keep_freed_heap applies on glibc and is a no-op (False) without it."""
        if runtime._glibc("mallopt") is not None:
            assert runtime.keep_freed_heap() is True
        monkeypatch.setattr(runtime, "_glibc", lambda name: None)
        assert runtime.keep_freed_heap() is False

    def test_release_without_glibc_still_releases_arrows_pool(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """release_free_memory gives Arrow's unused memory back, with or without glibc."""
        import pyarrow as pa

        monkeypatch.setattr(runtime, "_glibc", lambda name: None)
        kept = pa.array(np.arange(1 << 16))
        runtime.release_free_memory()
        assert kept[-1].as_py() == (1 << 16) - 1

    def test_arrow_purge_setting_keeps_the_users_value(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A value the user set is kept; here pyarrow is loaded already, so it cannot apply."""
        import pyarrow  # noqa: F401

        monkeypatch.setenv(runtime.ARROW_PURGE_VARIABLE, "250")
        assert runtime.keep_arrow_pages() is False
        assert os.environ[runtime.ARROW_PURGE_VARIABLE] == "250"


_PROBE = """
import os, sys

class Probe:
    def find_spec(self, name, path=None, target=None):
        if name == "pyarrow":
            value = os.environ.get("MIMALLOC_PURGE_DELAY")
            print("PROBE " + json.dumps(value), file=sys.stderr, flush=True)
            sys.meta_path.remove(self)
        return None

import json
sys.meta_path.insert(0, Probe())
sys.argv = ["pontual", *sys.argv[1:]]
from api.cli import main
main()
"""


def test_cli_sets_the_arrow_purge_delay_before_pyarrow_loads(tmp_path: Path) -> None:
    """`pontual analyze`'s process has MIMALLOC_PURGE_DELAY set when pyarrow is first imported
    (mimalloc reads it then): no command module imports pyarrow at start-up."""
    pings = tmp_path / "pings.csv"
    pings.write_text(
        "vehicle_id,timestamp,lat,lon\n"
        "A,2024-03-04T09:00:00-03:00,-30.03,-51.22\n"
        "A,2024-03-04T09:00:15-03:00,-30.03,-51.22\n",
        encoding="utf-8",
    )
    stands = tmp_path / "stands.geojson"
    feature = {
        "type": "Feature",
        "properties": {"stand_id": "S1", "radius_m": 30},
        "geometry": {"type": "Point", "coordinates": [-51.22, -30.03]},
    }
    stands.write_text(json.dumps({"type": "FeatureCollection", "features": [feature]}))
    env = {k: v for k, v in os.environ.items() if k != runtime.ARROW_PURGE_VARIABLE}
    args = ["analyze", "--pings", str(pings), "--stands", str(stands), "--tiles", "none"]
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args, "--out", str(tmp_path / "out")],
        cwd=ROOT,
        env=env | {"PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    probes = [line for line in done.stderr.splitlines() if line.startswith("PROBE ")]
    assert probes == ['PROBE "-1"']
    assert (tmp_path / "out" / "findings.geojson").is_file()


class TestAvailableCores:
    def test_the_affinity_mask_counts(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without ``os.process_cpu_count``, the cores are the process's affinity, not the box's."""
        monkeypatch.delattr(os, "process_cpu_count", raising=False)
        monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 3, 5}, raising=False)
        monkeypatch.setattr(os, "cpu_count", lambda: 64)
        assert runtime.available_cores() == 3

    def test_process_cpu_count_comes_first(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """``os.process_cpu_count`` (Python 3.13+) is used when there; None reads as one core."""
        monkeypatch.setattr(os, "process_cpu_count", lambda: 5, raising=False)
        assert runtime.available_cores() == 5
        monkeypatch.setattr(os, "process_cpu_count", lambda: None, raising=False)
        assert runtime.available_cores() == 1
