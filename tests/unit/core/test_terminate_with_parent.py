"""`terminate_with_parent`: a server a script started ends when the script is killed, whose clean-up never runs
(the benches start their servers so; a killed bench once left a web process, a worker and three searchers)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# The script: starts a long-lived child with (or without) the preexec function, prints its pid, then waits.
SCRIPT = """
import subprocess, sys, time
from codewell.core.processes import terminate_with_parent
tied = sys.argv[1] == "tied"
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                         preexec_fn=terminate_with_parent if tied else None)
print(child.pid, flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie has ended; PID 1 reaps it when it gets round to it


def _start(mode: str) -> tuple[subprocess.Popen[str], int]:
    script = subprocess.Popen([sys.executable, "-c", SCRIPT, mode], stdout=subprocess.PIPE, text=True)
    assert script.stdout is not None
    return script, int(script.stdout.readline())


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
def test_the_child_ends_when_the_script_is_killed(signum: int) -> None:
    script, child = _start("tied")
    with script:  # closes its pipe and waits for it
        assert _alive(child)
        script.send_signal(signum)
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def test_without_it_the_child_outlives_the_script() -> None:
    """The control: what the benches did before (so the test above could fail)."""
    script, child = _start("untied")
    try:
        with script:
            script.kill()
        time.sleep(0.5)
        assert _alive(child)
    finally:
        os.kill(child, signal.SIGKILL)
