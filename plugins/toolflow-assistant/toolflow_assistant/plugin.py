"""The toolflow plugin: binds the example specs' ``implementation:`` names, lazily.

Entry point ``[project.entry-points.toolflow] assistant = "toolflow_assistant.plugin"``.
Every target is a ``"module:attribute"`` string, so loading this plugin (as
``toolflow lint`` does) imports nothing but this module; the tools are
imported when a tool is first called.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolflow import hookimpl

__all__ = ["IMPLEMENTATIONS", "toolflow_register_implementations"]

_TOOLS = "toolflow_assistant.tools"
_WORKER = "toolflow_assistant.worker"

IMPLEMENTATIONS: dict[str, str] = {
    **{
        f"assistant.{name}": f"{_TOOLS}:{name}"
        for name in (
            "inspect_location",
            "search_object",
            "get_attributes",
            "set_attribute",
            "execute_command",
            "pose",
            "page",
            "whisper",
            "recall_memories",
            "store_memory",
            "delegate_task",
            "get_delegation_status",
            "get_system_status",
            "go_to_sleep",
        )
    },
    "worker.list_directory": f"{_WORKER}:list_directory",
    "worker.write_file": f"{_WORKER}:write_file",
    "worker.launch_experiment": f"{_WORKER}:launch_experiment",
}
"""Implementation name (as specs write it) to its lazy target."""


@hookimpl
def toolflow_register_implementations(register: Callable[[str, Any], None]) -> None:
    """Bind every implementation name of the game assistant and the research worker."""
    for name, target in IMPLEMENTATIONS.items():
        register(name, target)
