"""Every field of every provider kind is documented in docs/authentication.md."""

from __future__ import annotations

import typing
from pathlib import Path

from codewell.config import providers

DOCS = (Path(__file__).parents[4] / "docs" / "authentication.md").read_text()


def test_every_provider_field_is_documented() -> None:
    models = typing.get_args(typing.get_args(providers.Provider)[0])
    missing = [
        f"{model.__name__}.{field.alias or name}"
        for model in models
        for name, field in model.model_fields.items()
        if name != "type" and f"`{field.alias or name}`" not in DOCS
    ]
    assert missing == []
    assert all(f"`{kind}`" in DOCS for kind in (*providers.PROVIDER_TYPES, *providers.PROVIDER_TYPE_ALIASES))
