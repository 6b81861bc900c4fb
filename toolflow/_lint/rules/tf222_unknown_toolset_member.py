"""A toolset that names a tool or category that does not exist.

## What it does
Reports an entry of a toolset's `tools` or `exclude` that names no tool of the
linted files, and an entry of its `categories` that is not built in, not
declared by a `policy: categories:` mapping and not the category of any tool.

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

from collections.abc import Iterator, Mapping

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._model import BUILTIN_CATEGORIES
from toolflow._schemas import did_you_mean


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    tool_names: list[str] | None = None
    categories: set[str] | None = None
    for spec_file in ctx.files:
        for toolset in spec_file.toolsets:
            for key, names in (("tools", toolset.tools), ("exclude", toolset.exclude)):
                for index, name in enumerate(names):
                    if name in ctx.tools_by_name:
                        continue
                    if tool_names is None:
                        tool_names = sorted(ctx.tools_by_name)
                    verb = "excludes" if key == "exclude" else "names"
                    message = (
                        f"toolset {toolset.name!r} {verb} tool {name!r}, which no spec file declares"
                        f"{did_you_mean(name, tool_names)}"
                    )
                    yield RULE.diag(spec_file, f"{toolset.pointer}/{key}/{index}", message)
            for index, category in enumerate(toolset.categories):
                if category in BUILTIN_CATEGORIES:
                    continue
                if categories is None:
                    categories = _known_categories(ctx)
                if category in categories:
                    continue
                message = (
                    f"toolset {toolset.name!r} includes category {category!r}, which is not built in, "
                    f"declared by a policy or used by any tool{did_you_mean(category, sorted(categories))}"
                )
                yield RULE.diag(spec_file, f"{toolset.pointer}/categories/{index}", message)


def _known_categories(ctx: LintContext) -> set[str]:
    known = set(BUILTIN_CATEGORIES) | {tool.category for tool in ctx.tools}
    for spec_file in ctx.files:
        policy = spec_file.policy
        declared = policy.get("categories") if isinstance(policy, Mapping) else None
        if isinstance(declared, Mapping):
            known.update(str(name) for name in declared)
    return known


RULE = Rule(code="TF222", name="unknown-toolset-member", severity=Severity.ERROR, doc=__doc__ or "", check=check)
