"""Where each repository's documents live: `<root>/manifest.json` (repository id → shard directory).

Several processes (the web server, workers, the CLI) index into one data directory at the same time, so every
change is a read-modify-write under an exclusive `flock` on `manifest.lock`, and the file is replaced
atomically (tmp + `os.replace`): readers never lock, they read whichever complete version is in place and
notice a new one by its stat identity (one `stat` per query). Shards are built in `building/` and moved into
`shards/` inside the locked section that names them, so a shard directory no manifest names is garbage:
it is moved to `trash/` under the lock and deleted after it (readers in flight keep their mappings).
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from codewell.search.index.builder import FORMAT_VERSION

__all__ = ["Manifest", "Stamp", "new_shard_name"]

Stamp = tuple[int, int, int, int]
_counter = itertools.count()


def new_shard_name() -> str:
    """A fresh shard directory name: `g<time ns>-<pid>-<n>` (the pid tells whether its builder still runs)."""
    return f"g{time.time_ns()}-{os.getpid()}-{next(_counter)}"


class Manifest:
    """The manifest file of a search data directory and the shard directories it names."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / "manifest.json"
        self.shards = root / "shards"
        self.building = root / "building"
        self.trash = root / "trash"

    def stamp(self) -> Stamp | None:
        """The file's identity (each replace gives it a new inode and times); None when there is none."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size

    def read(self) -> dict[int, str]:
        """Repository id → shard directory name; empty without a manifest or with one of another format.

        Another format means shards of another version: every repository counts as not indexed, and the
        first update starts afresh (its garbage collection removes the old shards).
        """
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        if not isinstance(data, dict) or data.get("format") != FORMAT_VERSION:
            return {}
        return {int(k): str(v) for k, v in data.get("repos", {}).items()}

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / "manifest.lock", "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def update(self, change: Callable[[dict[int, str]], None]) -> dict[int, str]:
        """Apply `change` to the current mapping under the lock, write it atomically, collect garbage.

        `change` runs with the lock held: it sees the latest mapping (another process may have changed it
        since the caller last read it) and may move a built shard into `shards/`.
        """
        with self._locked():
            repos = self.read()
            change(repos)
            self.shards.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f"manifest.{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"format": FORMAT_VERSION, "repos": {str(k): v for k, v in repos.items()}}))
            os.replace(tmp, self.path)
            self._discard_unnamed(set(repos.values()))
        self.empty_trash()
        return repos

    def _discard_unnamed(self, named: set[str]) -> None:
        """Move every entry of `shards/` the manifest does not name to `trash/` (under the lock)."""
        self.trash.mkdir(parents=True, exist_ok=True)
        for entry in os.listdir(self.shards):
            if entry not in named:
                try:
                    os.replace(self.shards / entry, self.trash / f"{entry}.{time.time_ns()}")
                except FileNotFoundError:
                    continue

    def empty_trash(self) -> None:
        if not self.trash.is_dir():
            return
        for entry in os.listdir(self.trash):
            path = self.trash / entry
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)

    def building_dir(self, name: str) -> Path:
        self.building.mkdir(parents=True, exist_ok=True)
        return self.building / name

    def install(self, name: str) -> None:
        """Move the built shard `name` from `building/` into `shards/` (call inside `update`'s change)."""
        self.shards.mkdir(parents=True, exist_ok=True)
        os.replace(self.building / name, self.shards / name)

    def remove_abandoned_builds(self) -> None:
        """Delete builds whose process is gone (crashed or killed mid-build); running ones are kept."""
        if not self.building.is_dir():
            return
        for entry in os.listdir(self.building):
            pid = _builder_pid(entry)
            if pid is not None and not _alive(pid):
                shutil.rmtree(self.building / entry, ignore_errors=True)


def _builder_pid(name: str) -> int | None:
    parts = name.split(".", 1)[0].split("-")
    return int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
