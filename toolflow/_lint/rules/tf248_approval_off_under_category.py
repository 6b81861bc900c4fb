"""`approval: false` on a tool whose category needs approval.

## What it does
Reports a tool that writes `approval: false` while its category needs approval
under the policy of the linted files (`policy: categories: NAME: {approval:
true}`, merged over the defaults).

## Why is this bad?
A tool can only add approval: whether its category needs it is the policy's
decision, so `approval: false` changes nothing there, and every call of the
tool is still approved before it runs. The key says the opposite of what
happens.

## Example
```yaml
policy:
  categories:
    dangerous: {approval: true}
tools:
  delete_file:
    description: Delete a file
    category: dangerous
    approval: false
    implementation: delete_file
```

## Use instead
```yaml
policy:
  categories:
    dangerous: {approval: true}
tools:
  delete_file:
    description: Delete a file
    category: dangerous
    implementation: delete_file
```
or give the tool a category that needs no approval, or change the policy.
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import Rule
from toolflow._lint._summary import ProjectSummary


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    tools = [tool for tool in summary.tools if tool.approval_off is not None]
    if not tools:
        return
    categories = summary.categories
    for tool in tools:
        category = categories.get(tool.category)
        if tool.approval_off is not None and category is not None and category.approval:
            message = (
                f"tool {tool.name!r} says 'approval: false', but its category {tool.category!r} needs approval: "
                "a tool can only add approval, so its calls are still approved before they run; remove the key, "
                "or change the category or the policy"
            )
            yield RULE.diag_at(tool.approval_off, message)


RULE = Rule(
    code="TF248",
    name="approval-off-under-category",
    severity=Severity.ERROR,
    doc=__doc__ or "",
    check_project=check,
)
