"""The mcp capability: the tool server at /.api/mcp, /.api/mcp/all and /.api/mcp/deepsearch."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.routing import BaseRoute

from codewell.capability import Capability
from codewell.mcp.setup import setup
from codewell.runtime import Runtime


def mcp_routes(runtime: Runtime) -> Sequence[BaseRoute]:
    """The MCP routes, imported when the app is built: the MCP SDK takes ~0.7 s to import, which every other
    `codewell` command would otherwise pay (the one justified import inside a function in mcp/)."""
    from codewell.mcp import http  # noqa: PLC0415

    return http.routes(runtime)


CAPABILITY = Capability(name="mcp", setup=setup, routes=mcp_routes)
