"""Warm worker processes for the evaluator, and the parent's side of one run (kill timer, host calls).

A worker is a child process (`worker.py`) that runs one script at a time. The pool keeps up to `size` of
them; a worker that hit a limit, crashed or ran `max_runs` scripts is killed and replaced in the background,
so the next caller still finds a warm one. Nothing a script does can reach this process: the worker has no
database or services, and every frame it sends is size-checked.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from codewell.core.errors import Unavailable
from codewell.evaluator import protocol
from codewell.evaluator.sandbox import SandboxLimits

log = logging.getLogger(__name__)

# handle_call(name, args, deadline) -> reply dict {"status", "value", "kind"}; runs in the parent.
CallHandler = Callable[[str, list[Any], float], dict[str, Any]]

STARTUP_TIMEOUT = 20.0


@dataclass(frozen=True, slots=True)
class RunLimits:
    """Limits the parent enforces on one run, around the sandbox's own."""

    sandbox: SandboxLimits
    # Seconds the worker may spend running the script (time spent on host calls is not counted).
    timeout: float = 3.0
    # Seconds for the whole evaluation, host calls included.
    total_timeout: float = 30.0
    # Extra seconds before the kill, so that the sandbox's own clean error normally arrives first.
    grace: float = 0.5


class WorkerDied(Exception):
    """The worker stopped during a run: `kind` is "time_limit" (killed by our timer), "cpu_limit"
    (RLIMIT_CPU's SIGXCPU) or "crashed" (anything else: a signal, an exit, a broken protocol)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class Worker:
    """One child process speaking the frame protocol over its stdin/stdout."""

    def __init__(self, address_space: int, max_frame: int) -> None:
        self.runs = 0
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-m", "codewell.evaluator.worker", str(address_space)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            # Nothing of the server's environment (database URL, secrets) reaches the worker.
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
            cwd="/",
            close_fds=True,
            # Its own process group: a terminal's Ctrl-C goes to the server, which then closes the pool.
            start_new_session=True,
        )
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self._in = self.process.stdin.fileno()
        self._reader = protocol.FrameReader(self.process.stdout.fileno(), max_frame)
        try:
            ready = self._reader.read(time.monotonic() + STARTUP_TIMEOUT)
        except protocol.ProtocolError:
            ready = None
        if ready is None or ready["type"] != "ready":
            self.kill()
            raise Unavailable(
                "the evaluator could not start a worker process", hint="check the server log; retry later"
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def run(self, script: str, limits: RunLimits, handle_call: CallHandler) -> dict[str, Any]:
        """The sandbox outcome as a dict; WorkerDied if the worker was killed or crashed."""
        self.runs += 1
        self._send({"type": "run", "script": script, "limits": limits.sandbox.as_dict()})
        started = time.monotonic()
        total_deadline = started + limits.total_timeout
        budget = limits.timeout + limits.grace
        while True:
            waited_from = time.monotonic()
            deadline = min(waited_from + budget, total_deadline)
            try:
                message = self._reader.read(deadline)
            except protocol.ProtocolError as exc:
                raise self._died(str(exc)) from None
            budget -= time.monotonic() - waited_from
            if message is None:
                self.kill()
                raise WorkerDied("killed after the time limit", "time_limit")
            if message["type"] == "done":
                outcome = message.get("outcome")
                if not isinstance(outcome, dict):
                    raise self._died("the worker sent a malformed outcome")
                return outcome
            if message["type"] != "call":
                raise self._died(f"unexpected message {message['type']!r}")
            reply = handle_call(str(message.get("name")), list(message.get("args") or []), total_deadline)
            self._send({"type": "reply", **reply})

    def _send(self, message: dict[str, Any]) -> None:
        try:
            protocol.write_frame(self._in, message)
        except OSError as exc:
            raise self._died(f"the pipe to the worker failed: {exc}") from None

    def _died(self, reason: str) -> WorkerDied:
        self.kill()
        if self.process.returncode == -signal.SIGXCPU:
            return WorkerDied("stopped by its CPU time limit", "cpu_limit")
        return WorkerDied(f"{reason} (exit status {self.process.returncode})", "crashed")

    def kill(self) -> None:
        """Stop the process (if still running) and reap it."""
        if self.process.poll() is None:
            self.process.kill()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL is not ignorable
            log.error("evaluator worker %d did not exit after SIGKILL", self.pid)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


class WorkerPool:
    """Up to `size` warm workers; `acquire` hands out an idle one or starts one, `release` recycles."""

    def __init__(self, size: int, *, address_space: int, max_frame: int, max_runs: int = 500) -> None:
        self.size = size
        self.address_space = address_space
        self.max_frame = max_frame
        self.max_runs = max_runs
        self._idle: list[Worker] = []
        self._live = 0  # idle + busy + starting
        self._closed = False
        self._cond = threading.Condition()

    def _start(self) -> Worker:
        return Worker(self.address_space, self.max_frame)

    def warm(self, count: int | None = None) -> None:
        """Start workers until `count` (default: all `size`) are alive; blocks until they are ready."""
        target = self.size if count is None else min(count, self.size)
        while True:
            with self._cond:
                if self._closed or self._live >= target:
                    return
                self._live += 1
            self._add_started()

    def _add_started(self) -> None:
        # Called with a slot already reserved in _live.
        try:
            worker = self._start()
        except Exception:
            with self._cond:
                self._live -= 1
                self._cond.notify()
            raise
        with self._cond:
            if not self._closed:
                self._idle.append(worker)
                self._cond.notify()
                return
            self._live -= 1
        worker.kill()

    def acquire(self, timeout: float) -> Worker:
        """An idle worker (started if needed); Unavailable when all are busy for `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                if self._closed:
                    raise Unavailable("the evaluator is shutting down", hint="retry in a moment")
                while self._idle:
                    worker = self._idle.pop()
                    if worker.process.poll() is None:
                        return worker
                    # Died while idle (killed from outside): never hand it to a caller.
                    self._live -= 1
                    worker.kill()
                if self._live < self.size:
                    self._live += 1
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise Unavailable(f"all {self.size} evaluator workers are busy", hint="retry in a few seconds")
                self._cond.wait(remaining)
        try:
            return self._start()
        except Exception:
            with self._cond:
                self._live -= 1
                self._cond.notify()
            raise

    def release(self, worker: Worker, *, healthy: bool) -> None:
        """Return a worker; an unhealthy or worn one is killed and a fresh one started in the background."""
        with self._cond:
            if healthy and not self._closed and worker.runs < self.max_runs and worker.process.poll() is None:
                self._idle.append(worker)
                self._cond.notify()
                return
        worker.kill()
        with self._cond:
            if self._closed:
                self._live -= 1
                return
            # Keep the slot reserved: the replacement takes it over.
        threading.Thread(target=self._replace, name="evaluator-worker-start", daemon=True).start()

    def _replace(self) -> None:
        try:
            self._add_started()
        except Exception:
            log.exception("could not start a replacement evaluator worker")

    def idle_pids(self) -> list[int]:
        """Process IDs of the idle workers (for monitoring and tests)."""
        with self._cond:
            return [worker.pid for worker in self._idle]

    def stats(self) -> dict[str, int]:
        with self._cond:
            return {"size": self.size, "live": self._live, "idle": len(self._idle)}

    def close(self) -> None:
        """Kill the idle workers; busy ones are killed when released."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._live -= len(idle)
            self._cond.notify_all()
        for worker in idle:
            worker.kill()
