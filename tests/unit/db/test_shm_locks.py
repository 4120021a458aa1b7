"""Checking the WAL index for the immutable flag never drops SQLite's own locks on it.

POSIX locks belong to the process and the file: closing ANY descriptor of a file releases all of them. A probe
that opened and closed `codewell.db-shm` on every connection checkout released the locks SQLite holds there for
a reader's snapshot, and under load another process then rewrote the WAL index under this one (`database disk
image is malformed`, found by bench/soak_bench.py) or truncated the mapping (SIGBUS).
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy import text

from codewell.core.storage import FlagProbe
from codewell.db.database import Database


def _locks_on(path: Path) -> int:
    """This process's POSIX locks on `path`'s inode (/proc/locks: `... POSIX ADVISORY READ <pid> MAJ:MIN:INODE`)."""
    inode = os.stat(path).st_ino
    mine = str(os.getpid())
    count = 0
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        # id: POSIX ADVISORY READ|WRITE pid maj:min:inode start end (a blocked one has "->" after the id)
        if "->" in fields or len(fields) < 8 or fields[1] != "POSIX":
            continue
        if fields[4] == mine and fields[5].rsplit(":", 1)[-1] == str(inode):
            count += 1
    return count


def test_a_connection_checkout_keeps_the_locks_a_reader_holds_on_the_wal_index(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'codewell.db'}")
    shm = tmp_path / "codewell.db-shm"
    try:
        with db.engine.begin() as connection:
            connection.execute(text("CREATE TABLE t (x INTEGER)"))
            connection.execute(text("INSERT INTO t VALUES (1)"))
        with db.engine.connect() as reader:
            reader.execute(text("BEGIN"))
            assert reader.execute(text("SELECT count(*) FROM t")).scalar_one() == 1  # a snapshot: a read lock
            held = _locks_on(shm)
            assert held >= 1
            for _ in range(5):  # other checkouts, each probing the flag
                with db.engine.connect() as other:
                    other.execute(text("SELECT 1"))
                assert _locks_on(shm) >= held, "a probe dropped SQLite's locks on the WAL index"
            reader.execute(text("ROLLBACK"))
    finally:
        db.dispose()


def test_the_probe_follows_a_recreated_file(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x")
    probe = FlagProbe(path)
    assert probe() is False
    path.unlink()
    assert probe() is False  # gone: not unwritable
    path.write_bytes(b"y")
    assert probe() is False
    probe.close()


def test_a_probe_keeps_at_most_two_descriptors_however_often_the_file_is_recreated(tmp_path: Path) -> None:
    """The current file's descriptor and the one it replaced (a lock-free probe may still use it); no more."""
    path = tmp_path / "f"

    def open_on_probed_files() -> int:
        targets = []
        for fd in Path("/proc/self/fd").iterdir():
            try:
                targets.append(fd.readlink())
            except OSError:  # the directory's own descriptor, closed meanwhile
                continue
        # This test's file only (a replaced one reads "<path> (deleted)"): other tests in the same worker process
        # may hold files of other directories open.
        return sum(1 for target in targets if target.parent == tmp_path and target.name.split(" (")[0] == "f")

    probe = FlagProbe(path)
    for content in (b"a", b"b", b"c", b"d"):
        path.unlink(missing_ok=True)
        path.write_bytes(content)
        assert probe() is False
        assert open_on_probed_files() <= 2
    probe.close()
    assert open_on_probed_files() == 0
