"""Run a callable in a forked process beside the caller's own work.

The child inherits the parent's memory at the fork (nothing is pickled on the way in, only the
result on the way back), so the callable may close over large frames. For work that cannot
share a core with the caller's: the analysis's cross-vehicle kinds, the map page.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

_CALL: Callable[[], Any] | None = None


def _call() -> Any:
    assert _CALL is not None  # set by the parent before the fork
    return _CALL()


@contextlib.contextmanager
def aside(func: Callable[[], T], *, fork: bool = True) -> Iterator[Callable[[], T]]:
    """Start ``func`` in a forked process; yield a function that waits for its result.

    The result (or the exception ``func`` raised) comes back through the yielded function. With
    ``fork`` False, ``func`` runs in this process when that function is called. Leaving the block
    waits for the child.
    """
    if not fork:
        yield func
        return
    global _CALL
    _CALL = func
    try:
        with concurrent.futures.ProcessPoolExecutor(
            max_workers=1, mp_context=multiprocessing.get_context("fork")
        ) as pool:
            future = pool.submit(_call)  # forks now: the child sees _CALL
            _CALL = None
            yield future.result
    finally:
        _CALL = None
