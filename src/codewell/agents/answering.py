"""The one entry point of both agents: a model through the agent loop when one is configured, else retrieval.

`answer` picks the model configured for the purpose (site config `models`: `codeFinder` for code_finder when
set, else `default`). Without a model the deterministic retrieval pipeline answers. When the model fails
(endpoint down, too slow after its retries, rate limited past the budget, replies beyond repair, budget spent
without an answer) retrieval answers too, and the answer's `notice` says why, in words safe for any reader.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Literal

from codewell.agents import retrieval
from codewell.agents.answers import AgentAnswer
from codewell.agents.llm import ChatModel, ModelUnavailable, build_model
from codewell.agents.loop import Budget, LoopFailed, run_loop
from codewell.config.models import ModelEndpoint, ModelsConfig
from codewell.core.actors import Actor
from codewell.repos.service import ResolvedRevision

if TYPE_CHECKING:
    from codewell.runtime import Runtime

__all__ = ["ModelClients", "Purpose", "answer", "endpoint_for", "model_configured"]

log = logging.getLogger(__name__)

Purpose = Literal["code_finder", "deepsearch"]


class ModelClients:
    """The runtime's built model clients, per configured endpoint and key (a changed key or config builds a new
    one), each keeping its HTTP connections to the provider for the next call.

    Owned by the runtime, which closes them with `close` (Runtime.close): a module-level cache outlived every
    runtime and held one open socket per endpoint ever configured in the process."""

    def __init__(self) -> None:
        self._models: dict[tuple[ModelEndpoint, str | None], ChatModel] = {}
        self._lock = threading.Lock()

    @classmethod
    def create(cls, runtime: Runtime) -> ModelClients:
        return cls()

    def get(self, endpoint: ModelEndpoint) -> ChatModel:
        key = os.environ.get(endpoint.api_key_env) if endpoint.api_key_env else None
        with self._lock:
            model = self._models.get((endpoint, key))
            if model is None:
                model = build_model(endpoint)
                self._models[(endpoint, key)] = model
            return model

    def close(self) -> None:
        """Close every client's connections. Safe to call again."""
        with self._lock:
            models, self._models = list(self._models.values()), {}
        for model in models:
            closer = getattr(model, "close", None)
            if callable(closer):
                closer()


def endpoint_for(models: ModelsConfig, purpose: Purpose) -> ModelEndpoint | None:
    """The `models` entry answering `purpose`: code_finder prefers `codeFinder`; None when no model is set."""
    if purpose == "code_finder" and models.code_finder is not None:
        return models.code_finder
    return models.default


def model_configured(runtime: Runtime, purpose: Purpose) -> bool:
    return endpoint_for(runtime.config.models, purpose) is not None


def answer(
    runtime: Runtime,
    actor: Actor,
    question: str,
    *,
    purpose: Purpose,
    scope: ResolvedRevision | None,
    history: Sequence[tuple[str, str]] = (),
    deadline: float | None = None,
) -> AgentAnswer:
    """With a model configured for `purpose`: the agent loop; when the provider fails, retrieval with a notice.

    `history` holds earlier (question, answer) pairs of a deep search conversation; `deadline` is a
    `time.monotonic()` value. Raises only codewell errors.
    """
    max_files = 5 if purpose == "code_finder" else 8
    endpoint = endpoint_for(runtime.config.models, purpose)
    if endpoint is None:
        return retrieval.retrieve(runtime, actor, question, scope=scope, max_files=max_files, deadline=deadline)
    started = time.monotonic()
    budget = Budget(
        max_steps=endpoint.max_steps,
        max_seconds=endpoint.max_seconds,
        max_tokens=endpoint.max_tokens,
        context_tokens=endpoint.context_tokens,
        max_output_tokens=endpoint.max_output_tokens,
    )
    try:
        model = runtime.get(ModelClients).get(endpoint)
        return run_loop(runtime, actor, model, question, scope=scope, history=history, budget=budget, deadline=deadline)
    except (ModelUnavailable, LoopFailed) as exc:
        why = exc.message
        log.warning("%s: model %s not used (%s); the retrieval pipeline answers", purpose, endpoint.model, exc.reason)
    except Exception:
        # A fault of ours or of an SDK must not cost the caller the answer: log it, and retrieval answers.
        why = "the agent loop failed unexpectedly"
        log.exception("%s: the agent loop with model %s failed", purpose, endpoint.model)
    fallback = retrieval.retrieve(runtime, actor, question, scope=scope, max_files=max_files, deadline=deadline)
    notice = f"The model could not answer ({why}), so the retrieval pipeline did. {fallback.notice}".strip()
    fallback.stats.seconds = round(time.monotonic() - started, 3)
    return replace(fallback, notice=notice)
