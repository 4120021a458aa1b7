"""Storage faults answer 503 with Retry-After (codewell.http.errors), whichever layer raised them: the database
layer's StorageUnavailable, or an OSError from writing into an immutable data directory."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from starlette.testclient import TestClient

from codewell.core.errors import CodewellError, StorageUnavailable
from codewell.core.storage import log_storage_fault
from codewell.http.errors import codewell_error_handler, os_error_handler, unhandled_error_handler
from tests.storage_faults import immutable


def _app(data: Path, *, os_handler: bool) -> Starlette:
    async def write(request: Request) -> Response:
        (data / "cache" / "entry").write_text("x")  # as a cache on disk would
        return PlainTextResponse("ok")

    async def locked(request: Request) -> Response:
        raise StorageUnavailable("database locked", "database is locked", retry_after=5)

    async def elsewhere(request: Request) -> Response:
        # EPERM outside the data directory: a bug or a configuration error, not a storage fault.
        (data.parent / "outside" / "file").write_text("x")
        return PlainTextResponse("written")

    handlers: dict[type[Exception], object] = {
        CodewellError: codewell_error_handler,
        Exception: unhandled_error_handler,
    }
    if os_handler:
        handlers[OSError] = os_error_handler
    app = Starlette(
        routes=[
            Route("/.api/write", write),
            Route("/page", write),
            Route("/.api/locked", locked),
            Route("/x", elsewhere),
        ],
        exception_handlers=handlers,  # type: ignore[arg-type]
    )
    app.state.runtime = SimpleNamespace(settings=SimpleNamespace(data_dir=data))
    return app


@pytest.mark.parametrize("os_handler", [True, False], ids=["os_error_handler", "unhandled_error_handler"])
def test_an_immutable_data_dir_answers_503_and_logs_once(
    tmp_path: Path, os_handler: bool, caplog: pytest.LogCaptureFixture
) -> None:
    log_storage_fault.reset()
    data = tmp_path / "data"
    (data / "cache").mkdir(parents=True)
    client = TestClient(_app(data, os_handler=os_handler), raise_server_exceptions=False)
    assert client.get("/.api/write").status_code == 200
    with immutable(data):
        answers = [client.get("/.api/write") for _ in range(3)]
        page = client.get("/page")
    for answer in answers:
        assert (answer.status_code, answer.headers["retry-after"]) == (503, "30")
        assert answer.json()["error"]["code"] == "storage_unavailable"
        assert "data directory: not writable" in answer.json()["error"]["message"]
    assert (page.status_code, page.headers["retry-after"]) == (503, "30")
    assert page.text.startswith("storage unavailable: data directory: not writable")
    faults = [r for r in caplog.records if getattr(r, "storage_cause", None)]
    assert len(faults) == 1
    assert faults[0].levelno == logging.ERROR
    assert client.get("/.api/write").status_code == 200  # lifted: works again


def test_storage_unavailable_carries_retry_after_and_other_os_errors_stay_500(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "outside").mkdir()
    client = TestClient(_app(tmp_path / "data", os_handler=True), raise_server_exceptions=False)
    locked = client.get("/.api/locked")
    assert (locked.status_code, locked.headers["retry-after"]) == (503, "5")
    assert locked.json()["error"]["message"] == "storage unavailable: database locked (database is locked)"
    assert client.get("/x").status_code == 200
    with immutable(tmp_path / "outside"):
        other = client.get("/x")
    assert other.status_code == 500
    assert "retry-after" not in other.headers
