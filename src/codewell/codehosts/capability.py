"""The codehosts capability: code host connections, repositories and permissions from them (docs/codehosts.md)."""

from __future__ import annotations

from codewell.capability import Capability
from codewell.codehosts import routes
from codewell.codehosts.cli import codehosts
from codewell.codehosts.setup import setup

CAPABILITY = Capability(name="codehosts", setup=setup, routes=routes.routes, commands=[codehosts])
