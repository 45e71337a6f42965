"""Process-wide tricks, in one place: each measured, documented and guarded by platform.

Library code never changes the process it runs in; the command line asks for these (``pontual
analyze``: :func:`api.cli_analyze.analyze`), and the engines call the fork pool (and
:func:`keep_freed_heap` on the Dask workers of a local cluster, which Dask starts with
``MALLOC_TRIM_THRESHOLD_=65536``: the stages on 2 workers took 2-3x longer). Each was
measured with ``bench/bench_analyze.py``'s data (2M fixes of 3,375 taxis, ``--jobs 2``, the
whole ``pontual analyze`` process, runs with and without interleaved; see
``docs/architecture.md``); a trick that saved less than 5 % of a run was removed.

========================  ========================================  ==========================
trick                     guard                                     saving (2M fixes, --jobs 2)
========================  ========================================  ==========================
:func:`aside`,            Linux (``fork`` start method); else runs  about a third of the run
:func:`forked_map`,       in this process; refuses re-entry
:func:`forked_share`
:func:`keep_arrow_pages`  before ``pyarrow`` is imported; Arrow's   see its docstring
                          mimalloc pool only
========================  ========================================  ==========================

Nothing here is imported by the pure rooms' logic except :func:`release_free_memory`, which
:mod:`tracking.validate` calls between chunks of a big file (a memory ceiling, not a speed-up).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import functools
import gc
import logging
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
X = TypeVar("X")


class ForkPoolReentryError(RuntimeError):
    """A fork pool was asked for while another one of this process is open."""


# --------------------------------------------------------------------------- fork pool

_CALL: Callable[..., Any] | None = None
_OPEN = False


def can_fork() -> bool:
    """Whether this platform forks cheaply and safely: Linux with the ``fork`` start method.

    macOS offers ``fork`` but its system libraries are not fork-safe once threads run; Windows
    has no ``fork``. Elsewhere :func:`aside`, :func:`forked_map` and :func:`forked_share` run in
    this process.
    """
    return sys.platform == "linux" and "fork" in multiprocessing.get_all_start_methods()


def _call(*args: Any) -> Any:
    if _CALL is None:  # pragma: no cover - set by the parent before the fork
        msg = "pool de processos sem função: o processo não foi criado por runtime.aside"
        raise ForkPoolReentryError(msg)
    return _CALL(*args)


@contextlib.contextmanager
def _fork_pool(func: Callable[..., Any], workers: int) -> Iterator[concurrent.futures.Executor]:
    """Open a pool of ``workers`` forked processes that call ``func`` (passed by inheritance).

    The callable goes through a module global, set just before the fork and cleared after: the
    children inherit it (nothing is pickled on the way in), so it may close over large frames.
    That is why a second pool may not open while one is open (in this process or, inherited, in
    a child): the global would be overwritten under the first.
    """
    global _CALL, _OPEN
    if _OPEN:
        msg = (
            "runtime.aside/forked_map/forked_share não é reentrante: já há um pool de processos "
            "aberto neste processo (ou ele é um filho de um pool); chame-o fora do outro bloco"
        )
        raise ForkPoolReentryError(msg)
    _OPEN, _CALL = True, func
    try:
        with concurrent.futures.ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("fork")
        ) as pool:
            yield pool
    finally:
        _OPEN, _CALL = False, None


@contextlib.contextmanager
def aside(func: Callable[[], T], *, fork: bool = True) -> Iterator[Callable[[], T]]:
    """Start ``func`` in a forked process; yield a function that waits for its result.

    The child inherits the parent's memory at the fork (nothing is pickled on the way in, only
    the result on the way back). The result (or the exception ``func`` raised) comes back through
    the yielded function. With ``fork`` False, or where :func:`can_fork` is False, ``func`` runs
    in this process when that function is called. Leaving the block waits for the child.

    Raises
    ------
    ForkPoolReentryError
        If called (with a fork) inside another :func:`aside` or :func:`forked_map`.
    """
    if not (fork and can_fork()):
        yield func
        return
    with _fork_pool(func, 1) as pool:
        future = pool.submit(_call)  # forks now: the child sees _CALL
        yield future.result


def forked_map(func: Callable[[X], T], items: Sequence[X], *, jobs: int) -> Iterator[T]:
    """Yield ``func`` of each item, in order, computed in ``jobs`` forked processes.

    As :func:`aside`, ``func`` and what it closes over are inherited, not pickled; with one job,
    one item, or where :func:`can_fork` is False, it runs here.

    Raises
    ------
    ForkPoolReentryError
        If called (with more than one job) inside another :func:`aside` or :func:`forked_map`.
    """
    if jobs == 1 or len(items) <= 1 or not can_fork():
        yield from map(func, items)
        return
    with _fork_pool(func, min(jobs, len(items))) as pool:
        yield from pool.map(_call, items)  # forks at the first submit: the children see _CALL


@contextlib.contextmanager
def forked_share(
    func: Callable[[X], T], items: Sequence[X], *, jobs: int
) -> Iterator[Callable[[], list[T]]]:
    """Start ``func`` of each item in ``jobs - 1`` forked processes; this one helps when free.

    The forked processes take the items in order (put the largest first). The yielded function,
    called once this process has done its own work in the block, takes the items no process
    has started yet, from the last one back, computes them here (no result to pickle), waits
    for the others, and returns every result in the items' order. ``func``, what it closes over
    and the items are inherited, not pickled (a forked process receives an index); with one job,
    fewer than two items, or where :func:`can_fork` is False, every item runs here when the
    function is called.

    Raises
    ------
    ForkPoolReentryError
        If called (with more than one job) inside another :func:`aside` or :func:`forked_map`.
    """
    if jobs == 1 or len(items) <= 1 or not can_fork():
        yield lambda: [func(item) for item in items]
        return
    with _fork_pool(lambda k: func(items[k]), min(jobs - 1, len(items))) as pool:
        # the children fork at the first submit: they see _CALL and the items
        futures = [pool.submit(_call, k) for k in range(len(items))]

        def rest() -> list[T]:
            here: dict[int, T] = {}
            for k in range(len(items) - 1, -1, -1):
                if not futures[k].cancel():  # started: so are all before it
                    break
                here[k] = func(items[k])
            return [here[k] if k in here else f.result() for k, f in enumerate(futures)]

        try:
            yield rest
        finally:
            for f in futures:
                f.cancel()


def available_cores() -> int:
    """Return the cores this process may run on (its CPU affinity), at least 1.

    ``os.process_cpu_count`` (Python 3.13+), else the affinity mask where the platform has one
    (Linux), else ``os.cpu_count``. The default of ``pontual analyze --jobs``.
    """
    counter = getattr(os, "process_cpu_count", None)
    if counter is not None:
        return max(1, counter() or 1)
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


# --------------------------------------------------------------------------- allocators

ARROW_PURGE_VARIABLE = "MIMALLOC_PURGE_DELAY"


def keep_arrow_pages() -> bool:
    """Have Arrow's allocator (mimalloc) keep freed pages instead of purging them after 10 ms.

    The analysis frees and reallocates buffers of the same sizes all along; purged pages are
    faulted in and zeroed again. mimalloc reads the variable once, when Arrow loads it: call
    this before anything imports ``pyarrow`` (``pandas`` and ``geopandas`` do). A value the
    user set is kept. Harmless where Arrow's pool is jemalloc or the system's (ignored).

    Returns
    -------
    bool
        Whether it can take effect (``pyarrow`` not imported yet in this process).
    """
    os.environ.setdefault(ARROW_PURGE_VARIABLE, "-1")
    return "pyarrow" not in sys.modules


@functools.cache
def _glibc(name: str) -> Callable[..., int] | None:
    """Return glibc's function ``name``, or None when the C library is another (musl, macOS)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return getattr(ctypes.CDLL("libc.so.6"), name)  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD_MAX = 32 << 20  # glibc's largest on 64-bit


def keep_freed_heap() -> bool:
    """Have glibc's malloc (numpy's arrays) keep freed memory for the next allocations.

    By default, arrays of a few MB are mapped and unmapped one by one, and the heap's free top
    is given back: every page is faulted in and zeroed again. Arrays up to 32 MB then come from
    the heap, which is not trimmed; :func:`release_free_memory` still gives memory back.

    Returns
    -------
    bool
        Whether it was applied (False without glibc).
    """
    mallopt = _glibc("mallopt")
    if mallopt is None:
        return False
    mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX)
    mallopt(_M_TRIM_THRESHOLD, 2**31 - 1)  # an int: 2 GB
    return True


def release_free_memory() -> None:
    """Give freed memory back to the system: Arrow's pool, and glibc's heap where it is glibc.

    For a memory ceiling, not speed: between the chunks of a big file the allocators would keep
    a chunk's worth of freed buffers (hundreds of MB for a million rows), which would add to the
    peak of the next step.
    """
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    trim = _glibc("malloc_trim")
    if trim is not None:
        trim(0)


# --------------------------------------------------------------------------- interpreter


@contextlib.contextmanager
def cycle_collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the block (restored after).

    An analysis builds millions of objects without cycles (evidence records, rows): the
    collector's passes over them are wasted work.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def exit_now(code: int = 0) -> None:
    """Leave the process at once, output flushed, without the interpreter's teardown.

    Freeing a big analysis's objects one by one takes time that buys nothing: its files are
    written and closed and its processes joined. Only for the end of a command.
    """
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
