"""Every site config option and every environment variable is documented in docs/configuration.md."""

from __future__ import annotations

from pathlib import Path

from codewell.config import SiteConfig
from codewell.core.settings import SETTING_SPECS

DOCS = (Path(__file__).parents[3] / "docs" / "configuration.md").read_text()


def test_every_site_config_option_is_documented() -> None:
    missing = [
        field.alias or name for name, field in SiteConfig.model_fields.items() if f"`{field.alias or name}`" not in DOCS
    ]
    assert missing == []


def test_every_environment_variable_is_documented() -> None:
    assert [s.env for s in SETTING_SPECS if f"`{s.env}`" not in DOCS] == []
