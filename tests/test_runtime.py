"""runtime: a callable run in a forked process beside the caller."""

from __future__ import annotations

import os

import numpy as np
import pytest

from runtime import aside


def test_the_child_sees_the_parents_memory_and_returns_its_result() -> None:
    big = np.arange(1_000_000)  # inherited by the fork, never pickled
    with aside(lambda: (os.getpid(), int(big.sum()))) as result:
        here = int(big[::2].sum())
        pid, total = result()
    assert pid != os.getpid()
    assert total == 499_999_500_000
    assert here == 249_999_500_000


def test_an_error_in_the_child_is_raised_in_the_caller() -> None:
    def fails() -> None:
        raise ValueError("arquivo ilegível")

    with pytest.raises(ValueError, match="arquivo ilegível"), aside(fails) as result:
        result()


def test_without_fork_the_callable_runs_here_when_asked() -> None:
    calls: list[int] = []
    with aside(lambda: calls.append(os.getpid()) or 7, fork=False) as result:
        assert calls == []
        assert result() == 7
    assert calls == [os.getpid()]
