"""One exception hierarchy for the service layer, mapped once to HTTP statuses and MCP error results."""

from __future__ import annotations


class CodewellError(Exception):
    """Base of every error a user can cause or see; `message` is safe to show to the caller."""

    code = "internal"
    http_status = 500

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class InvalidInput(CodewellError):
    """The request is malformed: a bad parameter, query, path or range."""

    code = "invalid_input"
    http_status = 400


class Unauthenticated(CodewellError):
    """No valid credentials were presented."""

    code = "unauthenticated"
    http_status = 401


class PermissionDenied(CodewellError):
    """The caller is known but may not do this. Never used for objects the caller may not see."""

    code = "forbidden"
    http_status = 403


class NotFound(CodewellError):
    """The object does not exist, or the caller may not see it (the two read the same)."""

    code = "not_found"
    http_status = 404


class Conflict(CodewellError):
    """The object already exists or the change contradicts the current state."""

    code = "conflict"
    http_status = 409


class QuotaExceeded(CodewellError):
    """A metered resource (credits, rate) is used up."""

    code = "quota_exceeded"
    http_status = 429


class Unavailable(CodewellError):
    """A dependency (database, index, mirror) is not ready; retrying later may work."""

    code = "unavailable"
    http_status = 503
    # Seconds after which a retry may work, sent as `Retry-After`; None when nobody can say.
    retry_after: int | None = None


class StorageUnavailable(Unavailable):
    """The database or the data directory cannot be written (or read) now: a write lock held past the busy
    timeout, a read-only or immutable file system, a full disk, an I/O error. The fault is outside codewell and
    usually clears by itself or by an operator's hand, so the caller is told to retry (503 + Retry-After).

    `cause` is a short, stable phrase ("database locked", "data directory full") that names the fault in the
    log (logged once per cause and interval, not once per request) and in /readyz.
    """

    code = "storage_unavailable"

    def __init__(self, cause: str, detail: str = "", *, retry_after: int = 10, hint: str | None = None) -> None:
        message = f"storage unavailable: {cause}" + (f" ({detail})" if detail else "")
        super().__init__(message, hint=hint or "retry later; an operator can see the cause in /readyz and the log")
        self.cause = cause
        self.retry_after = retry_after


class ConfigError(CodewellError):
    """The site configuration or process settings are invalid."""

    code = "config_error"
    http_status = 500
