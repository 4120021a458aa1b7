from __future__ import annotations

from pathlib import Path

import pytest

from codewell.core.errors import ConfigError
from codewell.core.settings import Settings


def test_defaults_put_everything_under_the_data_dir(tmp_path: Path) -> None:
    settings = Settings.from_env({"CODEWELL_DATA_DIR": str(tmp_path / "d")})
    assert settings.database_url == f"sqlite:///{tmp_path / 'd' / 'codewell.db'}"
    assert settings.site_config_path == tmp_path / "d" / "site-config.json"
    assert (settings.host, settings.port) == ("127.0.0.1", 7080)
    assert settings.is_sqlite


def test_overrides_win_over_the_environment(tmp_path: Path) -> None:
    settings = Settings.from_env({"CODEWELL_PORT": "8000"}, port=9000, data_dir=tmp_path)
    assert settings.port == 9000


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"CODEWELL_PORT": "http"}, "CODEWELL_PORT='http' is not a whole number"),
        ({"CODEWELL_PORT": "70000"}, "CODEWELL_PORT=70000 is out of range"),
        ({"CODEWELL_LOG_FORMAT": "xml"}, "CODEWELL_LOG_FORMAT='xml' is not valid"),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.from_env(env)
    assert message in info.value.message
