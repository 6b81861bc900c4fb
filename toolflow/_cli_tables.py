"""The tables of ``toolflow list`` and ``toolflow plugins``: what each says of a tool or a plugin, in columns."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TextIO

from toolflow._model import ToolSpec
from toolflow._plugins import PluginInfo

__all__ = ["print_plugins", "tool_row", "write_table"]


def tool_row(tool: ToolSpec) -> dict[str, Any]:
    """What ``toolflow list`` says of one tool (its JSON object; the table shows some of it)."""
    from toolflow._export import description  # noqa: PLC0415

    span = tool.locator.locate(tool.pointer, key=True) if tool.locator else None
    return {
        "name": tool.name,
        "category": tool.category,
        "implementation": _implemented_by(tool),
        "timeout": tool.timeout,
        "retry_attempts": tool.retry.attempts,
        "cache": tool.cache.scope.value if tool.cache else None,
        "parameters": sorted((tool.parameters.get("properties") or {}).keys()),
        "description": description(tool),
        "expose": tool.expose,
        "location": f"{tool.file}:{span.line}:{span.column}" if span else tool.file,
    }


def _implemented_by(tool: ToolSpec) -> str | None:
    """The kind of *tool*'s implementation; for a remote tool, ``mcp:SERVER``."""
    from toolflow._model import McpToolRef  # noqa: PLC0415

    implementation = tool.implementation
    if implementation is None:
        return None
    config = implementation.config
    return f"mcp:{config.server}" if isinstance(config, McpToolRef) else implementation.kind


def write_table(rows: Sequence[Sequence[object]], stdout: TextIO, widths: Sequence[int] = ()) -> None:
    """*rows* in left-aligned columns two spaces apart, as wide as *widths* or as the widest cell of each."""
    widths = widths or [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    stdout.writelines(
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() + "\n"
        for row in rows
    )


def print_plugins(infos: Sequence[PluginInfo], stdout: TextIO) -> None:
    """The table of ``toolflow plugins``: one row per plugin (and its error when it failed), then the counts."""
    header = ("PLUGIN", "SOURCE", "DISTRIBUTION", "STATUS", "HOOKS", "TOOLS")
    rows = [header, *(_plugin_row(info) for info in infos)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row, info in zip(rows, (None, *infos), strict=True):
        write_table([row], stdout, widths)
        if info is not None and info.status == "failed" and info.error:
            stdout.write(f"  error: {info.error}\n")
    counts = {status: sum(1 for i in infos if i.status == status) for status in ("loaded", "failed")}
    disabled = len(infos) - counts["loaded"] - counts["failed"]
    noun = "plugin" if len(infos) == 1 else "plugins"
    stdout.write(f"{len(infos)} {noun}: {counts['loaded']} loaded, {counts['failed']} failed, {disabled} disabled\n")


def _plugin_row(info: PluginInfo) -> tuple[str, ...]:
    tools = [
        *info.implementations,
        *(f"kind:{k}" for k in info.kinds),
        *(f"rule:{r}" for r in info.lint_rules),
        *(f"pack:{p}" for p in info.tool_packs),
    ]
    return (
        info.name,
        info.source,
        " ".join(filter(None, (info.distribution, info.version))) or "-",
        info.status,
        ", ".join(h.removeprefix("toolflow_") for h in info.hooks) or "-",
        ", ".join(tools) or "-",
    )
