"""REST API of code navigation: go_to_definition and find_references, and precise index uploads for CI pipelines.

GET /.api/codenav/definition?repo=R&path=P&symbol=S[&revision=V]            any signed-in reader of R
GET /.api/codenav/references?repo=R&path=P&symbol=S[&revision=V][&limit=N]  any signed-in reader of R

Both answer the tools' structuredContent plus `text`, the tools' text (what `codewell definition` and
`codewell references` print, locally or through `--server`); an unreadable repository is 404 like a missing one.

POST /.api/codeintel/upload?repo=R&commit=C   body: the index.scip bytes (any content type)

    curl -X POST -H "Authorization: token $TOKEN" --data-binary @index.scip \
        "$CODEWELL/.api/codeintel/upload?repo=github.com/acme/app&commit=$GIT_COMMIT"

Site admins only (a token of one). Answers the upload's summary as JSON; 400 for a body that is not a SCIP
index (nothing is stored then) or for a commit the mirror does not have; 413 for a body over the size limit
(site config `codeIntel.maxUploadBytes`, 512 MB by default).
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from codewell.authz import Action
from codewell.codenav import render
from codewell.codenav.precise import PreciseService, format_size
from codewell.codenav.service import DEFAULT_LIMIT, CodeNavService
from codewell.core.errors import InvalidInput
from codewell.http.bodies import BodyTooLarge, read_body
from codewell.http.guards import require
from codewell.http.requests import actor_of, runtime_of
from codewell.runtime import Runtime

_PARAMS = {"repo", "commit"}


def _too_big(limit: int) -> BodyTooLarge:
    return BodyTooLarge(
        f"the SCIP index is over the {format_size(limit)} limit of one upload",
        hint="index a smaller part of the repository, or raise the site config option codeIntel.maxUploadBytes",
    )


async def upload(request: Request) -> Response:
    # The permission first: a refused caller's body is never read.
    actor = require(request, Action.REPOS_MANAGE)
    for key in request.query_params:
        if key not in _PARAMS:
            raise InvalidInput(f"unknown parameter `{key}`", hint="allowed: commit, repo")
    repo = request.query_params.get("repo", "")
    commit = request.query_params.get("commit", "")
    if not repo or not commit:
        raise InvalidInput("repo and commit are required", hint="e.g. ?repo=github.com/acme/app&commit=<sha>")
    service = runtime_of(request).get(PreciseService)
    # Refused by its declared length or as soon as the stream passes the limit: never held whole beyond it.
    data = await read_body(request, service.max_bytes, refuse=_too_big(service.max_bytes))
    # Parsing and storing are blocking (protobuf, git, the database): a worker thread.
    summary = await asyncio.to_thread(service.upload, actor, repo, commit, data)
    return JSONResponse(
        {
            "repo": summary.repo,
            "commit": summary.commit,
            "tool": summary.tool,
            "documents": summary.documents,
            "occurrences": summary.occurrences,
            "replaced": summary.replaced,
            "missingFiles": summary.missing_files[:100],
            "skippedOccurrences": summary.skipped_occurrences,
        }
    )


_NAV_PARAMS = {"repo", "path", "symbol", "revision"}


def _nav_args(request: Request, allowed: set[str]) -> tuple[str, str, str, str | None]:
    for key in request.query_params:
        if key not in allowed:
            raise InvalidInput(f"unknown parameter `{key}`", hint=f"allowed: {', '.join(sorted(allowed))}")
    repo, path, symbol = (request.query_params.get(k, "") for k in ("repo", "path", "symbol"))
    if not repo or not path or not symbol:
        raise InvalidInput(
            "repo, path and symbol are required", hint="e.g. ?repo=github.com/acme/app&path=a.py&symbol=f"
        )
    return repo, path, symbol, request.query_params.get("revision") or None


async def definition(request: Request) -> Response:
    repo, path, symbol, revision = _nav_args(request, _NAV_PARAMS)
    service = runtime_of(request).get(CodeNavService)
    # Index reads and git: a worker thread.
    found = await asyncio.to_thread(service.go_to_definition, actor_of(request), repo, path, symbol, revision)
    return JSONResponse({**render.definitions_json(found), "text": render.definitions_text(found)})


async def references(request: Request) -> Response:
    repo, path, symbol, revision = _nav_args(request, {*_NAV_PARAMS, "limit"})
    raw = request.query_params.get("limit") or str(DEFAULT_LIMIT)
    if not raw.isdigit():
        raise InvalidInput(f"limit must be a whole number (got {raw!r})", hint="e.g. ?limit=50")
    service = runtime_of(request).get(CodeNavService)
    found = await asyncio.to_thread(service.find_references, actor_of(request), repo, path, symbol, revision, int(raw))
    return JSONResponse({**render.references_json(found), "text": render.references_text(found)})


def routes(runtime: Runtime) -> list[BaseRoute]:
    return [
        Route("/.api/codeintel/upload", upload, methods=["POST"]),
        Route("/.api/codenav/definition", definition, methods=["GET"]),
        Route("/.api/codenav/references", references, methods=["GET"]),
    ]
