"""A stopping process starts no more process pools (a job running past its grace must not start one)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
from codewell.core.processes import PoolsStopped, process_pool, stop_pools
before = process_pool(1)
stop_pools()
try:
    process_pool(1)
except PoolsStopped as exc:
    print("refused:", exc)
else:
    print("a new pool after stop_pools")
"""


def test_no_pool_is_made_after_stop_pools() -> None:
    # In a process of its own: stopping is for the whole process, and this one runs other tests.
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "refused: this process is stopping: no new process pool"
