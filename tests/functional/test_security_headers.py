"""Security headers (issue #22): a nonce-based Content-Security-Policy on every rendered page, a locked-down
default policy elsewhere, and `X-Content-Type-Options` / `Referrer-Policy` on every response."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from codewell.capabilities import CAPABILITIES
from codewell.http.templates import TEMPLATES_DIR
from codewell.runtime import Runtime
from tests.factories import auth_headers, make_token, make_user

NONCE = re.compile(r"'nonce-([A-Za-z0-9_-]{16,})'")


def assert_common_headers(headers: Mapping[str, str]) -> None:
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "same-origin"


def test_pages_carry_a_nonce_csp_without_unsafe_inline(client: TestClient) -> None:
    first = client.get("/sign-in")
    second = client.get("/sign-in")
    assert first.status_code == 200
    csp = first.headers["content-security-policy"]
    assert "unsafe-inline" not in csp
    assert "unsafe-eval" not in csp
    for directive in ("default-src 'self'", "object-src 'none'", "base-uri 'none'", "frame-ancestors 'none'"):
        assert directive in csp
    [script_nonce, style_nonce] = NONCE.findall(csp)
    assert script_nonce == style_nonce
    # Styles come from the one stylesheet of this origin ('self'); nothing is inline, not even a style block.
    assert '<link rel="stylesheet" href="/.static/codewell.css">' in first.text
    assert "<style" not in first.text
    assert 'style="' not in first.text
    assert NONCE.findall(second.headers["content-security-policy"])[0] != style_nonce
    assert_common_headers(first.headers)


def test_signed_in_admin_pages_render_under_the_policy(client: TestClient, runtime: Runtime) -> None:
    admin = auth_headers(make_token(runtime, make_user(runtime, "root", site_admin=True)))
    for path in ("/settings/tokens", "/site-admin/users", "/site-admin/roles", "/site-admin/audit"):
        response = client.get(path, headers=admin)
        assert response.status_code == 200, path
        assert "unsafe-inline" not in response.headers["content-security-policy"]
        [nonce, _] = NONCE.findall(response.headers["content-security-policy"])
        assert "<style" not in response.text or f'<style nonce="{nonce}">' in response.text, path
        assert 'style="' not in response.text, path
        # Scripts are this origin's static files or carry the nonce.
        own = response.text.count('<script src="/.static/') + response.text.count(f'<script nonce="{nonce}"')
        assert response.text.count("<script") == own, path


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/.api/users/me", "/-/no/such/page"])
def test_every_other_response_gets_the_default_policy(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.headers["content-security-policy"] == "default-src 'none'; frame-ancestors 'none'; base-uri 'none'"
    assert_common_headers(response.headers)


def template_files() -> list[Path]:
    folders = [TEMPLATES_DIR, *(c.templates for c in CAPABILITIES if c.templates is not None)]
    return sorted(p for folder in folders if folder.is_dir() for p in folder.rglob("*.html"))


def test_templates_have_no_inline_code_the_policy_would_block() -> None:
    files = template_files()
    assert any(p.name == "base.html" for p in files)
    offenders = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        if re.search(r"\sstyle\s*=|\son[a-z]+\s*=|javascript:", text, re.IGNORECASE):
            offenders.append(f"{path.name}: inline style attribute, event handler or javascript: URL")
        for tag in re.findall(r"<(?:script|style)\b[^>]*>", text, re.IGNORECASE):
            if 'nonce="{{ csp_nonce }}"' not in tag and "src=" not in tag:
                offenders.append(f"{path.name}: {tag} without the page nonce")
    assert offenders == []
