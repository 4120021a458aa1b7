"""The pages' static files at `/.static/<name>`: one stylesheet, one small script and vendored htmx (no build step).

Public (the sign-in page needs the stylesheet too) and cacheable for an hour; the stylesheet is served with
Pygments' token classes appended, so that every page loads exactly one CSS file.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from codewell.core.errors import NotFound
from codewell.runtime import Runtime
from codewell.web.highlight import stylesheet

STATIC_DIR = Path(__file__).parent / "static"
STATIC_PREFIX = "/.static/"
HTMX_VERSION = "2.0.4"
_TYPES = {"codewell.css": "text/css", "codewell.js": "text/javascript", "htmx.min.js": "text/javascript"}


@functools.cache
def _body(name: str) -> tuple[bytes, str]:
    data = (STATIC_DIR / name).read_bytes()
    if name == "codewell.css":
        data += b"\n/* Pygments token classes, light then dark */\n" + stylesheet().encode()
    return data, hashlib.sha256(data).hexdigest()[:16]


async def static_file(request: Request) -> Response:
    name = str(request.path_params["name"])
    if name not in _TYPES:
        raise NotFound(f"no static file {name!r}")
    data, etag = _body(name)
    if request.headers.get("if-none-match") == f'"{etag}"':
        return Response(status_code=304, headers={"etag": f'"{etag}"'})
    headers = {"etag": f'"{etag}"', "cache-control": "public, max-age=3600", "x-content-type-options": "nosniff"}
    return Response(data, media_type=_TYPES[name], headers=headers)


def routes(runtime: Runtime) -> list[BaseRoute]:
    return [Route(STATIC_PREFIX + "{name}", static_file, methods=["GET"])]
