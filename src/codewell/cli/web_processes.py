"""`codewell serve --web-processes N`: N processes answering HTTP on one port, so requests use every core.

One Python process runs Python code on one core at a time (the GIL): a single web process tops out near
1 / (CPU per request), about 360 MCP calls/s at 2.75 ms, however many cores the machine has. With N, the
process started by the operator (the *first*) runs migrations, the first-run steps and the background jobs as
usual and also answers HTTP; it starts N - 1 *web replicas*, `codewell serve` child processes that only answer
HTTP, exactly like `serve --no-jobs` replicas of a cluster (docs/deployment.md, "Web processes").

One port, one listening socket per process, all with `SO_REUSEPORT`: the kernel spreads new connections evenly
over the processes' sockets. A single socket shared by all (uvicorn's `--workers`) lets whichever process wakes
first accept every waiting connection in one go, and clients that keep connections alive (MCP clients, agents)
then stay on that process while the others idle. (uvicorn's own supervisor is not used for the same reason, and
because its workers are all alike: one of ours runs the jobs, and ours must end with their parent.)

What a process caches between requests (token owners, readable repositories, role permissions) is checked
against the database's cache epochs at the start of every request (codewell/db/epochs.py): a token revoked
through one process is refused by every other on its next request, on SQLite as on PostgreSQL. Site config is
read from the database by each process's config watcher; search shards from the data dir's manifest.

Every replica ends with the first process: SIGTERM (or SIGINT) to it is passed on to every replica at once, so
they drain their open requests while it drains its own; it then waits for them and exits with the first
non-zero exit status among them (0 when all stopped cleanly). If it is killed outright, the kernel sends each
replica SIGTERM (`PR_SET_PDEATHSIG`, asked for by the long-lived thread that starts them), and a replica whose
parent died before it could ask notices through its own watchdog (`watch_parent`). A replica that dies while
the server runs is started again; one that dies within CRASH_SECONDS of its start (a bad flag, a port it
cannot bind) stops the whole server with its exit status instead of being started again in a loop.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from codewell.core.processes import ORPHANED_EXIT, stop_with_parent

log = logging.getLogger(__name__)

# A replica that exits sooner than this after its start failed to start: it is not started again.
CRASH_SECONDS = 10.0
# How often the first process checks its replicas, and a replica its parent.
WATCH_SECONDS = 0.5
# What a replica gets on SIGTERM for its open requests (serve.REQUESTS_GRACE_SECONDS), with room for its
# shutdown, before SIGKILL.
STOP_SECONDS = 20.0


def bind_shared(host: str, port: int) -> socket.socket:
    """A TCP socket bound to (host, port) that other processes of this user may bind too (`SO_REUSEPORT`).

    Port 0 picks a free port; the replicas then bind the one this socket got. Not yet listening: uvicorn
    listens on it once the app has started.
    """
    if not hasattr(socket, "SO_REUSEPORT"):
        raise OSError("--web-processes above 1 needs SO_REUSEPORT (Linux, BSD, macOS)")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def watch_parent(parent_pid: int) -> None:
    """In a replica: stop gracefully (SIGTERM to itself) once `parent_pid` is no longer its parent.

    Covers what the parent-death signal cannot: a parent gone before the signal was asked for, systems
    without `prctl`.
    """

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(WATCH_SECONDS)
        log.warning("the first web process %s is gone: stopping", parent_pid)
        os.kill(os.getpid(), signal.SIGTERM)

    if os.getppid() != parent_pid:
        os._exit(ORPHANED_EXIT)
    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


class WebReplicas:
    """`count` web replica processes (`codewell serve` answering on `host`:`port`), kept running until `stop`."""

    def __init__(self, count: int, host: str, port: int, log_format: str, env: dict[str, str]) -> None:
        self.count = count
        self.command = [
            sys.executable,
            "-m",
            "codewell",
            "serve",
            "--host",
            host,
            "--port",
            str(port),
            "--log-format",
            log_format,
            "--web-process-of",
            str(os.getpid()),
        ]
        # Data dir and database URL through the environment, not the command line: a URL may hold a password,
        # and any user of the machine can read command lines.
        self.env = {**os.environ, **env}
        self.processes: list[subprocess.Popen[bytes]] = []
        self.started_at: list[float] = []
        # The exit status that stopped the server (a replica that failed at its start), or None.
        self.failed: int | None = None
        self._stop = threading.Event()
        self._terminated = False
        self._lock = threading.Lock()
        self._watcher: threading.Thread | None = None

    def _spawn(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            # Only prctl and getppid run between fork and exec: no locks, no allocation worth fearing.
            preexec_fn=functools.partial(stop_with_parent, os.getpid()),  # noqa: PLW1509
            env=self.env,
        )

    def start(self, on_failure: Callable[[], None]) -> None:
        """Start the replicas from a thread that lives until `stop` (the parent-death signal is tied to the
        thread that started a process); `on_failure` runs there if a replica fails at its start."""
        if self.count <= 0 or self._watcher is not None:
            return
        started = threading.Event()
        self._watcher = threading.Thread(target=self._run, args=(started, on_failure), name="web-replicas", daemon=True)
        self._watcher.start()
        started.wait()

    def _run(self, started: threading.Event, on_failure: Callable[[], None]) -> None:
        with self._lock:
            if not self._stop.is_set():
                self.processes = [self._spawn() for _ in range(self.count)]
                self.started_at = [time.monotonic()] * self.count
                log.info("started %s web replica processes: %s", self.count, [p.pid for p in self.processes])
        started.set()
        while not self._stop.wait(WATCH_SECONDS):
            with self._lock:
                if self._stop.is_set():
                    break
                for index, process in enumerate(self.processes):
                    status = process.poll()
                    if status is None:
                        continue
                    if time.monotonic() - self.started_at[index] < CRASH_SECONDS:
                        log.error("web replica process %s failed at its start (exit %s): stopping", process.pid, status)
                        self.failed = status or 1
                        break
                    log.warning("web replica process %s exited with %s; starting another", process.pid, status)
                    self.processes[index] = self._spawn()
                    self.started_at[index] = time.monotonic()
            if self.failed is not None:
                on_failure()
                # Stay alive until `stop`: the other replicas' parent-death signal is tied to this thread.
                self._stop.wait()
                break

    def terminate(self) -> None:
        """SIGTERM every replica (they drain their open requests meanwhile) and start no other; once."""
        with self._lock:
            self._stop.set()
            if self._terminated:
                return
            self._terminated = True
            for process in self.processes:
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)

    def stop(self, grace_seconds: float = STOP_SECONDS) -> int:
        """SIGTERM every replica, wait up to `grace_seconds` for them, kill what is left; the first non-zero
        exit status among them (the failure that stopped the server first), else 0."""
        self.terminate()
        deadline = time.monotonic() + grace_seconds
        statuses = []
        for process in self.processes:
            try:
                statuses.append(process.wait(timeout=max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                log.warning("web replica process %s still running after %.0f s: killing it", process.pid, grace_seconds)
                process.kill()
                statuses.append(process.wait(5))
        if self._watcher is not None:
            self._watcher.join(timeout=WATCH_SECONDS + 5)
            self._watcher = None
        if self.failed is not None:
            return self.failed
        # A replica stopped by our SIGTERM exits 0; a negative status is a signal that killed it.
        return next((status if status > 0 else 128 - status for status in statuses if status != 0), 0)
