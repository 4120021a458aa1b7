"""The worker processes `codewell serve` starts beside its own job threads, so that background work uses every
core (one Python process runs Python code on one core at a time).

They are plain `codewell worker` processes on the server's database and data dir, claiming jobs like any other;
they end with the server: SIGTERM on a graceful stop, and the kernel's parent-death signal (`PR_SET_PDEATHSIG`)
if the server is killed outright. A child that dies is started again after a pause.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codewell.runtime import Runtime

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
RESTART_SECONDS = 5.0


def _libc_prctl() -> object | None:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return None


# Looked up in the parent: between fork and exec the child only calls it.
_PRCTL = _libc_prctl()


def _die_with_parent() -> None:
    """In the child, before exec: receive SIGTERM when the parent dies (Linux; elsewhere a no-op)."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGTERM)  # type: ignore[operator]


class WorkerChildren:
    """`count` `codewell worker` child processes, kept running until `stop`."""

    def __init__(self, runtime: Runtime, count: int, concurrency: int) -> None:
        self.runtime = runtime
        self.count = count
        self.concurrency = concurrency
        self.processes: list[subprocess.Popen[bytes]] = []
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None

    def command(self) -> list[str]:
        settings = self.runtime.settings
        return [
            sys.executable,
            "-m",
            "codewell",
            "--data-dir",
            str(settings.data_dir),
            "--database-url",
            settings.database_url,
            "worker",
            "--concurrency",
            str(self.concurrency),
        ]

    def _spawn(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 (only prctl: no locks, no allocation worth fearing)
            env={**os.environ, "CODEWELL_WORKER_OF": str(os.getpid())},
        )

    def start(self) -> None:
        if self.count <= 0 or self._watcher is not None:
            return
        self.processes = [self._spawn() for _ in range(self.count)]
        self._watcher = threading.Thread(target=self._watch, name="job-children", daemon=True)
        self._watcher.start()
        log.info("started %s job worker processes: %s", self.count, [p.pid for p in self.processes])

    def _watch(self) -> None:
        while not self._stop.wait(RESTART_SECONDS):
            for index, process in enumerate(self.processes):
                if process.poll() is not None and not self._stop.is_set():
                    log.warning(
                        "job worker process %s exited with %s; starting another", process.pid, process.returncode
                    )
                    self.processes[index] = self._spawn()

    def stop(self, grace_seconds: float = 15.0) -> None:
        """SIGTERM every child, wait up to `grace_seconds` for their running jobs, then kill what is left."""
        self._stop.set()
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_seconds
        for process in self.processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        if self._watcher is not None:
            self._watcher.join(timeout=RESTART_SECONDS + 1)
            self._watcher = None
