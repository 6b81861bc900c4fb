"""An `implementation` name that is unbound while a plugin failed to load.

## What it does
Reports a tool whose `implementation:` names an implementation that no loaded
plugin binds, when one or more plugins failed to load: it names each failed
plugin and its error, since one of them probably binds the name. TF401 stays
silent in that case. The rule runs only when plugins were loaded
(`toolflow lint` loads them).

## Why is this bad?
The tool cannot run until the plugin loads, and the real problem is in the
plugin (a missing dependency, an exception at import, a misspelt hook), not in
the spec. `toolflow plugins` shows every plugin with its status and error.

## Example
```yaml
# plugin 'assistant' fails: ModuleNotFoundError: No module named 'numpy'
tools:
  recall_memories:
    description: Recall what the assistant remembers about a topic
    implementation: assistant.recall_memories
```

## Use instead
```yaml
# after `pip install numpy`, plugin 'assistant' loads and binds the name
tools:
  recall_memories:
    description: Recall what the assistant remembers about a topic
    implementation: assistant.recall_memories
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._binding_facts import implementations
from toolflow._lint._rule import LintContext, Rule
from toolflow._schemas import did_you_mean


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    facts = ctx.plugins
    if facts is None or not facts.failed:
        return
    failed = "; ".join(f"{plugin!r} ({error})" for plugin, error in sorted(facts.failed.items()))
    which = "plugin" if len(facts.failed) == 1 else "plugins"
    bound: list[str] | None = None
    for tool, implementation, name in implementations(ctx):
        if name in facts.bindings:
            continue
        if bound is None:
            bound = sorted(facts.bindings)
        message = (
            f"implementation {name!r} of tool {tool.name!r} is bound by no loaded plugin, "
            f"and {which} failed to load: {failed}{did_you_mean(name, bound)}"
        )
        yield RULE.diag(tool, implementation.pointer, message)


RULE = Rule(code="TF404", name="plugin-failed", severity=Severity.ERROR, doc=__doc__ or "", check=check)
