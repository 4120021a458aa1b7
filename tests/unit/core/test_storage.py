"""Storage faults as the file system shows them (codewell.core.storage), on real files: chattr +i, a full tmpfs."""

from __future__ import annotations

import errno
import logging
import time
from pathlib import Path

import pytest

from codewell.core.errors import ConfigError
from codewell.core.settings import Settings
from codewell.core.storage import CachedProbe, LogOnce, probe_directory, storage_error, unwritable_flag
from tests.storage_faults import fill, immutable, tmpfs


def test_the_immutable_flag_is_seen_and_its_absence_too(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    assert not unwritable_flag(tmp_path / "file")
    assert not unwritable_flag(tmp_path / "missing")
    with immutable(tmp_path):
        assert unwritable_flag(tmp_path / "file")
        assert unwritable_flag(tmp_path)
    assert not unwritable_flag(tmp_path / "file")


def test_os_errors_inside_the_data_dir_are_storage_faults(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    with immutable(data), pytest.raises(PermissionError) as raised:
        (data / "new").write_text("x")
    fault = storage_error(raised.value, data)
    assert fault is not None
    assert fault.cause == "data directory: not writable"
    assert fault.retry_after == 30
    # The same error outside the data directory is a bug or a configuration error: it stays a 500.
    assert storage_error(raised.value, tmp_path / "elsewhere") is None
    assert storage_error(raised.value, None) is None
    full = storage_error(OSError(errno.ENOSPC, "No space left on device"))
    assert full is not None
    assert full.cause == "data directory: no space left on device"
    assert storage_error(FileNotFoundError(errno.ENOENT, "gone", str(data / "x")), data) is None


def test_the_directory_probe_sees_an_immutable_and_a_full_directory(tmp_path: Path) -> None:
    assert probe_directory(tmp_path) is None
    assert list(tmp_path.iterdir()) == []  # the probe leaves nothing behind
    with immutable(tmp_path):
        assert probe_directory(tmp_path) == f"cannot write to {tmp_path}: data directory: not writable"
    with tmpfs(tmp_path / "small", size="1m") as small:
        assert probe_directory(small) is None
        filler = fill(small)
        assert probe_directory(small) == f"cannot write to {small}: data directory: no space left on device"
        filler.unlink()
        assert probe_directory(small) is None


def test_each_cause_is_logged_once_per_interval_with_the_repeats_counted(caplog: pytest.LogCaptureFixture) -> None:
    once = LogOnce(interval=0.3)
    caplog.set_level(logging.INFO, logger="codewell.storage")
    logged = [once("database locked", "locked") for _ in range(5)]
    assert logged == [True, False, False, False, False]
    assert once("database disk full", "full")  # another cause has its own interval
    time.sleep(0.35)
    assert once("database locked", "locked again")
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["locked", "full", "locked again (4 more since the last report)"]
    assert [getattr(r, "storage_cause", None) for r in caplog.records] == [
        "database locked",
        "database disk full",
        "database locked",
    ]


def test_a_cached_probe_runs_once_per_ttl() -> None:
    calls: list[float] = []

    def probe() -> str | None:
        calls.append(time.monotonic())
        return f"call {len(calls)}"

    cached = CachedProbe(probe, ttl=0.3)
    assert [cached(), cached(), cached()] == ["call 1"] * 3
    time.sleep(0.35)
    assert cached() == "call 2"


def test_the_busy_timeout_is_a_setting_in_seconds() -> None:
    assert Settings.from_env({}).db_busy_timeout == 30.0
    assert Settings.from_env({"CODEWELL_DB_BUSY_TIMEOUT": "2.5"}).db_busy_timeout == 2.5
    for wrong in ("soon", "0", "-1", "100000"):
        with pytest.raises(ConfigError, match="CODEWELL_DB_BUSY_TIMEOUT"):
            Settings.from_env({"CODEWELL_DB_BUSY_TIMEOUT": wrong})
