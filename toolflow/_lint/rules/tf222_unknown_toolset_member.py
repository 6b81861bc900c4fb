"""A toolset that names a tool or category that does not exist.

## What it does
Reports an entry of a toolset's `tools` or `exclude` that names no tool of the
linted files, and an entry of its `categories` that is not built in, not
declared by a `policy: categories:` mapping and not the category of any tool.

Tools listed under an MCP server's `tools:` count as declared; a name that
may be a tool of a server importing all its tools is TF244's (a warning).

## Why is this bad?
A toolset is an allowlist: an agent, an export (`toolflow schema --toolset`)
or a client sees only the tools it selects. A misspelt name silently leaves a
tool out (or, in `exclude`, silently lets it in), which shows up much later as
a model that "cannot" do something. The registry refuses to build with such a
toolset, so the project fails at start-up rather than in CI.

## Example
```yaml
toolsets:
  chat:
    tools: [say, wisper]
    categories: [termnal]
```

## Use instead
```yaml
toolsets:
  chat:
    tools: [say, whisper]
    categories: [terminal]
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import Rule
from toolflow._lint._summary import ProjectSummary
from toolflow._model import BUILTIN_CATEGORIES
from toolflow._schemas import did_you_mean


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    tool_names: list[str] | None = None
    categories: set[str] | None = None
    for spec_file in summary.files:
        for toolset in spec_file.toolsets:
            for key, names in (("tools", toolset.tools), ("exclude", toolset.exclude)):
                for entry in names:
                    name = entry.name
                    if summary.may_exist(name):  # declared, or TF244's: it may be remote
                        continue
                    if tool_names is None:
                        tool_names = summary.declared_names
                    verb = "excludes" if key == "exclude" else "names"
                    message = (
                        f"toolset {toolset.name!r} {verb} tool {name!r}, which no spec file declares"
                        f"{did_you_mean(name, tool_names)}"
                    )
                    yield RULE.diag_at(entry.place, message)
            for entry in toolset.categories:
                category = entry.name
                if category in BUILTIN_CATEGORIES:
                    continue
                if categories is None:
                    categories = set(BUILTIN_CATEGORIES) | {t.category for t in summary.tools}
                    categories |= summary.declared_categories
                if category in categories:
                    continue
                message = (
                    f"toolset {toolset.name!r} includes category {category!r}, which is not built in, "
                    f"declared by a policy or used by any tool{did_you_mean(category, sorted(categories))}"
                )
                yield RULE.diag_at(entry.place, message)


RULE = Rule(
    code="TF222", name="unknown-toolset-member", severity=Severity.ERROR, doc=__doc__ or "", check_project=check
)
