"""Child processes that end with the process that started them, and process pools stopped on shutdown.

A `ProcessPoolExecutor` process never notices on its own that its parent is gone: every pool process holds the
writing end of the pool's call queue as well as the reading end, so its read never sees end-of-file, and a pool
left behind by a killed server (or by a graceful stop that never closed it) waits forever, re-parented to PID 1,
together with the multiprocessing resource tracker, which exits only once every process holding its pipe has.

So every pool codewell starts comes from `process_pool`, whose processes end with their parent twice over:

- the kernel's parent-death signal (`PR_SET_PDEATHSIG`, Linux). The kernel sends it when the *thread* that
  started the process ends, not only the process (request threads come and go), so it is not a killing signal:
  its handler exits only when the parent process really is gone (`os.getppid()` changed);
- a watchdog thread that checks the parent every WATCH_SECONDS: it covers a parent that died before the
  signal was asked for, systems without `prctl`, and a main thread busy in C code that delays the handler.

`stop_pool` stops one pool within a bounded time (cancel what waits, let running calls finish for a short
grace, then terminate and kill), and `stop_pools` every pool this process still has (those of running jobs
included) when it shuts down.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import signal
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from multiprocessing.process import BaseProcess
from types import FrameType

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
# Sent to a pool process when the thread that started it ends; its handler tells a thread's end from the
# process's end. Not SIGTERM: `stop_pool` terminates pool processes with SIGTERM, which must kill at once.
PARENT_DEATH_SIGNAL = signal.SIGUSR1
# How often a pool process's watchdog checks its parent: an orphan lives at most this long.
WATCH_SECONDS = 0.5
# How long `stop_pool` lets running calls finish before it terminates the processes.
POOL_GRACE_SECONDS = 2.0
# How long a terminated pool process gets before SIGKILL.
TERMINATE_SECONDS = 1.0
# Exit status of a pool process that found its parent gone (EX_SOFTWARE would suggest a bug; this is not one).
ORPHANED_EXIT = 75


def _libc_prctl() -> Callable[..., int] | None:
    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return None
    return prctl


# Looked up once, here: after a fork and before exec a child may only call it.
_PRCTL = _libc_prctl()

# Every pool `process_pool` made that may still have processes, for `stop_pools` (weakly: a pool dropped by
# its owner is shut down by its own finalizer).
_POOLS: weakref.WeakSet[ProcessPoolExecutor] = weakref.WeakSet()
_POOLS_LOCK = threading.Lock()
# Set by `stop_pools` (the process is stopping): a job still running past its grace that asks for a new pool
# (an index build makes its pool when it first needs one) gets an error, not processes the exit would wait for.
_STOPPING = threading.Event()


class PoolsStopped(RuntimeError):
    """This process is stopping: it starts no more process pools."""


def set_parent_death_signal(signum: int) -> bool:
    """Ask the kernel to send `signum` to this process when its parent thread ends (Linux; False elsewhere).

    Safe between fork and exec (`preexec_fn`): one call into libc, nothing allocated.
    """
    if _PRCTL is None:
        return False
    return _PRCTL(PR_SET_PDEATHSIG, signum) == 0


def stop_with_parent(parent_pid: int, orphaned_exit: int = ORPHANED_EXIT) -> None:
    """`preexec_fn` of a long-lived child (a job worker, a web replica): SIGTERM when the parent's starting thread
    ends, so the child stops gracefully with it; exit `orphaned_exit` at once if the parent is already gone (it died
    before the kernel was asked to tell). Only prctl and getppid run between fork and exec."""
    set_parent_death_signal(signal.SIGTERM)
    if os.getppid() != parent_pid:
        os._exit(orphaned_exit)


def terminate_with_parent() -> None:
    """`preexec_fn` of a server started by a script (the benches): SIGTERM when the thread that started it ends,
    so that a script stopped by a signal, which runs none of its clean-up, leaves no server behind. Only for
    children started from a thread that lives as long as they should (the main thread)."""
    set_parent_death_signal(signal.SIGTERM)


def end_with_parent(parent_pid: int) -> None:
    """In a child process: exit at once whenever the process `parent_pid` is gone (the pool initializer).

    Runs in the child's main thread, before any task.
    """

    def on_parent_thread_end(_signum: int, _frame: FrameType | None) -> None:
        if os.getppid() != parent_pid:
            os._exit(ORPHANED_EXIT)

    signal.signal(PARENT_DEATH_SIGNAL, on_parent_thread_end)
    set_parent_death_signal(PARENT_DEATH_SIGNAL)
    if os.getppid() != parent_pid:  # the parent ended before the kernel was asked to tell
        os._exit(ORPHANED_EXIT)
    threading.Thread(target=_watch_parent, args=(parent_pid,), name="parent-watchdog", daemon=True).start()


def _watch_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(WATCH_SECONDS)
    os._exit(ORPHANED_EXIT)


def process_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of `workers` spawned processes that end with this process (see the module's docstring).

    spawn, not fork: the parent holds threads, locks and database handles that a fork would copy half-way.
    Raises PoolsStopped once `stop_pools` ran in this process.
    """
    with _POOLS_LOCK:
        if _STOPPING.is_set():
            raise PoolsStopped("this process is stopping: no new process pool")
        pool = ProcessPoolExecutor(
            workers, mp_context=get_context("spawn"), initializer=end_with_parent, initargs=(os.getpid(),)
        )
        _POOLS.add(pool)
    return pool


def stop_pool(pool: ProcessPoolExecutor, grace_seconds: float = POOL_GRACE_SECONDS) -> None:
    """Stop `pool` within about `grace_seconds` + TERMINATE_SECONDS: queued calls are cancelled, running ones
    get `grace_seconds` to finish, then its processes are terminated (their callers see BrokenProcessPool)."""
    with _POOLS_LOCK:
        _POOLS.discard(pool)
    # The pool's own table of its processes: shutdown() forgets it, and only it names processes to terminate.
    processes: list[BaseProcess] = list((pool._processes or {}).values())
    # shutdown(wait=True) returns once the processes have exited; a thread waits for it so that a call still
    # running does not hold this one past the grace.
    waiter = threading.Thread(
        target=pool.shutdown, kwargs={"wait": True, "cancel_futures": True}, name="pool-shutdown", daemon=True
    )
    waiter.start()
    waiter.join(grace_seconds)
    if not waiter.is_alive():
        return
    leftover = [p for p in processes if p.is_alive()]
    log.warning("terminating %s pool processes still running after %.1f s", len(leftover), grace_seconds)
    for process in leftover:
        process.terminate()
    deadline = time.monotonic() + TERMINATE_SECONDS
    for process in leftover:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join(TERMINATE_SECONDS)
    # The pool's manager thread notices the dead processes, fails their calls and lets shutdown() return.
    waiter.join(TERMINATE_SECONDS)


def stop_pools(grace_seconds: float = POOL_GRACE_SECONDS) -> None:
    """Stop every pool `process_pool` made in this process and not stopped yet (on shutdown), together; no
    pool is made after it."""
    with _POOLS_LOCK:
        _STOPPING.set()
        pools = list(_POOLS)
    stoppers = [
        threading.Thread(target=stop_pool, args=(pool, grace_seconds), name="pool-stop", daemon=True) for pool in pools
    ]
    for stopper in stoppers:
        stopper.start()
    for stopper in stoppers:
        stopper.join()


def freeze_startup_heap() -> None:
    """Move every object alive now (modules, the app, routes, settings: what a server keeps for its whole life)
    into the permanent generation, after one last collection: each later full collection then walks only what
    requests allocated since, instead of the whole start-up heap again (tens of milliseconds on a busy server).
    Call it once a long-lived server has started, never in tests (they build many apps in one process)."""
    gc.collect()
    gc.freeze()
