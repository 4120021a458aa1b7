"""SQLite connections are kept for as many threads as use the database at once, not opened and closed per use.

SQLAlchemy's default for a file (5 kept, 10 more opened and closed) made a loaded server open a connection for
most checkouts: the file, four PRAGMAs and the schema parsed again each time.
"""

from __future__ import annotations

import threading
from pathlib import Path

from sqlalchemy import event, text

from codewell.db.database import SQLITE_POOL_SIZE, Database

THREADS = 16  # request threads using the database at the same moment on a loaded 2-core server


def _connections_opened_by_rounds(db: Database, rounds: int) -> int:
    opened: list[int] = []
    event.listen(db.engine, "connect", lambda *_: opened.append(1))
    for _ in range(rounds):
        # THREADS checkouts held together, then all returned: the next round finds them in the pool.
        barrier = threading.Barrier(THREADS)

        def use(barrier: threading.Barrier = barrier) -> None:
            with db.engine.connect() as connection:
                connection.execute(text("SELECT 1"))
                barrier.wait(timeout=30)

        threads = [threading.Thread(target=use) for _ in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    return len(opened)


def test_concurrent_checkouts_reuse_their_connections(tmp_path: Path) -> None:
    assert SQLITE_POOL_SIZE >= THREADS
    db = Database(f"sqlite:///{tmp_path / 'pool.db'}")
    try:
        assert _connections_opened_by_rounds(db, rounds=5) == THREADS  # opened in the first round only
    finally:
        db.engine.dispose()
