"""The worker processes `codewell serve` starts beside its own job threads, so that background work uses every
core (one Python process runs Python code on one core at a time).

They are plain `codewell worker` processes on the server's database and data dir, claiming jobs like any other;
they end with the server: SIGTERM on a graceful stop (they get CHILD_GRACE_SECONDS for their running jobs, then
are killed), and the kernel's parent-death signal (`PR_SET_PDEATHSIG`, also SIGTERM) if the server is killed
outright; a server that died before the child asked for that signal is noticed by the child itself
(`codewell worker` watches the process named in CODEWELL_WORKER_OF). A child that dies is started again after a
pause, and the jobs it was running are released at once (their leases would hold them, and their repository's
next jobs, for 10 minutes or more).
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
from typing import TYPE_CHECKING

from codewell.core.processes import stop_with_parent
from codewell.jobs.service import JobService

if TYPE_CHECKING:
    from codewell.runtime import Runtime

log = logging.getLogger(__name__)

RESTART_SECONDS = 5.0
# What a child gets for its running jobs on SIGTERM (`codewell worker --grace`), and how long `stop` waits for
# it to exit before SIGKILL: the grace, then its pools' shutdown (core/processes.py), with room to spare.
CHILD_GRACE_SECONDS = 10.0
STOP_SECONDS = 15.0


class WorkerChildren:
    """`count` `codewell worker` child processes, kept running until `stop`."""

    def __init__(self, runtime: Runtime, count: int, concurrency: int) -> None:
        self.runtime = runtime
        self.count = count
        self.concurrency = concurrency
        self.processes: list[subprocess.Popen[bytes]] = []
        self._stop = threading.Event()
        self._terminated_at = 0.0
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
            "--grace",
            str(CHILD_GRACE_SECONDS),
        ]

    def _spawn(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            # Only prctl and getppid run between fork and exec: no locks, no allocation worth fearing.
            # Started by the server's long-lived threads (the watcher, the event loop's executor), so the parent-death
            # signal, which the kernel sends when the starting *thread* ends, comes with the server's end.
            preexec_fn=functools.partial(stop_with_parent, os.getpid(), 1),  # noqa: PLW1509
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
                    self._release(process.pid)
                    self.processes[index] = self._spawn()

    def _release(self, pid: int) -> None:
        """The jobs a dead child was running: claimable now, not when their leases run out."""
        try:
            released = self.runtime.get(JobService).release_process(socket.gethostname(), pid)
        except Exception:  # the database may be down: the leases then run out as before
            log.exception("releasing the jobs of job worker process %s failed", pid)
            return
        if released:
            log.warning("released %s jobs of job worker process %s", released, pid)

    def terminate(self) -> None:
        """SIGTERM every child (they let their running jobs finish meanwhile) and start no other; `stop` waits.

        Once: a second SIGTERM must not reach a child that is already stopping."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._terminated_at = time.monotonic()
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)

    def stop(self, grace_seconds: float = STOP_SECONDS) -> None:
        """SIGTERM every child, wait up to `grace_seconds` (from `terminate`, when that came first) for their
        running jobs, then kill what is left."""
        self.terminate()
        deadline = self._terminated_at + grace_seconds
        for process in self.processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        if self._watcher is not None:
            self._watcher.join(timeout=RESTART_SECONDS + 1)
            self._watcher = None
