"""`python -m codewell` as a real process, without paying the interpreter start and library imports every time.

A fresh `python -m codewell` spends 3-5 s on a slow machine importing before it does anything, and the CLI tests
start dozens. `run` forks each command instead from one interpreter per test process (`tests/cli_zygote.py`) that
has imported the third-party libraries the CLI uses; codewell's own modules are imported afresh by each command,
since their module-level objects read the environment. The child is a separate process with its own pid,
environment, working directory, process group, standard streams (stdin is /dev/null) and exit status, and it
runs the `codewell` module as `-m` does. A server that a test signals or talks to while it runs stays a plain
`subprocess.Popen`.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ZYGOTE = Path(__file__).with_name("cli_zygote.py")
COMMAND = [sys.executable, "-m", "codewell"]
# The fork server starts on first use, maybe inside a test that changed the environment or the directory (for
# itself, not for later tests): it starts from the state at collection instead.
_START_ENV, _START_DIR = dict(os.environ), Path.cwd()


class _Zygote:
    def __init__(self) -> None:
        requests_read, self._requests = os.pipe()
        self._answers, answers_write = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, str(ZYGOTE), str(requests_read), str(answers_write)],
            pass_fds=(requests_read, answers_write),
            env=_START_ENV,
            cwd=_START_DIR,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(requests_read)
        os.close(answers_write)
        self._pending = b""
        self._child: int | None = None

    def alive(self) -> bool:
        return self.process.poll() is None

    def _answer(self, deadline: float) -> dict[str, Any]:
        while b"\n" not in self._pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self._answers], [], [], remaining)[0]:
                raise TimeoutError
            chunk = os.read(self._answers, 4096)
            if not chunk:
                raise RuntimeError("the codewell fork server exited")
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        answer: dict[str, Any] = json.loads(line)
        return answer

    def run(self, request: dict[str, Any], timeout: float) -> int:
        """The command's exit status; TimeoutError once it has been killed for taking longer than `timeout`."""
        os.write(self._requests, (json.dumps(request) + "\n").encode())
        try:
            # The first answer waits for the server's imports: up to a minute on a slow, loaded machine.
            self._child = int(self._answer(time.monotonic() + 300)["pid"])
        except TimeoutError:
            raise RuntimeError("the codewell fork server does not answer") from None
        try:
            returncode = int(self._answer(time.monotonic() + timeout)["returncode"])
        except TimeoutError:
            os.killpg(self._child, signal.SIGKILL)  # the command and anything it started
            self._answer(time.monotonic() + 60)  # the server reaps the child before it reads on
            self._child = None
            raise
        self._child = None
        return returncode

    def close(self) -> None:
        if self._child is not None:  # interrupted while a command runs (a test's own timeout, Ctrl-C)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._child, signal.SIGKILL)
        os.close(self._requests)  # end of input: the server exits
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._answers)


_lock = threading.Lock()
_zygote: list[_Zygote] = []


def _shutdown() -> None:
    for zygote in _zygote:
        zygote.close()
    _zygote.clear()


atexit.register(_shutdown)


def run(
    *args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Like `subprocess.run([sys.executable, "-m", "codewell", *args], capture_output=True, text=True, ...)`."""
    with _lock, tempfile.TemporaryDirectory(prefix="codewell-cli-") as scratch:
        if _zygote and not _zygote[0].alive():
            _zygote.pop().close()
        if not _zygote:
            _zygote.append(_Zygote())
        out, err = Path(scratch, "stdout"), Path(scratch, "stderr")
        request = {
            "args": list(args),
            "env": dict(os.environ if env is None else env),
            "cwd": str(cwd or Path.cwd()),
            "stdout": str(out),
            "stderr": str(err),
        }
        try:
            returncode = _zygote[0].run(request, timeout)
        except TimeoutError:
            raise subprocess.TimeoutExpired([*COMMAND, *args], timeout, out.read_bytes(), err.read_bytes()) from None
        except BaseException:
            # Interrupted mid-request: the server may still owe answers, so the next command gets a new one.
            _zygote.pop().close()
            raise
        # read_text decodes as text=True does: the locale's encoding, universal newlines.
        return subprocess.CompletedProcess([*COMMAND, *args], returncode, out.read_text(), err.read_text())
