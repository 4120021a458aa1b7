"""The site admin page for pre-registered OAuth clients."""

from __future__ import annotations

import re

import httpx2

from codewell.http.sessions import CSRF_FORM_FIELD
from tests.functional.mcp.served import Served
from tests.functional.oauth.flow import session_cookie

PAGE = "/site-admin/oauth-clients"


def csrf(html: str) -> str:
    found = re.search(rf'name="{CSRF_FORM_FIELD}" value="([^"]+)"', html)
    assert found, html
    return found.group(1)


def test_admin_creates_lists_and_deletes_clients(served: Served) -> None:
    cookies = session_cookie(served, served.user("root", site_admin=True))
    page = httpx2.get(served.url(PAGE), cookies=cookies)
    assert page.status_code == 200
    assert "No clients." in page.text
    form = {
        CSRF_FORM_FIELD: csrf(page.text),
        "action": "add",
        "name": "Claude Code",
        "redirect_uris": "http://localhost:3334/oauth/callback\nhttps://claude.ai/api/mcp/auth_callback",
        "confidential": "1",
    }
    created = httpx2.post(served.url(PAGE), data=form, cookies=cookies)
    assert created.status_code == 200, created.text
    client_id = re.search(r"client_id: <code>(cwc_[0-9a-f]+)</code>", created.text).group(1)  # type: ignore[union-attr]
    assert "client_secret (shown once" in created.text
    assert "https://claude.ai/api/mcp/auth_callback" in created.text

    bad = httpx2.post(served.url(PAGE), data={**form, "redirect_uris": "http://evil.example/cb"}, cookies=cookies)
    assert bad.status_code == 400
    assert "is not allowed" in bad.text

    no_csrf = httpx2.post(served.url(PAGE), data={**form, CSRF_FORM_FIELD: "x"}, cookies=cookies)
    assert no_csrf.status_code == 403

    deleted = httpx2.post(
        served.url(PAGE),
        data={CSRF_FORM_FIELD: csrf(created.text), "action": "delete", "client_id": client_id},
        cookies=cookies,
    )
    assert deleted.status_code == 200
    assert client_id not in deleted.text


def test_non_admins_are_refused(served: Served) -> None:
    cookies = session_cookie(served, served.user("alice"))
    assert httpx2.get(served.url(PAGE), cookies=cookies).status_code == 403
