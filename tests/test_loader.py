"""The loader: spec files and directories in, model records and positioned diagnostics out."""

from __future__ import annotations

import math
import os
from pathlib import Path

import hypothesis
import pytest
import trio
from hypothesis import strategies as st

from toolflow import (
    CachePolicy,
    CacheScope,
    Diagnostic,
    LoadResult,
    RetryPolicy,
    Severity,
    SpecError,
    ToolSpec,
    load_specs,
    validate_specs,
)

TOOL = "description: Say something\n    implementation: say\n"
"""A minimal valid tool body, indented for a tool at two spaces."""


def write(path: Path, content: str | bytes) -> Path:
    """Write *content* to *path* (creating parents) and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def positions(result: LoadResult) -> list[tuple[str, int, int]]:
    """The ``(code, line, column)`` of every diagnostic."""
    return [(d.code, d.line, d.column) for d in result.diagnostics]


def only(result: LoadResult) -> Diagnostic:
    """The one diagnostic of *result*."""
    assert len(result.diagnostics) == 1, result.diagnostics
    return result.diagnostics[0]


def tool(result: LoadResult, name: str) -> ToolSpec:
    """The tool called *name*."""
    (found,) = [t for t in result.tools if t.name == name]
    return found


# --- files that cannot be read -------------------------------------------------------


def test_missing_path(tmp_path: Path) -> None:
    """A path that does not exist is TF005 at 1:1, naming the path."""
    missing = str(tmp_path / "nope.yaml")
    result = load_specs([missing])
    diagnostic = only(result)
    assert (diagnostic.code, diagnostic.line, diagnostic.column, diagnostic.file) == ("TF005", 1, 1, missing)
    assert diagnostic.message == f"no such file or directory: {missing!r}"
    assert diagnostic.severity is Severity.ERROR
    assert not result.ok
    assert result.files == ()


def test_unreadable_file(tmp_path: Path) -> None:
    """A file without read permission is TF005 'cannot read the file'."""
    path = write(tmp_path / "secret.yaml", "toolflow: 1\n")
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):
            pytest.skip("running as root: a mode-000 file is still readable")
        result = load_specs([path])
    finally:
        path.chmod(0o644)
    assert positions(result) == [("TF005", 1, 1)]
    assert only(result).message.startswith("cannot read the file: ")
    assert not result.files[0].ok


def test_dangling_symlink_in_a_directory_is_unreadable(tmp_path: Path) -> None:
    """A spec directory entry that cannot be opened is TF005 (also when running as root)."""
    write(tmp_path / "specs" / "good.yaml", "toolflow: 1\n")
    (tmp_path / "specs" / "gone.yaml").symlink_to(tmp_path / "deleted.yaml")
    result = load_specs([tmp_path / "specs"])
    diagnostic = only(result)
    assert (diagnostic.code, diagnostic.line, diagnostic.column) == ("TF005", 1, 1)
    assert diagnostic.file == str(tmp_path / "specs" / "gone.yaml")
    assert diagnostic.message.startswith("cannot read the file: ")
    assert [f.ok for f in result.files] == [False, True]


def test_symlink_loop_in_a_directory_is_unreadable(tmp_path: Path) -> None:
    """A symlink that points at itself is TF005, not an endless loop."""
    loop = tmp_path / "specs" / "loop.yaml"
    loop.parent.mkdir()
    loop.symlink_to(loop)
    assert positions(load_specs([loop.parent])) == [("TF005", 1, 1)]


def test_dangling_symlink_named_directly_is_missing(tmp_path: Path) -> None:
    """A dangling symlink named on the command line is reported as missing."""
    link = tmp_path / "link.yaml"
    link.symlink_to(tmp_path / "deleted.yaml")
    assert only(load_specs([link])).message == f"no such file or directory: {str(link)!r}"


@pytest.mark.parametrize(
    ("content", "line", "column"),
    [
        (b"\x00\x01\x02", 1, 1),
        (b"toolflow: 1\ntools:\n  a\x00b: {}\n", 3, 4),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", 3, 1),
        ("toolflow: 1\n".encode("utf-16"), 1, 4),
    ],
)
def test_binary_data(tmp_path: Path, content: bytes, line: int, column: int) -> None:
    """Binary data (a NUL byte) is TF005 at the first NUL, and the file has no tools."""
    result = load_specs([write(tmp_path / "image.yaml", content)])
    assert positions(result) == [("TF005", line, column)]
    assert only(result).message == "the file is binary data, not YAML text (NUL byte)"
    assert not result.files[0].ok
    assert result.tools == ()


@pytest.mark.parametrize(
    ("content", "line", "column", "byte"),
    [
        (b"\xff", 1, 1, "0xff"),
        (b"toolflow: 1\ntools:\n  caf\xe9: {}\n", 3, 6, "0xe9"),
        (b"toolflow: 1\n# \xc3\x28 broken sequence\n", 2, 3, "0xc3"),
        (b"toolflow: 1\n\xed\xa0\x80\n", 2, 1, "0xed"),
    ],
)
def test_non_utf8_bytes(tmp_path: Path, content: bytes, line: int, column: int, byte: str) -> None:
    """Bytes that are not UTF-8 are TF005 at the first bad byte, which the message names."""
    result = load_specs([write(tmp_path / "latin1.yaml", content)])
    assert positions(result) == [("TF005", line, column)]
    assert only(result).message == f"the file is not UTF-8 text (byte {byte})"


def test_non_utf8_byte_column_counts_characters(tmp_path: Path) -> None:
    """The column of a bad byte after multi-byte characters counts characters, like YAML positions."""
    content = "toolflow: 1\ndescription: déjà vu ".encode() + b"\xff\n"
    assert positions(load_specs([write(tmp_path / "mixed.yaml", content)])) == [("TF005", 2, 22)]


def test_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    """A UTF-8 byte order mark is not part of the document."""
    result = load_specs([write(tmp_path / "bom.yaml", b"\xef\xbb\xbftoolflow: 1\n")])
    assert result.diagnostics == ()
    assert result.files[0].version == 1


def test_oversized_file(tmp_path: Path) -> None:
    """A file over 10 MiB is TF005 without being parsed."""
    path = write(tmp_path / "huge.yaml", b"# " + b"x" * (10 * 1024 * 1024) + b"\n")
    result = load_specs([path])
    assert positions(result) == [("TF005", 1, 1)]
    assert only(result).message == "the file is larger than 10 MiB"


# --- empty and malformed documents -----------------------------------------------------


@pytest.mark.parametrize("content", ["", "\n\n\n", "   \n\n", "# tools go here\n", "# one\n\n   # two\n"])
def test_empty_and_comment_only_files(tmp_path: Path, content: str) -> None:
    """A file with no document is a TF006 warning at 1:1; the load is still ok."""
    result = load_specs([write(tmp_path / "empty.yaml", content)])
    diagnostic = only(result)
    assert (diagnostic.code, diagnostic.line, diagnostic.column) == ("TF006", 1, 1)
    assert diagnostic.severity is Severity.WARNING
    assert result.ok
    assert result.tools == ()


@pytest.mark.parametrize(
    ("content", "line", "column"),
    [
        ("toolflow: 1\ntools:\n  say:\n    description: 'unterminated\n", 5, 1),
        ("toolflow: 1\ntools: {say: {description: x}\n", 3, 1),
        ("toolflow: 1\n  tools: {}\n", 2, 8),
        ("toolflow: 1\ntools:\n\tsay: {}\n", 3, 1),
        ("toolflow: 1\n- tools\n", 2, 1),
        ("toolflow: 1\ntools: *nothing\n", 2, 8),
        ("toolflow: 1\ntools: [}\n", 2, 9),
    ],
)
def test_yaml_syntax_errors(tmp_path: Path, content: str, line: int, column: int) -> None:
    """A YAML syntax error is one TF001 at its position; the file keeps its text for suppressions."""
    result = load_specs([write(tmp_path / "broken.yaml", content)])
    assert positions(result) == [("TF001", line, column)]
    assert only(result).message.startswith("YAML syntax error: ")
    assert not result.files[0].ok
    assert result.files[0].text == content


def test_multiple_documents(tmp_path: Path) -> None:
    """A second document in one file is TF001 at its '---'."""
    result = load_specs([write(tmp_path / "two.yaml", f"toolflow: 1\ntools:\n  say:\n    {TOOL}---\ntoolflow: 1\n")])
    assert positions(result) == [("TF001", 6, 1)]
    assert result.tools == ()


def test_non_scalar_key(tmp_path: Path) -> None:
    """A list used as a mapping key is TF001 at the key, and the rest of the file loads."""
    content = f"toolflow: 1\ntools:\n  ? [a, b]\n  : {{}}\n  say:\n    {TOOL}"
    result = load_specs([write(tmp_path / "key.yaml", content)])
    assert positions(result) == [("TF001", 3, 5)]
    assert only(result).message == "a mapping key must be a scalar"
    assert [t.name for t in result.tools] == ["say"]


def test_duplicate_top_level_key(tmp_path: Path) -> None:
    """A repeated top-level key is TF002 at the second one, naming the line of the first."""
    content = f"toolflow: 1\ntools:\n  say:\n    {TOOL}tools:\n  page:\n    {TOOL}"
    result = load_specs([write(tmp_path / "dup.yaml", content)])
    diagnostic = only(result)
    assert (diagnostic.code, diagnostic.line, diagnostic.column) == ("TF002", 6, 1)
    assert diagnostic.message == "duplicate key 'tools' (first defined on line 2)"
    assert [t.name for t in result.tools] == ["page"]


def test_duplicate_nested_key(tmp_path: Path) -> None:
    """A repeated key inside a tool is TF002 at its position; the tool keeps the last value."""
    content = "toolflow: 1\ntools:\n  say:\n    description: first\n    implementation: say\n    description: second\n"
    result = load_specs([write(tmp_path / "dup.yaml", content)])
    assert positions(result) == [("TF002", 6, 5)]
    assert only(result).message == "duplicate key 'description' (first defined on line 4)"
    assert tool(result, "say").description == "second"


def test_duplicate_tool_names_in_one_file(tmp_path: Path) -> None:
    """The same tool twice under one 'tools:' is a duplicate key."""
    content = f"toolflow: 1\ntools:\n  say:\n    {TOOL}  say:\n    {TOOL}"
    assert positions(load_specs([write(tmp_path / "dup.yaml", content)])) == [("TF002", 6, 3)]


# --- tags and aliases ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "tag"),
    [
        ("!!python/object/apply:os.getcwd []", "!!python/object/apply:os.getcwd"),
        ("!custom text", "!custom"),
        ("!!timestamp 2001-12-14t21:59:43.10-05:00", "!!timestamp"),
        ("!!binary R0lGODlhDAAMAIQAAP", "!!binary"),
        ("!!set {a, b}", "!!set"),
    ],
)
def test_forbidden_tags(tmp_path: Path, value: str, tag: str) -> None:
    """Each tag outside the YAML core schema is TF003 at the tagged value."""
    content = f"toolflow: 1\ntools:\n  say:\n    {TOOL}    examples:\n      - args: {{}}\n        result: {value}\n"
    result = load_specs([write(tmp_path / "tags.yaml", content)])
    assert positions(result) == [("TF003", 8, 17)]
    assert only(result).message == f"tag {tag!r} is not allowed"
    assert tool(result, "say").examples[0].result is None


def test_python_tags_never_run(tmp_path: Path) -> None:
    """A !!python/object/apply tag is refused without calling anything."""
    marker = tmp_path / "pwned"
    touch = f"!!python/object/apply:pathlib.Path.touch [{str(marker)!r}]"
    content = f"toolflow: 1\ntools:\n  say:\n    {TOOL}    examples:\n      - args: {{}}\n        result: {touch}\n"
    result = load_specs([write(tmp_path / "evil.yaml", content)])
    assert [d.code for d in result.diagnostics] == ["TF003"]
    assert not marker.exists()


def _billion_laughs() -> str:
    lines = ["toolflow: 1", "policy:", "  l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 10)]
    return "\n".join(lines) + "\n"


async def test_billion_laughs_is_a_quick_diagnostic(tmp_path: Path) -> None:
    """A 'billion laughs' file is one TF004 within seconds, not a hang or an out-of-memory."""
    path = write(tmp_path / "laughs.yaml", _billion_laughs())
    with trio.fail_after(30):
        result = await trio.to_thread.run_sync(load_specs, [path], abandon_on_cancel=True)
    diagnostic = only(result)
    assert diagnostic.code == "TF004"
    assert 3 <= diagnostic.line <= 12
    assert not result.files[0].ok


async def test_recursive_alias(tmp_path: Path) -> None:
    """An alias inside its own anchor is TF004."""
    path = write(tmp_path / "loop.yaml", "toolflow: 1\npolicy: &p\n  again: *p\n")
    with trio.fail_after(30):
        result = await trio.to_thread.run_sync(load_specs, [path], abandon_on_cancel=True)
    assert [d.code for d in result.diagnostics] == ["TF004"]
    assert "recursive" in only(result).message


async def test_huge_legitimate_file_with_aliases_loads(tmp_path: Path) -> None:
    """Two thousand tools sharing one anchored parameter schema load, each with the shared schema."""
    properties = "".join(f"        p{i}: {{type: string, description: Parameter {i}}}\n" for i in range(8))
    first = f"  tool_0:\n    {TOOL}    parameters: &params\n      type: object\n      properties:\n{properties}"
    others = "".join(f"  tool_{i}:\n    {TOOL}    parameters: *params\n" for i in range(1, 2000))
    path = write(tmp_path / "big.yaml", "toolflow: 1\ntools:\n" + first + others)
    with trio.fail_after(60):
        result = await trio.to_thread.run_sync(load_specs, [path], abandon_on_cancel=True)
    assert result.diagnostics == ()
    assert len(result.tools) == 2000
    assert result.tools[1999].parameters is result.tools[0].parameters
    assert result.tools[1999].parameters["properties"]["p7"] == {"type": "string", "description": "Parameter 7"}


# --- values --------------------------------------------------------------------------


def test_interpolation(tmp_path: Path) -> None:
    """${VAR} and ${VAR:-default} read environ=; $${ is a literal ${."""
    content = (
        "toolflow: 1\ntools:\n  fetch:\n"
        "    description: Fetch from ${HOST}\n"
        "    title: ${TITLE:-Fetch a page}\n"
        "    command: [curl, '${SCHEME:-https}://${HOST}/{{ path }}', '$${NOT_A_VAR}']\n"
        "    parameters: {type: object, properties: {path: {type: string}}}\n"
    )
    result = load_specs([write(tmp_path / "env.yaml", content)], environ={"HOST": "example.org"})
    assert result.diagnostics == ()
    fetch = tool(result, "fetch")
    assert (fetch.description, fetch.title) == ("Fetch from example.org", "Fetch a page")
    assert fetch.implementations[0].config["argv"] == ["curl", "https://example.org/{{ path }}", "${NOT_A_VAR}"]


def test_unset_variable_is_a_warning(tmp_path: Path) -> None:
    """An unset ${VAR} is a TF007 warning at its value, which becomes empty; the load stays ok."""
    content = "toolflow: 1\ntools:\n  fetch:\n    description: Fetch ${HOST}.\n    implementation: x\n"
    result = load_specs([write(tmp_path / "env.yaml", content)], environ={})
    assert positions(result) == [("TF007", 4, 18)]
    assert only(result).severity is Severity.WARNING
    assert only(result).message == "environment variable 'HOST' is not set"
    assert result.ok
    assert tool(result, "fetch").description == "Fetch ."


def test_interpolation_defaults_to_os_environ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without environ=, ${VAR} reads the process environment."""
    monkeypatch.setenv("TOOLFLOW_TEST_IMPL", "from.env")
    content = "toolflow: 1\ntools:\n  a:\n    description: x\n    implementation: ${TOOLFLOW_TEST_IMPL}\n"
    result = load_specs([write(tmp_path / "env.yaml", content)])
    assert tool(result, "a").implementations[0].config == "from.env"


def test_yaml_12_core_scalars(tmp_path: Path) -> None:
    """yes/on stay strings, 0x1f is 31, .inf is infinity, ~ is null."""
    content = (
        "toolflow: 1\ntools:\n  a:\n"
        "    title: yes\n"
        "    description: on\n"
        "    concurrency: 0x1f\n"
        "    implementation: x\n"
        "    examples:\n"
        "      - args: {a: no, b: off, c: 0o17, d: .inf, e: -.inf, f: ~, g: 1e2, h: 2024-01-01, i: True}\n"
    )
    result = load_specs([write(tmp_path / "core.yaml", content)])
    assert result.diagnostics == ()
    a = tool(result, "a")
    assert (a.title, a.description, a.concurrency) == ("yes", "on", 31)
    assert a.examples[0].args == {
        "a": "no",
        "b": "off",
        "c": 15,
        "d": math.inf,
        "e": -math.inf,
        "f": None,
        "g": 100.0,
        "h": "2024-01-01",
        "i": True,
    }


def test_null_where_a_mapping_belongs(tmp_path: Path) -> None:
    """'~' for a mapping is a wrong type: YAML null is not an empty mapping."""
    content = "toolflow: 1\ntools:\n  a:\n    description: x\n    implementation: x\n    output_schema: ~\n"
    assert positions(load_specs([write(tmp_path / "null.yaml", content)])) == [("TF103", 6, 20)]


# --- wrong types ---------------------------------------------------------------------

OK_TOOL = "toolflow: 1\ntools:\n  ok:\n    description: fine\n    implementation: x\n  bad:\n"


@pytest.mark.parametrize(
    ("body", "line", "column", "pointer"),
    [
        ("    - description: a tool that is a list\n", 7, 5, "/tools/bad"),
        ("    a tool that is a string\n", 7, 5, "/tools/bad"),
        ("", 6, 7, "/tools/bad"),
        ("    description: [a, b]\n", 7, 18, "/tools/bad/description"),
        ("    category: 5\n", 7, 15, "/tools/bad/category"),
        ("    idempotent: 'yes'\n", 7, 17, "/tools/bad/idempotent"),
        ("    timeout: [5s]\n", 7, 14, "/tools/bad/timeout"),
        ("    retry: often\n", 7, 12, "/tools/bad/retry"),
        ("    retry: {attempts: two}\n", 7, 23, "/tools/bad/retry/attempts"),
        ("    cache: 5\n", 7, 12, "/tools/bad/cache"),
        ("    parameters: [a]\n", 7, 17, "/tools/bad/parameters"),
        ("    parameter_rules: {exclusive: [a, b]}\n", 7, 22, "/tools/bad/parameter_rules"),
        ("    depends_on: ok\n", 7, 17, "/tools/bad/depends_on"),
        ("    examples: {args: {}}\n", 7, 15, "/tools/bad/examples"),
        ("    examples:\n      - args: [1]\n", 8, 15, "/tools/bad/examples/0/args"),
        ("    implementation: 5\n", 7, 21, "/tools/bad/implementation"),
        ("    template: [a]\n", 7, 15, "/tools/bad/template"),
        ("    command: 5\n", 7, 14, "/tools/bad/command"),
        ("    command: [ls, 5]\n", 7, 19, "/tools/bad/command/1"),
    ],
)
def test_wrong_type_in_a_tool(tmp_path: Path, body: str, line: int, column: int, pointer: str) -> None:
    """A value of the wrong type is TF103 at the value; that tool is skipped, the others load."""
    result = load_specs([write(tmp_path / "types.yaml", OK_TOOL + body)])
    diagnostic = only(result)
    assert (diagnostic.code, diagnostic.line, diagnostic.column, diagnostic.pointer) == ("TF103", line, column, pointer)
    assert [t.name for t in result.tools] == ["ok"]


@pytest.mark.parametrize(
    ("content", "line", "column", "message"),
    [
        ("a scalar\n", 1, 1, "a spec file must be a mapping, got string"),
        ("42\n", 1, 1, "a spec file must be a mapping, got integer"),
        ("- toolflow: 1\n", 1, 1, "a spec file must be a mapping, got list"),
        ("toolflow: 1\ntools: a string\n", 2, 8, None),
        ("toolflow: 1\ntools: [say, page]\n", 2, 8, None),
        ("toolflow: 1\ndefaults: [timeout]\n", 2, 11, None),
        ("toolflow: 1\npolicy: strict\n", 2, 9, None),
    ],
)
def test_wrong_type_of_a_file_or_section(
    tmp_path: Path, content: str, line: int, column: int, message: str | None
) -> None:
    """A file that is not a mapping, or a section of the wrong type, is TF103 and yields no tools."""
    result = load_specs([write(tmp_path / "types.yaml", content)])
    diagnostic = only(result)
    assert (diagnostic.code, diagnostic.line, diagnostic.column) == ("TF103", line, column)
    if message is not None:
        assert diagnostic.message == message
    assert result.tools == ()


def test_tools_that_is_a_string_makes_the_file_unusable(tmp_path: Path) -> None:
    """With 'tools' of the wrong type the file is not ok."""
    result = load_specs([write(tmp_path / "types.yaml", "toolflow: 1\ntools: say\n")])
    assert not result.files[0].ok


@pytest.mark.parametrize(
    ("content", "code", "line", "column"),
    [
        ("tools: {}\n", "TF102", 1, 1),
        ("toolflow: 2\n", "TF105", 1, 11),
        ("toolflow: '1'\n", "TF105", 1, 11),
        ("toolflow: 1\ntool: {}\n", "TF101", 2, 1),
        ("toolflow: 1\ntools:\n  a:\n    descripton: x\n", "TF101", 4, 5),
        ("toolflow: 1\ntools:\n  a:\n    timeout: 5 seconds\n", "TF104", 4, 14),
        ("toolflow: 1\ntools:\n  a:\n    cache: {scope: forever}\n", "TF104", 4, 20),
        ("toolflow: 1\ntools:\n  a:\n    examples:\n      - description: no args\n", "TF102", 5, 9),
    ],
)
def test_schema_codes(tmp_path: Path, content: str, code: str, line: int, column: int) -> None:
    """Spec-schema problems map to TF101 (unknown key), TF102 (missing), TF104 (value), TF105 (version)."""
    assert positions(load_specs([write(tmp_path / "schema.yaml", content)])) == [(code, line, column)]


def test_unknown_key_suggests_the_closest(tmp_path: Path) -> None:
    """An unknown key names the key it probably meant."""
    content = "toolflow: 1\ntools:\n  a:\n    timout: 5s\n"
    assert only(load_specs([write(tmp_path / "typo.yaml", content)])).message == (
        "unknown key 'timout' in tool 'a'; did you mean 'timeout'?"
    )


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("{require: [b]}", "'require' needs 'when': the parameter (or values) that trigger it"),
        ("{when: a, exclusive: [a, b]}", "'when' goes with 'require', not with 'exclusive'"),
        ("{exclusive: [a, b], at_least_one: [a, b]}", "found 'exclusive', 'at_least_one'"),
        ("{when: a}", "found none"),
    ],
)
def test_malformed_parameter_rule(tmp_path: Path, rule: str, message: str) -> None:
    """A parameter rule without exactly one form is TF104 at the rule; the tool still loads without it."""
    content = f"toolflow: 1\ntools:\n  a:\n    {TOOL}    parameter_rules:\n      - {rule}\n"
    result = load_specs([write(tmp_path / "rule.yaml", content)])
    assert positions(result) == [("TF104", 7, 9)]
    assert only(result).message.endswith(message)
    assert tool(result, "a").parameter_rules == ()


# --- the model ----------------------------------------------------------------------


def test_full_tool_model(tmp_path: Path) -> None:
    """Every section of a tool lands in its ToolSpec field."""
    content = """\
toolflow: 1
tools:
  get: {description: Get, implementation: g}
  search:
    title: Search
    description: Search objects
    category: dangerous
    idempotent: true
    strict: true
    concurrency: 2
    timeout: 500ms
    retry: {attempts: 2, initial: 250ms, max: 1m, multiplier: 3, jitter: false, on: [timeout, "my.mod:Busy"]}
    cache: {scope: persistent, ttl: 1h}
    parameters:
      type: object
      properties: {name: {type: string}, dbref: {type: string}, all: {type: boolean}}
    output_schema: {type: object}
    parameter_rules:
      - exactly_one: [name, dbref]
      - when: all
        require: [name]
      - when: {all: true}
        require: [dbref]
      - exclusive: [name, all]
      - at_least_one: [name, all]
    depends_on: [get, {tool: get, scope: session}]
    examples:
      - args: {name: sword}
        result: {found: 1}
        description: finds the sword
      - args: {dbref: "#1"}
    template: {source: "{{ name }}", env: [HOME], output: json}
"""
    result = load_specs([write(tmp_path / "full.yaml", content)])
    assert result.diagnostics == ()
    search = tool(result, "search")
    assert (search.title, search.description, search.category) == ("Search", "Search objects", "dangerous")
    assert (search.idempotent, search.strict, search.concurrency, search.timeout) == (True, True, 2, 0.5)
    assert search.retry == RetryPolicy(
        attempts=2, initial=0.25, max=60.0, multiplier=3.0, jitter=False, on=("timeout", "my.mod:Busy")
    )
    assert search.cache == CachePolicy(scope=CacheScope.PERSISTENT, ttl=3600.0)
    assert search.output_schema == {"type": "object"}
    assert [(r.kind, r.params, r.when, r.when_values) for r in search.parameter_rules] == [
        ("exactly_one", ("name", "dbref"), None, None),
        ("requires", ("name",), "all", None),
        ("requires", ("dbref",), None, {"all": True}),
        ("exclusive", ("name", "all"), None, None),
        ("at_least_one", ("name", "all"), None, None),
    ]
    assert [(d.tool, d.scope, d.pointer) for d in search.depends_on] == [
        ("get", "loop", "/tools/search/depends_on/0"),
        ("get", "session", "/tools/search/depends_on/1"),
    ]
    first, second = search.examples
    assert (first.args, first.result, first.has_result, first.description) == (
        {"name": "sword"},
        {"found": 1},
        True,
        "finds the sword",
    )
    assert (second.has_result, second.pointer) == (False, "/tools/search/examples/1")
    assert search.implementation is not None
    assert search.implementation.kind == "template"
    assert search.implementation.config == {"source": "{{ name }}", "env": ["HOME"], "output": "json"}
    assert (search.file, search.pointer) == (str(tmp_path / "full.yaml"), "/tools/search")
    assert search.locator is not None
    assert search.locator.locate(search.pointer, key=True).line == 4


def test_tool_defaults(tmp_path: Path) -> None:
    """A bare tool gets the documented defaults: safe_chain, 30 s, seed 000's retry policy, no cache."""
    content = "toolflow: 1\ntools:\n  bare: {}\n"
    bare = tool(load_specs([write(tmp_path / "bare.yaml", content)]), "bare")
    assert (bare.category, bare.timeout, bare.idempotent, bare.strict, bare.cache) == (
        "safe_chain",
        30.0,
        False,
        False,
        None,
    )
    assert bare.retry == RetryPolicy(attempts=4, initial=1.0, max=10.0, multiplier=2.0, jitter=True)
    assert bare.parameters == {"type": "object"}
    assert bare.implementations == ()
    assert bare.implementation is None


def test_implementation_shorthands(tmp_path: Path) -> None:
    """A template string and a command list are the short forms of their mappings."""
    content = (
        "toolflow: 1\ntools:\n"
        "  t: {template: 'Hi {{ who }}'}\n"
        "  c: {command: [echo, '{{ who }}']}\n"
        "  i: {implementation: plugin.name}\n"
        "  two: {template: x, implementation: y}\n"
    )
    result = load_specs([write(tmp_path / "impl.yaml", content)])
    assert tool(result, "t").implementations[0].config == {"source": "Hi {{ who }}", "env": [], "output": "text"}
    assert tool(result, "c").implementations[0].config == {
        "argv": ["echo", "{{ who }}"],
        "cwd": None,
        "env": {},
        "max_output": 65536,
        "output": "text",
        "success_codes": [0],
    }
    assert tool(result, "i").implementations[0].config == "plugin.name"
    assert [i.kind for i in tool(result, "two").implementations] == ["implementation", "template"]
    assert tool(result, "two").implementation is None


# --- defaults -----------------------------------------------------------------------

DEFAULTS = """\
toolflow: 1
defaults:
  timeout: 10s
  strict: true
  retry: {attempts: 3, initial: 2s, jitter: false}
  cache: {scope: tick, ttl: 30s}
tools:
  plain: {}
  own_timeout: {timeout: 500ms, strict: false}
  own_retry: {retry: {max: 1m}}
  no_retry: {retry: false}
  own_cache: {cache: {ttl: 1m}}
  no_cache: {cache: false}
"""


def test_defaults_apply_to_every_tool(tmp_path: Path) -> None:
    """A tool without its own timeout, retry, cache or strict takes the file's defaults."""
    plain = tool(load_specs([write(tmp_path / "defaults.yaml", DEFAULTS)]), "plain")
    assert (plain.timeout, plain.strict) == (10.0, True)
    assert plain.retry == RetryPolicy(attempts=3, initial=2.0, jitter=False)
    assert plain.cache == CachePolicy(scope=CacheScope.TICK, ttl=30.0)


def test_own_values_override_defaults_key_by_key(tmp_path: Path) -> None:
    """A tool's own retry and cache keys override the defaults' keys one by one; false turns them off."""
    result = load_specs([write(tmp_path / "defaults.yaml", DEFAULTS)])
    assert result.diagnostics == ()
    assert (tool(result, "own_timeout").timeout, tool(result, "own_timeout").strict) == (0.5, False)
    assert tool(result, "own_retry").retry == RetryPolicy(attempts=3, initial=2.0, max=60.0, jitter=False)
    assert tool(result, "no_retry").retry.attempts == 1
    assert tool(result, "own_cache").cache == CachePolicy(scope=CacheScope.TICK, ttl=60.0)
    assert tool(result, "no_cache").cache is None


def test_invalid_defaults_are_reported_and_ignored(tmp_path: Path) -> None:
    """Defaults with a schema error are reported once and not applied."""
    content = "toolflow: 1\ndefaults: {timeout: forever}\ntools:\n  a: {}\n"
    result = load_specs([write(tmp_path / "defaults.yaml", content)])
    assert positions(result) == [("TF104", 2, 21)]
    assert tool(result, "a").timeout == 30.0


@pytest.mark.parametrize(
    ("defaults", "body", "attempts"),
    [
        ("", "category: dangerous", 1),
        ("", "category: dangerous, retry: true", 4),
        ("", "category: dangerous, retry: {initial: 2s}", 1),
        ("", "category: dangerous, retry: {attempts: 3}", 3),
        ("", "category: dangerous, idempotent: true", 4),
        ("", "category: dangerous, idempotent: true, retry: {attempts: 2}", 2),
        ("", "category: safe_chain", 4),
        ("", "category: async_required", 4),
        ("defaults: {retry: {initial: 2s}}\n", "category: dangerous", 1),
        ("defaults: {retry: {initial: 2s}}\n", "category: dangerous, idempotent: true", 4),
    ],
)
def test_dangerous_tools_are_not_retried_unless_asked(tmp_path: Path, defaults: str, body: str, attempts: int) -> None:
    """A dangerous tool that is not idempotent gets one attempt unless the spec asks for retries explicitly."""
    content = f"toolflow: 1\n{defaults}tools:\n  t: {{{body}}}\n"
    result = load_specs([write(tmp_path / "danger.yaml", content)])
    assert result.diagnostics == ()
    assert tool(result, "t").retry.attempts == attempts


# --- paths --------------------------------------------------------------------------


def test_directory_loading_is_recursive_sorted_and_skips_hidden(tmp_path: Path) -> None:
    """A directory contributes its *.yaml and *.yml files, recursively and sorted; hidden entries are skipped."""
    root = tmp_path / "specs"
    for relative in [
        "b.yaml",
        "a.yml",
        "sub/c.yaml",
        "sub/deeper/d.yml",
        "a_sub/e.yaml",
        ".hidden/x.yaml",
        "sub/.git/y.yaml",
        ".dot.yaml",
        "notes.txt",
        "schema.json",
        "README.md",
        "f.yaml.bak",
    ]:
        write(root / relative, "toolflow: 1\n")
    result = load_specs([root])
    assert result.diagnostics == ()
    assert [os.path.relpath(f.path, root) for f in result.files] == [
        "a.yml",
        "a_sub/e.yaml",
        "b.yaml",
        "sub/c.yaml",
        "sub/deeper/d.yml",
    ]


def test_directory_named_like_a_spec_file_is_walked(tmp_path: Path) -> None:
    """A directory called x.yaml inside a spec directory is a directory, not an unreadable file."""
    write(tmp_path / "specs" / "odd.yaml" / "inner.yaml", "toolflow: 1\n")
    result = load_specs([tmp_path / "specs"])
    assert result.diagnostics == ()
    assert [os.path.basename(f.path) for f in result.files] == ["inner.yaml"]


def test_named_files_load_whatever_their_suffix_and_in_order(tmp_path: Path) -> None:
    """Files named explicitly load in the given order, whatever their suffix."""
    first = write(tmp_path / "z.txt", f"toolflow: 1\ntools:\n  z:\n    {TOOL}")
    second = write(tmp_path / "a.yaml", f"toolflow: 1\ntools:\n  a:\n    {TOOL}")
    result = load_specs([first, str(second)])
    assert [t.name for t in result.tools] == ["z", "a"]
    assert [f.path for f in result.files] == [str(first), str(second)]


def test_empty_directory_loads_nothing_and_warns(tmp_path: Path) -> None:
    """A directory without spec files (hidden ones and other suffixes aside) gives no files and a TF008 warning."""
    write(tmp_path / "tools.json", "{}")
    write(tmp_path / ".hidden.yaml", f"toolflow: 1\ntools:\n  a:\n    {TOOL}")
    result = load_specs([tmp_path])
    assert result.files == ()
    assert [(d.code, d.severity, d.file, d.message) for d in result.diagnostics] == [
        ("TF008", Severity.WARNING, str(tmp_path), f"no spec files (*.yaml, *.yml) in directory {str(tmp_path)!r}")
    ]
    assert result.ok


def test_diagnostics_are_sorted_by_file_and_position(tmp_path: Path) -> None:
    """Diagnostics of several files come sorted by file, line and column."""
    write(tmp_path / "b.yaml", "toolflow: 1\nz: 1\ny: 2\n")
    write(tmp_path / "a.yaml", "toolflow: 3\n")
    result = load_specs([tmp_path])
    assert [(os.path.basename(d.file), d.code, d.line) for d in result.diagnostics] == [
        ("a.yaml", "TF105", 1),
        ("b.yaml", "TF101", 2),
        ("b.yaml", "TF101", 3),
    ]


def test_validate_specs_raises_on_errors_only(tmp_path: Path) -> None:
    """validate_specs raises SpecError carrying the diagnostics on errors, and passes warnings."""
    write(tmp_path / "warn.yaml", "# nothing yet\n")
    assert [d.code for d in validate_specs([tmp_path]).diagnostics] == ["TF006"]
    write(tmp_path / "bad.yaml", "toolflow: 2\n")
    with pytest.raises(SpecError) as caught:
        validate_specs([tmp_path])
    assert "TF105" in [d.code for d in caught.value.diagnostics]


# --- properties ---------------------------------------------------------------------

YAML_FRAGMENTS = (
    *("toolflow: 1\n", "tools:\n", "  a:\n", "    ", "  ", "- ", "[", "]", "{", "}", ": ", ":", ",", "? "),
    *("&a ", "*a", "&b ", "*b", "!!str ", "!!bool ", "!!null ", "!x ", "!!map ", "!!seq ", "!!set "),
    *("!!python/object:os.system ", "'", '"', "${X}", "${Y:-d}", "$${", "\t", "# c", "# toolflow: ignore\n"),
    *("---\n", "...\n", "\n", "\r\n", "|\n", ">-\n", "description", "timeout", "retry", "cache", "examples"),
    *("args", "template", "command", "implementation", "parameters", "1", "0x1f", ".inf", "~", "yes", "é"),
    *("\ufeff", "\u2028", "\\", "%YAML 1.2\n", "%TAG ! tag:x,2000:\n", "!!int ", "!!float ", "99999"),
)
YAMLISH = st.lists(st.sampled_from(YAML_FRAGMENTS), max_size=40).map("".join)


def _check_positions(result: LoadResult) -> None:
    for diagnostic in result.diagnostics:
        assert diagnostic.line >= 1, diagnostic
        assert diagnostic.column >= 1, diagnostic


@hypothesis.settings(deadline=None, max_examples=150)
@hypothesis.given(text=st.one_of(st.text(st.characters(codec="utf-8")), YAMLISH))
def test_any_text_loads_without_raising(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    """For any text, load_specs returns diagnostics with 1-based positions and never raises."""
    path = tmp_path_factory.mktemp("text") / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    _check_positions(load_specs([path], environ={"X": "x"}))


@hypothesis.settings(deadline=None, max_examples=150)
@hypothesis.given(data=st.binary(max_size=512))
def test_any_bytes_load_without_raising(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    """For any bytes in a file, load_specs returns diagnostics with 1-based positions and never raises."""
    path = tmp_path_factory.mktemp("bytes") / "spec.yaml"
    path.write_bytes(data)
    _check_positions(load_specs([path], environ={}))
