"""Aliases expand the document beyond the allowed size, or refer to themselves.

## What it does
Counts the nodes a document would have once every alias (`*name`) is replaced by
its anchor's value, and refuses documents that exceed 1,000,000 nodes or contain an
alias inside its own anchor.

## Why is this bad?
A few lines of nested aliases ("billion laughs") expand to billions of nodes and
exhaust the memory or time of every program that reads the file.

## Example
```yaml
a: &a [x, x, x, x, x, x, x, x, x]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
# ... and so on
```

## Use instead
Write the values out, or share small fragments through `defaults:`.
"""

from toolflow._diagnostics import Severity
from toolflow._lint._rule import Rule

RULE = Rule(code="TF004", name="alias-expansion", severity=Severity.ERROR, doc=__doc__ or "")
