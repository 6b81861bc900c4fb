"""Where each of a fleet's settings comes from, said once: the keys (``FleetKeys``) and serve's conversations.

The keys a process signs and seals with come from ``TOOLFLOW_STATE_SECRET`` or are its own
(:class:`toolflow._state_config.FleetKeys`); ``toolflow serve`` hands them to the service, whose
task ids, conversation handles and approval seal all use them.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

import toolflow
from toolflow._cli_support import serve_state_settings
from toolflow._serve import ToolService
from toolflow._serve_http import HTTPSettings
from toolflow._state import HandleKeys, MemoryState
from toolflow._state_config import FleetKeys
from toolflow._state_redis import RedisState

SECRET = "the fleet's shared secret, 0123"

SPEC = """\
toolflow: 1
tools:
  later:
    description: Runs in the background.
    category: later
    template: "done"
policy:
  categories:
    later: {background: true}
"""


def _service(tmp_path: Path, **options: Any) -> ToolService:
    (tmp_path / "tools.yaml").write_text(SPEC, encoding="utf-8")
    specs = toolflow.load_specs([tmp_path / "tools.yaml"])
    registry = toolflow.Registry.build(specs, toolflow.load_plugins(entry_points=False))
    return ToolService.under_policy(registry, policy=toolflow.Policy.from_specs(specs), **options)


def test_the_keys_come_from_the_fleets_secret_or_are_the_process_own() -> None:
    """With the secret, every replica's keys verify each other's handles; without, each process has its own."""
    fleet = FleetKeys.from_environ({"TOOLFLOW_STATE_SECRET": SECRET})
    assert fleet.from_secret
    assert fleet.secret_keys is fleet.keys
    handle = HandleKeys.from_secrets(SECRET).sign("c1", None, 4e9)
    assert fleet.keys.verify(handle, None, 0.0) == "c1"
    own, other = FleetKeys.from_environ({}), FleetKeys()
    assert not own.from_secret
    assert own.secret_keys is None
    assert own.keys.verify(other.keys.sign("c1", None, 4e9), None, 0.0) is None
    with pytest.raises(toolflow.UsageError, match="16 characters or more"):
        FleetKeys.from_environ({"TOOLFLOW_STATE_SECRET": "short"})


def test_the_service_signs_tasks_and_handles_with_its_keys_and_seals_with_the_fleets(tmp_path: Path) -> None:
    """One record: task ids and handles under its keys; the task records and the approval seal only with the secret."""
    fleet = FleetKeys.of_secret(HandleKeys.from_secrets(SECRET))
    state = RedisState("redis://127.0.0.1:1/0")  # nothing connects until the first operation
    try:
        shared = _service(tmp_path, keys=fleet, state=state, conversation_ttl=60.0)
        alone = _service(tmp_path, state=state, conversation_ttl=60.0)
    finally:
        state.close()
    assert shared.tasks is not None
    assert shared.tasks.keys is fleet.keys
    assert shared.tasks.records is not None
    assert shared.conversations is not None
    assert shared.conversations.keys is fleet.keys
    assert alone.tasks is not None
    assert alone.tasks.records is None  # the other replicas could not verify its task ids
    assert alone.conversations is not None
    assert alone.conversations.keys is alone.keys.keys
    assert alone.tasks.keys is alone.keys.keys
    # The approval seal across replicas: test_serve_conversation.py's approval asked by one replica.


def test_without_a_conversation_lifetime_no_conversation_is_kept(tmp_path: Path) -> None:
    """stdio and --stateless: the service keys no request by conversation."""
    assert _service(tmp_path, state=MemoryState()).conversations is None


@pytest.mark.parametrize(
    ("http", "kept"),
    [(None, None), (HTTPSettings(stateless=True), None), (HTTPSettings(session_idle_timeout=90.0), 90.0)],
)
def test_serve_keeps_conversations_over_http_only(
    http: HTTPSettings | None, kept: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``toolflow serve``: the conversations live the HTTP sessions' idle timeout; none over stdio or stateless."""
    monkeypatch.setenv("TOOLFLOW_STATE_SECRET", SECRET)
    settings = serve_state_settings(http, MemoryState(), io.StringIO())
    assert settings["conversation_ttl"] == kept
    assert settings["keys"].from_secret


def test_serve_warns_once_of_a_fleet_without_the_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """A shared state over HTTP without the secret: one warning; the keys are the process's own."""
    monkeypatch.delenv("TOOLFLOW_STATE_SECRET", raising=False)
    monkeypatch.delenv("TOOLFLOW_STATE_SECRET_PREVIOUS", raising=False)
    state = RedisState("redis://127.0.0.1:1/0")
    try:
        err = io.StringIO()
        settings = serve_state_settings(HTTPSettings(), state, err)
        quiet = io.StringIO()
        serve_state_settings(HTTPSettings(), MemoryState(), quiet)
    finally:
        state.close()
    assert not settings["keys"].from_secret
    assert err.getvalue().count("TOOLFLOW_STATE_SECRET is not set") == 1
    assert quiet.getvalue() == ""
