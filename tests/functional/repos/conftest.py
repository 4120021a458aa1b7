"""Fixtures of the repos functional tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gitfixtures import sample_repo


@pytest.fixture(scope="session")
def sample_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sample_repo(tmp_path_factory.mktemp("sample") / "sample")
