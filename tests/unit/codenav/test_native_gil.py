"""The native C scanner (codenav/_lex.c) lexes, parses and writes its SQLite rows without the GIL.

A job worker builds the symbol index in a job thread; while a scan of a big file held the GIL, the worker's main
thread could not run its SIGTERM handler nor exit. Here another Python thread must keep running during a long
scan, the writer refuses a second call while one runs, and what the writer stores is still what scan_c returns.
"""

from __future__ import annotations

import functools
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from codewell.codenav import _lex
from tests.gilcheck import refusals_while, ticks_during

# How long the measured call is made to take (from a first, short call's speed): >= 0.2 s on any machine.
TARGET_SECONDS = 0.4
TABLES = (
    "CREATE TABLE symbols (file_id, name, kind, container, line, col, end_line, end_col, start_line, start_col,"
    " stop_line, stop_col);"
    "CREATE TABLE occurrences (name, file_id, positions);"
    "CREATE TABLE imports (file_id, module, name, alias, line);"
)


@functools.cache
def c_source(functions: int) -> bytes:
    """Kernel-like C: includes, structs, functions calling each other."""
    parts = ['#include <linux/slab.h>\n#include "internal.h"\n']
    for i in range(functions):
        parts.append(
            f"struct item_{i} {{ int count; struct item_{i} *next; }};\n"
            f"static int walk_{i}(struct item_{i} *it, int limit)\n{{\n"
            f"\tint n = 0; /* counts items */\n\twhile (it && n < limit) {{ it = it->next; n++; }}\n"
            f"\treturn n + walk_{max(i - 1, 0)}(NULL, limit);\n}}\n"
        )
    return "".join(parts).encode()


@functools.cache
def sized_functions() -> int:
    """How many c_source functions scan_c takes about TARGET_SECONDS to scan, from a first sample's speed."""
    took = []
    for _ in range(2):  # the faster of two: a first call may be slow for reasons of its own
        start = time.perf_counter()
        _lex.scan_c(c_source(4000), 1)
        took.append(time.perf_counter() - start)
    return int(4000 * min(200.0, max(1.0, TARGET_SECONDS / max(min(took), 1e-6))))


def long_call(make: Callable[[bytes], Callable[[], object]]) -> tuple[int, float, bytes]:
    """The call `make(data)` run while a thread ticks (ticks_during), the C source doubled until the call takes 0.2 s
    or more (on a loaded machine the sizing calls may have been slow): the ticks, the duration and the source."""
    functions = sized_functions()
    for _ in range(5):
        data = c_source(functions)
        ticks, elapsed = ticks_during(make(data))
        if elapsed >= 0.2:
            return ticks, elapsed, data
        functions *= 2
    raise AssertionError(f"calls up to {functions // 2} functions took under 0.2 s: too short to tell")


def new_index(path: Path) -> _lex.Writer:
    db = sqlite3.connect(path)
    db.executescript(TABLES)
    db.close()
    return _lex.Writer(str(path))


def test_scan_c_lets_other_threads_run() -> None:
    ticks, elapsed, _ = long_call(lambda data: lambda: _lex.scan_c(data, 1))
    assert ticks >= 20, f"{ticks} ticks during a call of {elapsed:.3f} s: the call held the GIL"


def test_writer_scan_lets_other_threads_run(tmp_path: Path) -> None:
    writer = new_index(tmp_path / "index.sqlite")
    writer.begin()
    file_ids: list[int] = []

    def scan(data: bytes) -> Callable[[], object]:
        file_ids.append(len(file_ids) + 1)  # a file of its own for each try
        return lambda: writer.scan(data, file_ids[-1])

    ticks, elapsed, data = long_call(scan)
    writer.commit()
    writer.close()
    assert ticks >= 20, f"{ticks} ticks during a call of {elapsed:.3f} s: the call held the GIL"
    db = sqlite3.connect(tmp_path / "index.sqlite")
    (symbols,) = db.execute("SELECT count(*) FROM symbols WHERE file_id = ?", (file_ids[-1],)).fetchone()
    db.close()
    assert symbols == len(_lex.scan_c(data, 1)[0])  # and wrote every row


def test_a_second_call_while_a_scan_runs_is_refused(tmp_path: Path) -> None:
    # commit() from another thread while scan() binds and steps its statements without the GIL: refused; the scan
    # is not disturbed and the transaction is committed once it ends.
    data = c_source(sized_functions())
    writer = new_index(tmp_path / "index.sqlite")
    writer.begin()
    refused = refusals_while(lambda: writer.scan(data, 1), writer.commit)
    writer.close()
    assert refused, "commit was never refused: the scan held the GIL or took no hold on the writer"
    assert "while another call of the writer runs" in refused[0]
    db = sqlite3.connect(tmp_path / "index.sqlite")
    (symbols,) = db.execute("SELECT count(*) FROM symbols").fetchone()
    db.close()
    assert symbols == len(_lex.scan_c(data, 1)[0])


def test_the_writer_stores_what_scan_c_returns_for_names_and_includes_beyond_ascii(tmp_path: Path) -> None:
    # Without the GIL (a file past 256 KiB) the writer binds ASCII text as it is and takes the GIL for a moment to
    # decode the rest ("replace" like scan_c); an angle include's target is written in <>, quoted ones bare.
    data = (
        b'#include <linux/slab.h>\n#include "local.h"\n#include <caf\xc3\xa9.h>\n#include "b\xffd.h"\n'
        b"int caf\xc3\xa9_count;\nstruct s\xfe { int f\xc3\xa9ld; };\nint g(void) { return caf\xc3\xa9_count; }\n"
    )
    data += b"".join(b"static int plain_%d = %d;\n" % (n, n) for n in range(12_000))  # past 256 KiB: no GIL
    writer = new_index(tmp_path / "index.sqlite")
    writer.begin()
    assert writer.scan(data, 5) == 4
    writer.commit()
    writer.close()
    symbols, occurrences, includes = _lex.scan_c(data, 5)
    db = sqlite3.connect(tmp_path / "index.sqlite")
    try:
        assert db.execute("SELECT * FROM symbols ORDER BY rowid").fetchall() == [tuple(row) for row in symbols]
        assert db.execute("SELECT * FROM occurrences ORDER BY rowid").fetchall() == [tuple(r) for r in occurrences]
        imports = db.execute("SELECT * FROM imports ORDER BY rowid").fetchall()
    finally:
        db.close()
    assert imports == [(5, target, "", "", line) for target, line in includes]
    assert [target for target, _ in includes] == ["<linux/slab.h>", "local.h", "<caf\u00e9.h>", "b\ufffdd.h"]


def test_a_closed_writer_says_so(tmp_path: Path) -> None:
    writer = new_index(tmp_path / "index.sqlite")
    writer.close()
    with pytest.raises(ValueError, match="closed"):
        writer.scan(b"int x;\n", 1)
    with pytest.raises(ValueError, match="closed"):
        writer.commit()
