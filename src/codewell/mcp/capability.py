"""The mcp capability: the tool server at /.api/mcp, /.api/mcp/all and /.api/mcp/deepsearch."""

from __future__ import annotations

from codewell.capability import Capability
from codewell.mcp import http
from codewell.mcp.setup import setup

CAPABILITY = Capability(name="mcp", setup=setup, routes=http.routes)
