"""Hostile YAML that must become a diagnostic, never a crash of the interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from toolflow._loader import load_file
from toolflow._yaml import _CComposer, _composer_for


@pytest.mark.parametrize(
    "text",
    [
        "a: " + "[" * 100_000 + "]" * 100_000 + "\n",
        "a: " + "{x: " * 50_000 + "1" + "}" * 50_000 + "\n",
        "- " * 100_000 + "x\n",
    ],
    ids=["flow-sequences", "flow-mappings", "block-sequences"],
)
def test_deep_nesting_is_a_diagnostic_not_a_crash(tmp_path: Path, text: str) -> None:
    """Documents nested 50,000+ deep give TF001 in a child interpreter that exits normally."""
    spec = tmp_path / "deep.yaml"
    spec.write_text(text)
    code = (
        "import sys; from toolflow._loader import load_file; "
        "_, d = load_file(sys.argv[1]); print(' '.join(x.code for x in d))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(spec)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["TF001"]


def test_ordinary_documents_use_libyaml(tmp_path: Path) -> None:
    """Normal specs, with many flow lists and block items, take the fast C composer."""
    items = "\n".join(f"  t{i}: {{enum: [a, b, c], list: [1, [2, 3]]}}\n  - x" for i in range(300))
    assert _composer_for(items) is _CComposer
    spec = tmp_path / "wide.yaml"
    spec.write_text("toolflow: 1\ntools: {}\nlist:\n" + "\n".join(f"  - [{i}, [{i}]]" for i in range(2000)) + "\n")
    _, diagnostics = load_file(str(spec))
    assert [d.code for d in diagnostics] == ["TF101"]
