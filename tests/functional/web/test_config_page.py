"""The site configuration page (issue #32, item 6), in a real browser: each option's help from the schema beside
the editor, the text checked as you type by the server's own validation (nothing saved), strict booleans said
plainly, and no serious or critical axe-core violation, light and dark."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from codewell.runtime import Runtime
from tests.browser import (
    axe_source,
    serious_violations,
    serve_app,
    signed_in_tab,
)
from tests.factories import make_user

PASSWORD = "correct horse battery staple"


@pytest.fixture
def site(runtime: Runtime) -> Iterator[str]:
    make_user(runtime, "root", password=PASSWORD, site_admin=True)
    with serve_app(runtime) as url:
        yield url


@pytest.mark.browser
def test_the_configuration_page_checks_as_you_type_and_shows_each_options_help(runtime: Runtime, site: str) -> None:
    path = runtime.site_config.path
    before = path.read_text()
    axe = axe_source()
    with signed_in_tab(site, "root", PASSWORD) as (tab, console):
        tab.goto(f"{site}/site-admin/configuration")
        row = tab.locator("#option-mcp\\.enabled")
        expect(row).to_contain_text("boolean")
        expect(row).to_contain_text("The MCP tool server at /.api/mcp")
        assert tab.locator("table.config-options tbody tr").count() >= 20
        box = tab.locator("#config")
        box.fill('{\n  "mcp.enabled": "yes"\n}\n')
        box.press("End")  # an input event, as typing sends
        problem = tab.locator("#config-check #config-errors")
        expect(problem).to_contain_text(
            'mcp.enabled: must be true or false (a JSON boolean, without quotes), not "yes" (line 2)'
        )
        expect(box).to_have_attribute("aria-invalid", "true")
        assert path.read_text() == before  # checking saves nothing
        box.fill('{\n  "mcp.enabled": true\n}\n')
        box.type(" ")
        expect(tab.locator("#config-check #config-valid")).to_be_visible()
        expect(box).to_have_attribute("aria-invalid", "false")
        assert path.read_text() == before
        found = {}
        for scheme in ("light", "dark"):
            tab.emulate_media(color_scheme=scheme)
            bad = serious_violations(tab, axe)
            if bad:
                found[scheme] = bad
        assert found == {}
        assert [m for m in console if "Content Security Policy" in m] == []
