"""The `deepSearch` site configuration key: how deep search answers, waits and shares (docs/agents.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictBool


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class DeepSearchSharing(_Strict):
    # Off by default: conversations can only be read by their owner (and site admins).
    enabled: StrictBool = False


class DeepSearchConfig(_Strict):
    """`deepSearch`: every field has a default, so `{}` (or leaving the key out) is valid."""

    # How long the MCP `deepsearch` tool waits for the answer before it returns the conversation's Link.
    mcp_wait_seconds: int = Field(50, alias="mcpWaitSeconds", ge=0, le=300)
    # At most this many MCP calls wait at the same time; further calls return the Link at once (so that
    # waiting deep searches never take all of the server's worker threads from other tool calls).
    max_waiting_calls: int = Field(8, alias="maxWaitingCalls", ge=0, le=64)
    sharing: DeepSearchSharing = Field(default_factory=DeepSearchSharing)
    # Unused since answers run as jobs (agents/jobs.py); kept so that existing site configs stay valid.
    workers: int = Field(2, ge=1, le=32)
    # Time budget of one answer; the agent stops and answers with what it has.
    answer_seconds: int = Field(300, alias="answerSeconds", ge=5, le=3600)
    # A crashed worker's job is taken over after its lease expires; after this many attempts it fails.
    max_attempts: int = Field(3, alias="maxAttempts", ge=1, le=20)
    lease_seconds: int = Field(60, alias="leaseSeconds", ge=5, le=3600)
    # Credits one answer consumes when the agent did not count its own (AgentStats.credits).
    credits_per_answer: int = Field(1, alias="creditsPerAnswer", ge=1, le=1_000_000)
    # Questions per conversation (the first one and its follow-ups).
    max_questions: int = Field(50, alias="maxQuestions", ge=1, le=1000)
