"""Wire the MCP endpoints into request authentication: they answer unauthenticated callers themselves."""

from __future__ import annotations

from codewell.auth.service import AuthService
from codewell.mcp.endpoints import challenge, endpoint_for_path
from codewell.runtime import Runtime


def setup(runtime: Runtime) -> None:
    """Let anonymous requests reach the MCP endpoints (which answer with the OAuth challenge), let the gate run
    their authentication in its own worker-thread hop, and refuse a rejected credential (unknown, expired or
    revoked token) there with the same challenge (idempotent)."""
    auth = runtime.get(AuthService)
    auth.add_anonymous_path("/.api/mcp")
    # The gate authenticates a header credential in the worker-thread hop of its own decision and tool call.
    auth.add_deferred_path("/.api/mcp")

    def mcp_challenge(path: str) -> str | None:
        endpoint = endpoint_for_path(path)
        return challenge(runtime, endpoint, "invalid_token") if endpoint is not None else None

    auth.add_challenger(mcp_challenge)
