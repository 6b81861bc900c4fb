"""Hostile YAML that must become a diagnostic, never a crash of the interpreter."""

from __future__ import annotations

import gc
import io
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from yaml.nodes import Node

from toolflow._cli import run
from toolflow._loader import load_file
from toolflow._yaml import MAX_DEPTH, DocumentError, NodeLocator, _CComposer, _composer_for, _DeepComposer, load_data


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


# --- characters YAML refuses, and nesting past the limit (issue 14, section 6) -------------

DEEP_PATH_PREFIX = "# " + " " * 250 + "an indented comment sends the document to the deep-document composer\n"
"""Not valid nesting, only a line that makes the document one that *could* nest deeply."""


@pytest.mark.parametrize("prefix", ["", DEEP_PATH_PREFIX], ids=["libyaml-composer", "deep-composer"])
@pytest.mark.parametrize("character", ["\x07", "\x1b", "\x7f", "\ufffe"])
def test_a_refused_character_is_reported_where_it_is(tmp_path: Path, prefix: str, character: str) -> None:
    """A control character on line 2 (after non-ASCII text) is TF001 at its own line and column, not 1:1."""
    spec = tmp_path / "control.yaml"
    spec.write_text(f"{prefix}toolflow: 1\ntools: {{é: {character}}}\n", encoding="utf-8")
    _, diagnostics = load_file(str(spec))
    line = prefix.count("\n") + 2
    assert [(d.code, d.line, d.column) for d in diagnostics] == [("TF001", line, 12)]
    assert f"U+{ord(character):04X}" in diagnostics[0].message


@pytest.mark.parametrize("character", ["\x07", "\x85\x07", "\x1f"])
@pytest.mark.parametrize("command", ["lint", "call"])
def test_a_control_character_beside_deep_nesting_is_a_diagnostic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, character: str, command: str
) -> None:
    """`toolflow lint` and `toolflow call` report TF001 for it; they used to crash with an internal error."""
    specs = tmp_path / "specs"
    specs.mkdir()
    deep = "[" * 300 + "]" * 300
    (specs / "deep.yaml").write_text(f"toolflow: 1\ntools: {{}}\nx: {deep}{character}\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    stdout, stderr = io.StringIO(), io.StringIO()
    argv = ["lint", "--isolated", "specs"] if command == "lint" else ["call", "--specs", "specs", "nothing", "{}"]
    code = run(argv, stdout=stdout, stderr=stderr)
    assert code == 1, stderr.getvalue()
    output = stdout.getvalue() + stderr.getvalue()
    assert "internal error" not in output
    # NEL (U+0085) ends a line in YAML, so for every diagnostic of the file.
    position = "4:1" if character.startswith("\x85") else f"3:{3 + len(deep) + 1}"
    assert f"deep.yaml:{position}: TF001" in output


def _load_text(tmp_path: Path, text: str) -> list[tuple[str, int, int]]:
    spec = tmp_path / "spec.yaml"
    spec.write_text(text, encoding="utf-8")
    _, diagnostics = load_file(str(spec))
    return [(d.code, d.line, d.column) for d in diagnostics]


@pytest.mark.parametrize("prefix", ["", DEEP_PATH_PREFIX], ids=["libyaml-composer", "deep-composer"])
def test_nesting_past_the_limit_is_refused_where_it_starts(tmp_path: Path, prefix: str) -> None:
    """MAX_DEPTH collections load; one more is TF001 at the collection past the limit, with either composer."""
    line = prefix.count("\n") + 1
    inner = MAX_DEPTH - 1  # the top-level mapping is the first level
    loaded = _load_text(tmp_path, f"{prefix}a: {'[' * inner}{']' * inner}\n")
    assert "TF001" not in {code for code, _, _ in loaded}  # only the spec schema's complaints
    assert _load_text(tmp_path, f"{prefix}a: {'[' * (inner + 1)}{']' * (inner + 1)}\n") == [("TF001", line, 4 + inner)]
    block = "".join(f"{' ' * k}k{k}:\n" for k in range(MAX_DEPTH + 1)) + " " * (MAX_DEPTH + 1) + "leaf\n"
    problems = _load_text(tmp_path, prefix + block)
    assert problems == [("TF001", line + MAX_DEPTH, MAX_DEPTH + 1)]


def test_aliases_cannot_nest_past_the_limit(tmp_path: Path) -> None:
    """Aliases that would stack shallow anchors into a document deeper than MAX_DEPTH are TF004.

    Such a document used to load and then crash `toolflow schema` (a RecursionError in the JSON
    encoder) and fail every call of the tool (copying the default).
    """
    rows = ["toolflow: 1", "x0: &x0 1"]
    rows += [f"x{k}: &x{k} {'[' * 20}*x{k - 1}{']' * 20}" for k in range(1, 6)]
    problems = _load_text(tmp_path, "\n".join(rows) + "\n")
    # x4 would nest 81 deep; the anchored node it reuses, x3 on line 5, is where the problem shows.
    assert problems == [("TF004", 5, 5)]


def test_a_long_run_of_brackets_is_refused_at_the_limit(tmp_path: Path) -> None:
    """100,000 brackets: libyaml's parser (its own limit is 1,000 levels) under the depth-checking composer."""
    text = "a: " + "[" * 100_000 + "]" * 100_000 + "\n"
    assert _composer_for(text) is _DeepComposer
    spec = tmp_path / "spec.yaml"
    spec.write_text(text, encoding="utf-8")
    _, diagnostics = load_file(str(spec))
    assert [(d.code, d.message) for d in diagnostics] == [
        ("TF001", f"the document nests more than {MAX_DEPTH} collections deep")
    ]


def test_a_loaded_document_is_freed_without_the_cyclic_collector(tmp_path: Path) -> None:
    """Loading keeps no PyYAML node: the locator holds positions, and convert()'s closures no node.

    A node tree kept alive, by the locator or by a cycle waiting for the collector, would be
    walked by every later pass of the collector (half a second for 100 files).
    """
    spec = tmp_path / "dup.yaml"
    spec.write_text("toolflow: 1\ntools: {}\ntools: {}\nx: !!binary aGk=\n", encoding="utf-8")
    enabled = gc.isenabled()
    gc.disable()
    try:
        before = sum(isinstance(o, Node) for o in gc.get_objects())
        spec_file, diagnostics = load_file(str(spec))
        assert {d.code for d in diagnostics} >= {"TF002", "TF003"}
        assert isinstance(spec_file.locator, NodeLocator)
        assert sum(isinstance(o, Node) for o in gc.get_objects()) == before
    finally:
        if enabled:
            gc.enable()


# --- data files (transcripts, test files): load_data -------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "turns:\n  - text: hi\n    ok: yes\n  - tool_calls: [{name: say, arguments: {n: 010}}]\n",
        "a: &x [1, 2.5, null, ~, on, 2026-01-01]\nb: *x\n",
        "",
        "just text\n",
    ],
    ids=["transcript", "anchors-and-1.1-types", "empty", "scalar"],
)
def test_load_data_reads_what_safe_load_reads(text: str) -> None:
    """Data files keep ``yaml.safe_load``'s reading (YAML 1.1 types), limits apart."""
    assert load_data(text) == yaml.safe_load(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: " + "[" * 100_000 + "]" * 100_000 + "\n", "the document nests more than 64 collections deep"),
        ("- " * 100_000 + "x\n", "the document nests more than 64 collections deep"),
        (
            "".join(f"a{i}: &a{i} {'[' * 60}{'*a' + str(i - 1) if i else 1}{']' * 60}\n" for i in range(40)),
            "aliases nest the document more than 64 collections deep",
        ),
        ("a: &a [1, *a]\n", "aliases nest the document more than 64 collections deep"),
        (
            "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
            + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 7)),
            "the document has more than 1,000,000 nodes, aliases expanded",
        ),
        ("a: [1, 2\n", "YAML syntax error"),
        ("a: 1\n---\nb: 2\n", "YAML syntax error: expected a single document"),
        ("a: !!python/object:os.system x\n", "YAML syntax error: could not determine a constructor"),
    ],
    ids=["flow", "block", "aliases", "recursive", "laughs", "syntax", "two-documents", "python-tag"],
)
def test_load_data_refuses_what_a_spec_may_not_hold(text: str, message: str) -> None:
    """Deep nesting, through aliases too, broken syntax and unsafe tags are a DocumentError, never a crash."""
    with pytest.raises(DocumentError) as caught:
        load_data(text)
    assert caught.value.message.startswith(message)
