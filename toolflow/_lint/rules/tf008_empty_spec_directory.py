"""A spec directory holds no spec file.

## What it does
Reports a directory named on the command line (or by `[tool.toolflow] specs`, or the default
`specs/`) in which no `*.yaml` or `*.yml` file is found, hidden files and directories aside.

## Why is this bad?
Nothing was checked, yet a lint of nothing would pass: a CI job pointed at the wrong directory,
or at specs that were renamed to another suffix, stays green while checking no tool.

## Example
```console
$ toolflow lint config/
config/:1:1: TF008 no spec files (*.yaml, *.yml) in directory 'config/'
Found 0 errors and 1 warning in 0 files.
```
with `config/` holding only `tools.json`, or nothing.

## Use instead
Point lint at the directory that holds the spec files, and name them `*.yaml` or `*.yml`.
"""

from toolflow._diagnostics import Severity
from toolflow._lint._rule import Rule

RULE = Rule(code="TF008", name="empty-spec-directory", severity=Severity.WARNING, doc=__doc__ or "")
