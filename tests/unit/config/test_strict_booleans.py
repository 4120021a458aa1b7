"""Booleans in the site config are JSON booleans only (issue #32, item 6): `"mcp.enabled": "yes"` was taken as
true; now it and its cousins are refused with a message naming the key and what is accepted."""

from __future__ import annotations

import json

import pytest

from codewell.config import parse_site_config
from codewell.core.errors import ConfigError


@pytest.mark.parametrize("value", ["yes", "true", "false", "no", 1, 0, "1"])
def test_a_boolean_option_refuses_anything_but_true_or_false(value: object) -> None:
    with pytest.raises(ConfigError) as info:
        parse_site_config(json.dumps({"mcp.enabled": value}))
    assert (
        f"mcp.enabled: must be true or false (a JSON boolean, without quotes), not {json.dumps(value)}"
        in info.value.message
    )


def test_nested_booleans_are_strict_too_and_true_false_still_work() -> None:
    with pytest.raises(ConfigError) as info:
        parse_site_config('{"auth.providers": [{"type": "builtin", "allowSignup": "on"}]}')
    assert "allowSignup: must be true or false" in info.value.message
    with pytest.raises(ConfigError):
        parse_site_config('{"auth.accessTokens": {"allowNoExpiration": 0}}')
    config = parse_site_config('{"mcp.enabled": false, "auth.public": true}')
    assert config.mcp_enabled is False
    assert config.auth_public is True
