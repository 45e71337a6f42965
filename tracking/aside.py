"""Run a callable in a forked process beside the caller's own work.

The child inherits the parent's memory at the fork (nothing is pickled on the way in, only the
result on the way back), so the callable may close over large frames: the analysis's buckets, its
cross-vehicle kinds, the map page.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
X = TypeVar("X")

_CALL: Callable[..., Any] | None = None


def _call(*args: Any) -> Any:
    assert _CALL is not None  # set by the parent before the fork
    return _CALL(*args)


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


def forked_map(func: Callable[[X], T], items: Sequence[X], *, jobs: int) -> Iterator[T]:
    """Yield ``func`` of each item, in order, computed in ``jobs`` forked processes.

    As :func:`aside`, ``func`` and what it closes over are inherited, not pickled; with one job
    or one item, it runs here.
    """
    if jobs == 1 or len(items) <= 1:
        yield from map(func, items)
        return
    global _CALL
    _CALL = func
    try:
        with concurrent.futures.ProcessPoolExecutor(
            max_workers=min(jobs, len(items)), mp_context=multiprocessing.get_context("fork")
        ) as pool:
            results = pool.map(_call, items)  # forks now: the children see _CALL
            _CALL = None
            yield from results
    finally:
        _CALL = None
