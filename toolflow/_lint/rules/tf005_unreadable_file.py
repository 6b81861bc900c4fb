"""A spec file cannot be read as UTF-8 text.

## What it does
Reports a path that does not exist or cannot be read, a file larger than 10 MiB,
binary data (a NUL byte) and bytes that are not UTF-8, with the position of the
first bad byte.

## Why is this bad?
Nothing in the file can be checked or used.

## Example
A spec saved as UTF-16 by an editor, or an image named `tools.yaml`.

## Use instead
Save spec files as UTF-8 text.
"""

from toolflow._diagnostics import Severity
from toolflow._lint._rule import Rule

RULE = Rule(code="TF005", name="unreadable-file", severity=Severity.ERROR, doc=__doc__ or "")
