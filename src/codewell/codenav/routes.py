"""REST API of precise code navigation, for CI pipelines.

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
from codewell.codenav.precise import PreciseService, format_size
from codewell.core.errors import InvalidInput
from codewell.http.bodies import BodyTooLarge, read_body
from codewell.http.guards import require
from codewell.http.requests import runtime_of
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


def routes(runtime: Runtime) -> list[BaseRoute]:
    return [Route("/.api/codeintel/upload", upload, methods=["POST"])]
