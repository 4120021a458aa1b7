"""The oauth capability: codewell as an OAuth 2 authorization server for MCP clients."""

from __future__ import annotations

from codewell.capability import Capability, templates_of
from codewell.oauth import routes
from codewell.oauth.cli import oauth
from codewell.oauth.setup import setup

CAPABILITY = Capability(
    name="oauth", setup=setup, routes=routes.routes, commands=[oauth], templates=templates_of(__file__)
)
