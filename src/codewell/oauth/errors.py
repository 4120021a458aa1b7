"""OAuth protocol errors (RFC 6749 §5.2 / RFC 7591 §3.2.2 codes), separate from codewell's service errors
because their wire form is fixed: `{"error": code, "error_description": ...}`."""

from __future__ import annotations


class OAuthError(Exception):
    """An OAuth error response. `redirectable` errors at /authorize go back to the client's redirect URI."""

    def __init__(self, error: str, description: str, *, status: int = 400, redirectable: bool = True) -> None:
        super().__init__(f"{error}: {description}")
        self.error = error
        self.description = description
        self.status = status
        self.redirectable = redirectable

    def as_json(self) -> dict[str, str]:
        return {"error": self.error, "error_description": self.description}
