"""Every test starts from a fresh demo world whose workspace is the test's temporary directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from toolflow_assistant import world

pytest_plugins = ["toolflow.testing"]


@pytest.fixture(autouse=True)
def fresh_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> world.World:
    """A fresh demo world, current for the test; ``$TOOLFLOW_WORKSPACE`` is a new ``workspace`` folder."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    monkeypatch.setenv("TOOLFLOW_WORKSPACE", str(workspace))
    return world.reset()


@pytest.fixture
def workspace(fresh_world: world.World) -> Path:
    """The worker's workspace directory."""
    return fresh_world.workspace_root()
