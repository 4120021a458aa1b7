"""The MCP endpoints' addresses and the checks made before the transport (no MCP SDK here, so that the
command line and request authentication can use them without importing it)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from codewell.core.tools import Endpoint
from codewell.runtime import Runtime

MCP_PREFIX = "/.api/mcp"
PRM_PREFIX = "/.well-known/oauth-protected-resource"
MCP_SCOPE = "mcp"
_ENDPOINTS = {"": Endpoint.CORE, "/all": Endpoint.ALL, "/deepsearch": Endpoint.DEEPSEARCH}
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


def endpoint_for_path(path: str) -> Endpoint | None:
    """The endpoint for a request path under /.api/mcp (a trailing slash is tolerated), else None."""
    rest = path[len(MCP_PREFIX) :]
    if rest and not rest.startswith("/"):
        return None
    return _ENDPOINTS.get(rest.rstrip("/"))


def resource_url(runtime: Runtime, endpoint: Endpoint) -> str:
    """The canonical URL of an endpoint: the RFC 8707 resource / RFC 9728 `resource` value."""
    return runtime.external_url + endpoint.value


def resource_metadata_url(runtime: Runtime, endpoint: Endpoint) -> str:
    return runtime.external_url + PRM_PREFIX + endpoint.value


def _host_name(host: str) -> str:
    """The host part of a Host header or URL netloc (IPv6 brackets kept off), lower-cased."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _is_loopback(name: str) -> bool:
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_allowed(runtime: Runtime, host: str | None) -> bool:
    """DNS-rebinding guard: the Host must be the external URL's host, a loopback name, or (when the server
    listens on all interfaces without a configured external URL) anything, since the name is unknowable."""
    if not host:
        return False
    name = _host_name(host)
    if _is_loopback(name):
        return True
    external = urlsplit(runtime.external_url).hostname or ""
    if name == external.lower():
        return True
    configured = runtime.config.external_url or runtime.settings.external_url
    return not configured and runtime.settings.host in {"0.0.0.0", "::", ""}


def origin_allowed(runtime: Runtime, origin: str | None, host: str | None) -> bool:
    """Browsers send Origin on cross-site requests: allow none, the instance's own origin, or loopback pages."""
    if not origin:
        return True
    parts = urlsplit(origin)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        return False
    if _is_loopback(parts.hostname.lower()):
        return True
    external = urlsplit(runtime.external_url)
    if (parts.scheme, parts.netloc.lower()) == (external.scheme, external.netloc.lower()):
        return True
    # Same-origin requests (the Host was validated above).
    return parts.netloc.lower() == (host or "").lower()


def challenge(runtime: Runtime, endpoint: Endpoint, error: str = "", description: str = "") -> str:
    """The RFC 6750/9728 `WWW-Authenticate` value for this endpoint."""
    params = [f'resource_metadata="{resource_metadata_url(runtime, endpoint)}"', f'scope="{MCP_SCOPE}"']
    if error:
        params.insert(0, f'error="{error}"')
        if description:
            params.insert(1, f'error_description="{description}"')
    return "Bearer " + ", ".join(params)
