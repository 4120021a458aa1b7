from __future__ import annotations

import os
from pathlib import Path

import pytest

from codewell.config import SiteConfigStore
from codewell.core.errors import ConfigError


def _write(path: Path, text: str) -> None:
    path.write_text(text)
    # Make the change visible even within the file system's timestamp granularity.
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))


def test_missing_file_is_created_with_valid_defaults(tmp_path: Path) -> None:
    path = tmp_path / "site-config.json"
    store = SiteConfigStore.open(path)
    assert path.exists()
    assert store.current.mcp_enabled is True
    assert "docs/configuration.md" in path.read_text()


def test_changes_are_picked_up(tmp_path: Path) -> None:
    path = tmp_path / "site-config.json"
    store = SiteConfigStore.open(path)
    seen = []
    store.on_change(seen.append)
    _write(path, '{"mcp.enabled": false}')
    assert store.refresh() is True
    assert store.current.mcp_enabled is False
    assert len(seen) == 1


def test_invalid_new_file_keeps_the_running_config(tmp_path: Path) -> None:
    path = tmp_path / "site-config.json"
    store = SiteConfigStore.open(path)
    _write(path, '{"mcp.tools.disabled": ["read_file"]}')
    store.refresh()
    _write(path, '{"mcp.tools.disabled": "read_file"}')
    assert store.refresh() is False
    assert store.current.mcp_tools_disabled == ["read_file"]
    assert store.error is not None
    assert "mcp.tools.disabled" in store.error
    _write(path, '{"mcp.tools.disabled": []}')
    assert store.refresh() is True
    assert store.error is None


def test_deleted_file_keeps_the_running_config(tmp_path: Path) -> None:
    path = tmp_path / "site-config.json"
    store = SiteConfigStore.open(path)
    path.unlink()
    assert store.refresh() is False
    assert store.current.mcp_enabled is True
    assert "cannot read site config" in (store.error or "")


def test_invalid_file_at_start_up_is_fatal(tmp_path: Path) -> None:
    path = tmp_path / "site-config.json"
    path.write_text('{"nope": 1}')
    with pytest.raises(ConfigError, match="nope: unknown option"):
        SiteConfigStore.open(path)
