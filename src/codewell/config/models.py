"""Typed `models` entries: the language models the agents (code_finder, deep search) may call.

`default` answers deep search (and code_finder unless `codeFinder` is set); `codeFinder` may name a cheaper
model. Without any entry the agents use their deterministic retrieval pipeline. API keys are never written
here: `apiKeyEnv` names the environment variable that holds the key (docs/configuration.md, `models`).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

_ENV = r"^[A-Za-z_][A-Za-z0-9_]*$"
_HTTP_URL = re.compile(r"^https?://[^\s/]+(/\S*)?$")

ModelProvider = Literal["openai-compatible", "anthropic"]


class ModelEndpoint(BaseModel):
    """One model: its provider protocol, where it is served, and the limits of each call and each answer."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    provider: ModelProvider
    # None: the provider's public endpoint (api.openai.com, api.anthropic.com).
    base_url: str | None = Field(None, alias="baseURL")
    model: str = Field(min_length=1, max_length=200)
    api_key_env: str | None = Field(None, alias="apiKeyEnv", pattern=_ENV)
    timeout_seconds: float = Field(60.0, alias="timeoutSeconds", gt=0, le=600)
    max_retries: int = Field(3, alias="maxRetries", ge=0, le=10)
    max_output_tokens: int = Field(4096, alias="maxOutputTokens", ge=64, le=200_000)
    # Budgets of one answer (the agent loop): model turns, wall time, tokens (input + output, all turns).
    max_steps: int = Field(12, alias="maxSteps", ge=1, le=100)
    max_seconds: float = Field(120.0, alias="maxSeconds", gt=0, le=3600)
    max_tokens: int = Field(200_000, alias="maxTokens", ge=1_000, le=10_000_000)
    # The model's context window (tokens); older tool outputs are shortened to stay within it.
    context_tokens: int = Field(32_000, alias="contextTokens", ge=2_000, le=2_000_000)

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not _HTTP_URL.match(value):
            raise ValueError("must be an absolute http:// or https:// URL, e.g. http://localhost:11434/v1")
        if "@" in value.split("://", 1)[1].split("/", 1)[0]:
            raise ValueError("must not hold credentials; put the API key in the variable apiKeyEnv names")
        return value.rstrip("/")


class ModelsConfig(BaseModel):
    """`models`: `default` (deep search, and code_finder unless `codeFinder` is set) and `codeFinder`."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    default: ModelEndpoint | None = None
    code_finder: ModelEndpoint | None = Field(None, alias="codeFinder")
