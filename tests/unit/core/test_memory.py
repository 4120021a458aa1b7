"""core/memory.py: a server process's malloc arenas are capped, so threads cannot fragment it across many."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from codewell.core.memory import limit_malloc_arenas

# Twelve threads alive at once, each allocating blocks that malloc serves from an arena (below its mmap threshold);
# then glibc's own report of its heaps (malloc_info: one <heap nr=...> per arena).
PROBE = """
import ctypes, sys, threading
from codewell.core.memory import limit_malloc_arenas
if sys.argv[1] == "limit":
    assert limit_malloc_arenas()
barrier = threading.Barrier(12)
def work():
    blocks = [bytearray(64_000) for _ in range(4)]
    barrier.wait()
    blocks.clear()
threads = [threading.Thread(target=work) for _ in range(12)]
for t in threads: t.start()
for t in threads: t.join()
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
out = libc.fopen(sys.argv[2].encode(), b"w")
libc.malloc_info(0, out)
libc.fclose(out)
"""


def heaps(tmp_path: Path, mode: str, env: dict[str, str] | None = None) -> int:
    report = tmp_path / f"{mode}.xml"
    environment = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | (env or {})
    subprocess.run([sys.executable, "-c", PROBE, mode, str(report)], check=True, env=environment, timeout=60)
    return report.read_text().count("<heap nr=")


def test_the_arena_cap_holds_under_many_threads(tmp_path: Path) -> None:
    assert heaps(tmp_path, "default") > 2  # each new thread takes an arena of its own
    assert heaps(tmp_path, "limit") <= 2


def test_an_operators_malloc_arena_max_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_malloc_arenas() is False
