"""A git child gets a small environment: never the server's variables, only what git needs plus the call's own."""

from __future__ import annotations

import pytest

from codewell.repos.git import run_git


def _child_environment(env: dict[str, str] | None = None) -> dict[str, str]:
    # A shell alias runs in git's own environment (plus git's GIT_* bookkeeping): it prints what git received.
    out = run_git(["-c", "alias.showenv=!env", "showenv"], env=env, timeout=30)
    return dict(line.partition("=")[::2] for line in out.splitlines() if "=" in line)


def test_the_servers_secrets_stay_out_of_git_children(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CW_PLANTED_TOKEN", "planted-secret-value")
    monkeypatch.setenv("CODEWELL_DATABASE_URL", "postgresql://user:pw@db/codewell")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    child = _child_environment()
    assert "CW_PLANTED_TOKEN" not in child
    assert "CODEWELL_DATABASE_URL" not in child
    assert not any("planted-secret-value" in value for value in child.values())
    # What git needs to run and reach the network is still there, and the fixed settings apply.
    assert child["HTTPS_PROXY"] == "http://proxy.example:3128"
    assert child["PATH"]
    assert child["GIT_TERMINAL_PROMPT"] == "0"


def test_a_calls_own_variables_reach_only_that_call() -> None:
    first = _child_environment({"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "x.y", "GIT_CONFIG_VALUE_0": "one"})
    second = _child_environment()
    assert first["GIT_CONFIG_VALUE_0"] == "one"
    assert "GIT_CONFIG_VALUE_0" not in second
