"""The `codewell` command as a user runs it: a real process, real files, real exit codes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2 as httpx

from tests import cliprocess

CODEWELL = [sys.executable, "-m", "codewell"]


def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return cliprocess.run(*args, env=full_env, cwd=cwd, timeout=120)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_help_lists_the_commands() -> None:
    result = run("--help")
    assert result.returncode == 0
    for command in ("serve", "db", "config"):
        assert f"  {command} " in result.stdout
    assert "CODEWELL_DATA_DIR" in result.stdout


def test_config_validate_accepts_a_valid_file(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text('// comment\n{"mcp.enabled": false}')
    result = run("config", "validate", str(path))
    assert result.returncode == 0
    assert "valid" in result.stdout


def test_config_validate_reports_problems(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text('{"mcp.tools.disabledd": []}')
    result = run("config", "validate", str(path))
    assert result.returncode == 1
    assert "did you mean 'mcp.tools.disabled'?" in result.stderr
    assert "Traceback" not in result.stderr


def test_unwritable_data_dir_is_one_clear_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = run("--data-dir", str(blocker / "sub"), "db", "upgrade")
    assert result.returncode == 1
    assert result.stderr.startswith("error: cannot create data directory")
    assert "CODEWELL_DATA_DIR" in result.stderr


def test_unreachable_database_hides_the_password(tmp_path: Path) -> None:
    url = f"postgresql://admin:s3cret@127.0.0.1:{free_port()}/x"
    result = run("--data-dir", str(tmp_path), "db", "status", env={"CODEWELL_DATABASE_URL": url})
    assert result.returncode == 1
    assert "cannot connect to the database" in result.stderr
    assert "s3cret" not in result.stderr


def test_db_status_signals_pending_migrations(tmp_path: Path) -> None:
    result = run("--data-dir", str(tmp_path), "--database-url", f"sqlite:///{tmp_path}/x.db", "db", "status")
    assert result.returncode == 3
    assert "codewell db upgrade" in result.stdout
    assert (
        run("--data-dir", str(tmp_path), "--database-url", f"sqlite:///{tmp_path}/x.db", "db", "upgrade").returncode
        == 0
    )


def test_serve_refuses_pending_migrations_without_migrate(tmp_path: Path) -> None:
    result = run("--data-dir", str(tmp_path), "serve", "--no-migrate", "--port", str(free_port()))
    assert result.returncode == 1
    assert "migrations are pending" in result.stderr


def test_serve_with_invalid_site_config_does_not_start(tmp_path: Path) -> None:
    (tmp_path / "site-config.json").write_text("{")
    result = run("--data-dir", str(tmp_path), "serve", "--port", str(free_port()))
    assert result.returncode == 1
    assert "is not valid JSON" in result.stderr


def test_serve_starts_answers_and_shuts_down_gracefully(tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [
            *CODEWELL,
            "--data-dir",
            str(tmp_path / "data"),
            "serve",
            "--port",
            str(port),
            "--log-format",
            "json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2)
                break
            except httpx.TransportError:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.2)
        assert response.status_code == 200
        assert (tmp_path / "data" / "codewell.db").exists()
        assert (tmp_path / "data" / "site-config.json").exists()
    finally:
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=30)
    # uvicorn re-raises SIGTERM after its graceful shutdown, so the exit status is the signal's.
    assert process.returncode in (0, -signal.SIGTERM)
    assert '"message": "shut down"' in stderr
    assert f"serving on http://127.0.0.1:{port}" in stdout
    assert '"message": "GET /readyz 200"' in stderr
