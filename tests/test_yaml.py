"""The YAML layer: composition, YAML 1.2 core scalars, tags, aliases, interpolation, NodeLocator."""

from __future__ import annotations

import math
from typing import Any

import pytest
from yaml.nodes import Node

from toolflow import _yaml
from toolflow._diagnostics import Span

Reported = list[tuple[str, str, int, int, bool]]


def load(text: str, *, environ: dict[str, str] | None = None, max_nodes: int = _yaml.MAX_EXPANDED_NODES) -> Any:
    """Compose and convert *text*, failing the test on any report."""
    value, reported = load_reporting(text, environ=environ, max_nodes=max_nodes)
    assert reported == []
    return value


def load_reporting(
    text: str, *, environ: dict[str, str] | None = None, max_nodes: int = _yaml.MAX_EXPANDED_NODES
) -> tuple[Any, Reported]:
    """Compose and convert *text*; return the value and ``(code, message, line, column, at_key)`` reports."""
    reported: Reported = []

    def report(code: str, message: str, node: Node, *, at_key: bool = False) -> None:
        reported.append((code, message, node.start_mark.line + 1, node.start_mark.column + 1, at_key))

    root = _yaml.compose(text)
    assert root is not None
    value, _ = _yaml.convert(root, report, environ={} if environ is None else environ, max_nodes=max_nodes)
    return value, reported


def compose_and_convert(text: str) -> Any:
    """Compose and convert *text*, ignoring reports; DocumentError propagates from either step."""
    root = _yaml.compose(text)
    assert root is not None
    return _yaml.convert(root, lambda *_, **__: None, environ={})[0]


# --- composition ------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "\n\n", "   \n", "# only a comment\n", "# one\n\n  # two\n", "\ufeff"])
def test_empty_documents_compose_to_none(text: str) -> None:
    """Nothing, blank lines and comments compose to no document at all."""
    assert _yaml.compose(text) is None


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("a: 'unterminated\n", 2, 1),
        ("a: [1, 2\n", 2, 1),
        ("a: 1\n b: 2\n", 2, 3),
        ("a:\n\t- 1\n", 2, 1),
        ("- a\nb: c\n", 2, 1),
        ("a: *nowhere\n", 1, 4),
    ],
)
def test_syntax_error_is_a_document_error_with_position(text: str, line: int, column: int) -> None:
    """A syntax error raises DocumentError TF001 at the 1-based position of the problem."""
    with pytest.raises(_yaml.DocumentError) as caught:
        _yaml.compose(text)
    assert (caught.value.code, caught.value.line, caught.value.column) == ("TF001", line, column)
    assert caught.value.message.startswith("YAML syntax error: ")


def test_syntax_error_names_where_an_unterminated_construct_starts() -> None:
    """An unterminated quoted scalar names the line and column where it starts."""
    with pytest.raises(_yaml.DocumentError) as caught:
        _yaml.compose("toolflow: 1\ndescription: 'never closed\n")
    assert "starts on line 2, column 14" in caught.value.message


def test_multiple_documents_are_refused_at_the_second() -> None:
    """A stream of two documents is a TF001 at the start of the second."""
    with pytest.raises(_yaml.DocumentError) as caught:
        _yaml.compose("toolflow: 1\n---\ntoolflow: 1\n")
    assert (caught.value.code, caught.value.line, caught.value.column) == ("TF001", 2, 1)
    assert "another document" in caught.value.message


def test_multiple_documents_message_reads_in_order() -> None:
    """The two-document message says what was expected before what was found."""
    with pytest.raises(_yaml.DocumentError) as caught:
        _yaml.compose("toolflow: 1\n---\ntoolflow: 1\n")
    message = caught.value.message
    assert message.index("expected a single document") < message.index("found another document")


@pytest.mark.parametrize("opening", ["[", "{a: ", "- "])
def test_deep_nesting_is_a_document_error(opening: str) -> None:
    """A document nested thousands of levels deep is a DocumentError, not a RecursionError."""
    closing = {"[": "]", "{a: ": "}", "- ": ""}[opening]
    text = opening * 5000 + "x" + closing * 5000 + "\n"
    with pytest.raises(_yaml.DocumentError):
        compose_and_convert(text)


def test_nesting_up_to_the_limit_loads() -> None:
    """Collections nested MAX_DEPTH deep (the top mapping counts) load, far beyond any spec."""
    depth = _yaml.MAX_DEPTH - 1
    value = load("a: " + "[" * depth + "]" * depth + "\n")
    levels, node = 0, value["a"]
    while node:
        levels, node = levels + 1, node[0]
    assert levels == depth - 1


# --- YAML 1.2 core scalars ----------------------------------------------------------


@pytest.mark.parametrize(
    ("scalar", "expected"),
    [
        ("yes", "yes"),
        ("no", "no"),
        ("on", "on"),
        ("off", "off"),
        ("y", "y"),
        ("Yes", "Yes"),
        ("true", True),
        ("True", True),
        ("FALSE", False),
        ("~", None),
        ("null", None),
        ("NULL", None),
        ("", None),
        ("0x1f", 31),
        ("0o17", 15),
        ("017", 17),
        ("-42", -42),
        ("+7", 7),
        ("1_000", "1_000"),
        ("1:30", "1:30"),
        ("2020-01-01", "2020-01-01"),
        ("1e3", 1000.0),
        ("-2.5", -2.5),
        (".5", 0.5),
        (".inf", math.inf),
        ("-.Inf", -math.inf),
        ("+.INF", math.inf),
        ("0x", "0x"),
        ("'0x1f'", "0x1f"),
        ('"true"', "true"),
        ("!!str 12", "12"),
        ("!!int 12", 12),
        ("!!float 1", 1.0),
        ("!!bool true", True),
        ("!!null ~", None),
    ],
)
def test_core_schema_scalars(scalar: str, expected: object) -> None:
    """Plain scalars resolve by the YAML 1.2 core schema: 'yes' and 'on' stay strings."""
    value = load(f"v: {scalar}\n")["v"]
    assert value == expected
    assert type(value) is type(expected)


def test_nan_is_a_float() -> None:
    """'.nan' resolves to a float NaN."""
    assert math.isnan(load("v: .NaN\n")["v"])


def test_huge_hex_integer_loads() -> None:
    """A hex integer of thousands of digits is an integer (no digit limit for base 16)."""
    assert load("v: 0x" + "f" * 5000 + "\n")["v"] == 16**5000 - 1


def test_huge_decimal_integer_does_not_raise() -> None:
    """A decimal integer of 5,000 digits is loaded or reported, never a ValueError."""
    value, reported = load_reporting("v: " + "9" * 5000 + "\n")
    assert value["v"] == 10**5000 - 1 or (value["v"] is None and reported)


@pytest.mark.parametrize("scalar", ["!!int abc", "!!float abc", "!!int", "!!float ''", "!!int 0x", "!!bool maybe"])
def test_explicit_core_tag_on_other_text_is_reported(scalar: str) -> None:
    """An explicit !!int, !!float or !!bool on text that is not one is reported, not raised or guessed."""
    value, reported = load_reporting(f"v: {scalar}\n")
    assert value == {"v": None}
    assert [r[0] for r in reported] == ["TF003"]


def test_keys_keep_their_text() -> None:
    """Mapping keys are the key's text, whatever it would resolve to as a value."""
    assert load("1: a\ntrue: b\nnull: c\n0x1f: d\n") == {"1": "a", "true": "b", "null": "c", "0x1f": "d"}


# --- tags ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "tag"),
    [
        ("!!python/object/apply:os.system [id]", "!!python/object/apply:os.system"),
        ("!!python/name:os.system", "!!python/name:os.system"),
        ("!custom x", "!custom"),
        ("!custom {a: 1}", "!custom"),
        ("!!timestamp 2020-01-01", "!!timestamp"),
        ("!!binary aGVsbG8=", "!!binary"),
        ("!!set {a: null}", "!!set"),
        ("!!omap [a: 1]", "!!omap"),
        ("!!str [a]", "!!str"),
        ("!!map [a]", "!!map"),
        ("!!seq {a: 1}", "!!seq"),
    ],
)
def test_forbidden_tags_are_reported_and_dropped(value: str, tag: str) -> None:
    """Every tag outside the core schema, or on the wrong kind of node, is TF003 and the value is dropped."""
    converted, reported = load_reporting(f"ok: 1\nv: {value}\n")
    assert converted == {"ok": 1, "v": None}
    assert len(reported) == 1
    code, message, line, column, _ = reported[0]
    assert (code, line, column) == ("TF003", 2, 4)
    assert message.replace("tag:yaml.org,2002:", "!!") == f"tag {tag!r} is not allowed"


def test_forbidden_tag_on_a_key_drops_the_entry() -> None:
    """A tagged mapping key is reported and its entry left out."""
    converted, reported = load_reporting("a: 1\n? !custom b\n: 2\n")
    assert converted == {"a": 1}
    assert [(r[0], r[2], r[3]) for r in reported] == [("TF003", 2, 3)]


def test_tags_declared_by_a_directive_are_refused() -> None:
    """A %TAG shorthand expands to a full tag, which is refused like any other."""
    converted, reported = load_reporting("%TAG !e! tag:example.com,2000:\n---\nv: !e!thing 1\n")
    assert converted == {"v": None}
    assert [r[1] for r in reported] == ["tag 'tag:example.com,2000:thing' is not allowed"]


# --- keys ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [("? [a, b]\n: 1\nc: 2\n", 1, 3), ("c: 2\n? {a: 1}\n: 1\n", 2, 3), ("{[a]: 1, c: 2}\n", 1, 2)],
)
def test_non_scalar_keys_are_reported_and_skipped(text: str, line: int, column: int) -> None:
    """A list or mapping used as a key is a TF001 at the key; the other entries load."""
    converted, reported = load_reporting(text)
    assert converted == {"c": 2}
    assert reported == [("TF001", "a mapping key must be a scalar", line, column, False)]


def test_duplicate_top_level_key() -> None:
    """A repeated top-level key is TF002 at the second key, naming the first line; the last value wins."""
    converted, reported = load_reporting("a: 1\nb: 2\na: 3\n")
    assert converted == {"a": 3, "b": 2}
    assert reported == [("TF002", "duplicate key 'a' (first defined on line 1)", 3, 1, True)]


def test_duplicate_nested_key() -> None:
    """A repeated key deep inside is reported at its own position."""
    text = "tools:\n  say:\n    retry:\n      attempts: 2\n      attempts: 3\n"
    converted, reported = load_reporting(text)
    assert converted == {"tools": {"say": {"retry": {"attempts": 3}}}}
    assert reported == [("TF002", "duplicate key 'attempts' (first defined on line 4)", 5, 7, True)]


def test_duplicate_key_in_flow_mapping_and_quoted_spelling() -> None:
    """Keys are compared by their text, so 'a' and a are the same key, also in flow style."""
    _, reported = load_reporting("{a: 1, 'a': 2, \"a\": 3}\n")
    assert [(r[0], r[2], r[3]) for r in reported] == [("TF002", 1, 8), ("TF002", 1, 16)]


def test_same_key_in_sibling_mappings_is_not_a_duplicate() -> None:
    """The same key in two different mappings is fine."""
    assert load("a: {x: 1}\nb: {x: 2}\n") == {"a": {"x": 1}, "b": {"x": 2}}


# --- aliases ------------------------------------------------------------------------


def _laughs(levels: int, width: int = 10) -> str:
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_billion_laughs_is_refused() -> None:
    """Nine levels of ten aliases (10^9 nodes) raise TF004 at an alias of the document."""
    root = _yaml.compose(_laughs(9))
    assert root is not None
    with pytest.raises(_yaml.DocumentError) as caught:
        _yaml.convert(root, lambda *_, **__: None, environ={})
    assert caught.value.code == "TF004"
    assert 2 <= caught.value.line <= 9
    assert f"{_yaml.MAX_EXPANDED_NODES:,} nodes" in caught.value.message


def test_expansion_bound_is_the_max_nodes_argument() -> None:
    """The bound is *max_nodes*: 1 + 10 + 100 nodes pass at 200 and fail at 100."""
    text = "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    assert len(load(text, max_nodes=200)["b"]) == 10
    with pytest.raises(_yaml.DocumentError):
        load(text, max_nodes=100)


@pytest.mark.parametrize(
    "text", ["a: &a [*a]\n", "a: &a {b: *a}\n", "a: &a [1, [2, [3, *a]]]\n", "&a {k: [*a]}\n", "&top [x, *top]\n"]
)
def test_recursive_alias_is_refused(text: str) -> None:
    """An alias inside its own anchor is TF004, not an endless walk."""
    root = _yaml.compose(text)
    assert root is not None
    with pytest.raises(_yaml.DocumentError) as caught:
        _yaml.convert(root, lambda *_, **__: None, environ={})
    assert caught.value.code == "TF004"
    assert "recursive" in caught.value.message


def test_aliases_share_one_value() -> None:
    """An anchored value is converted once and shared by every alias."""
    converted = load("a: &p {type: object}\nb: *p\nc: [*p, *p]\n")
    assert converted["a"] == {"type": "object"}
    assert converted["b"] is converted["a"]
    assert converted["c"][1] is converted["a"]


def test_many_aliases_within_the_bound_load() -> None:
    """A large, legitimate document reusing an anchor thousands of times loads."""
    anchor = "p: &p {type: object, properties: {q: {type: string, description: What to find}}}\n"
    uses = "".join(f"t{i}: *p\n" for i in range(5000))
    converted = load(anchor + uses)
    assert len(converted) == 5001
    assert converted["t4999"]["properties"]["q"]["type"] == "string"


# --- environment interpolation ------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "environ", "expected"),
    [
        ("${HOST}", {"HOST": "example.org"}, "example.org"),
        ("http://${HOST}:${PORT}/", {"HOST": "h", "PORT": "80"}, "http://h:80/"),
        ("${PORT:-8080}", {}, "8080"),
        ("${PORT:-8080}", {"PORT": "9090"}, "9090"),
        ("${PORT:-8080}", {"PORT": ""}, "8080"),
        ("${PORT:-}", {}, ""),
        ("${URL:-http://127.0.0.1:8080/x}", {}, "http://127.0.0.1:8080/x"),
        ("${EMPTY}", {"EMPTY": ""}, ""),
        ("$${HOST}", {"HOST": "h"}, "${HOST}"),
        ("$${HOST:-x} and ${HOST}", {"HOST": "h"}, "${HOST:-x} and h"),
        ("$HOST", {"HOST": "h"}, "$HOST"),
        ("${1X}", {}, "${1X}"),
        ("${}", {}, "${}"),
        ("'cost: $5'", {}, "cost: $5"),
        ("'${HOST}'", {"HOST": "quoted"}, "quoted"),
    ],
)
def test_interpolation(value: str, environ: dict[str, str], expected: str) -> None:
    """${VAR}, ${VAR:-default} (also for an empty VAR) and $${ for a literal ${."""
    assert load(f"v: {value}\n", environ=environ)["v"] == expected


def test_interpolation_in_block_scalar_and_lists() -> None:
    """Every string value is interpolated: block scalars and list items too."""
    converted = load("b: |\n  run ${TOOL}\n  done\nl: ['a${X}', \"${X}b\"]\n", environ={"TOOL": "ls", "X": "-"})
    assert converted == {"b": "run ls\ndone\n", "l": ["a-", "-b"]}


def test_interpolation_leaves_keys_and_non_strings_alone() -> None:
    """Keys and numbers are not interpolated."""
    assert load("${K}: 1\nn: 12\n", environ={"K": "key"}) == {"${K}": 1, "n": 12}


def test_unset_variable_is_reported_and_empty() -> None:
    """An unset variable without a default is TF007 at the scalar and becomes an empty string."""
    converted, reported = load_reporting("a: ok\nv: 'x-${NOPE}-y'\n", environ={})
    assert converted == {"a": "ok", "v": "x--y"}
    assert reported == [("TF007", "environment variable 'NOPE' is not set", 2, 4, False)]


def test_each_unset_variable_is_reported() -> None:
    """Two unset variables in one value give two reports."""
    _, reported = load_reporting("v: ${A}${B}\n", environ={})
    assert [r[1] for r in reported] == [
        "environment variable 'A' is not set",
        "environment variable 'B' is not set",
    ]


def test_interpolation_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without environ=, variables come from the process environment."""
    monkeypatch.setenv("TOOLFLOW_TEST_HOST", "from-env")
    root = _yaml.compose("v: ${TOOLFLOW_TEST_HOST}\n")
    assert root is not None
    assert _yaml.convert(root, lambda *_, **__: None)[0] == {"v": "from-env"}


# --- NodeLocator --------------------------------------------------------------------

LOCATOR_DOC = """\
tools:
  a/b:
    description: slash
  m~n:
    description: tilde
  ~1:
    description: literal tilde-one
    examples:
      - args: {q: 1}
      - args: {q: 2}
"""


def _located(text: str) -> _yaml.NodeLocator:
    """The locator of *text*, from the positions convert() records."""
    root = _yaml.compose(text)
    assert root is not None
    return _yaml.NodeLocator(_yaml.convert(root, lambda *_, **__: None, environ={})[1], text)


def _locator() -> _yaml.NodeLocator:
    return _located(LOCATOR_DOC)


def _start(span: Span) -> tuple[int, int]:
    return span.line, span.column


@pytest.mark.parametrize(
    ("pointer", "key", "expected"),
    [
        ("", False, (1, 1)),
        ("/tools", True, (1, 1)),
        ("/tools/a~1b", True, (2, 3)),
        ("/tools/a~1b/description", False, (3, 18)),
        ("/tools/m~0n", True, (4, 3)),
        ("/tools/m~0n/description", False, (5, 18)),
        ("/tools/~01", True, (6, 3)),
        ("/tools/~01/examples/1", False, (10, 9)),
        ("/tools/~01/examples/1/args/q", False, (10, 19)),
    ],
)
def test_locator_unescapes_pointer_tokens(pointer: str, key: bool, expected: tuple[int, int]) -> None:
    """'~1' is '/', '~0' is '~', and '~01' is the literal key '~1'."""
    assert _start(_locator().locate(pointer, key=key)) == expected


@pytest.mark.parametrize(
    ("pointer", "key", "expected"),
    [
        ("/tools/a~1b/missing", False, (3, 5)),
        ("/tools/a~1b/missing/deeper", True, (2, 3)),
        ("/tools/a~1b/description/x", False, (3, 18)),
        ("/tools/~01/examples/7", False, (9, 7)),
        ("/tools/~01/examples/-", False, (9, 7)),
        ("/tools/~01/examples/01x", False, (9, 7)),
        ("/tools/a~1c", True, (1, 1)),
        ("/nothing/here", False, (1, 1)),
    ],
)
def test_locator_falls_back_to_the_closest_ancestor(pointer: str, key: bool, expected: tuple[int, int]) -> None:
    """A pointer that does not resolve fully is located at the deepest part that exists."""
    assert _start(_locator().locate(pointer, key=key)) == expected


def test_locator_spans_are_end_exclusive() -> None:
    """A span ends just after its node."""
    assert _locator().locate("/tools/m~0n/description") == Span(line=5, column=18, end_line=5, end_column=23)


def test_locator_prefers_the_last_of_duplicate_keys() -> None:
    """With duplicate keys the pointer names the entry whose value was kept: the last."""
    text = "a: 1\na: 2\n"
    locator = _located(text)
    assert _start(locator.locate("/a", key=True)) == (2, 1)


def test_locator_of_an_empty_document() -> None:
    """Every pointer of an empty document is at 1:1."""
    locator = _yaml.NodeLocator(None)
    assert locator.locate("/tools/x") == Span(line=1, column=1, end_line=1, end_column=1)
    assert locator.kind("/tools/x") is None


@pytest.mark.parametrize(
    ("text", "line_in_value", "expected"),
    [
        ("t: |\n  first\n    second\n", 2, (3, 5)),
        ("t: >-\n  first\n  second\n", 1, (2, 3)),
        ("t: 'one\n  two'\n", 1, (1, 4)),
        ("t: 'one\n  two'\n", 2, (2, 3)),
        ("t: |\n  only\n", 9, (1, 4)),
    ],
)
def test_scalar_line_maps_a_line_inside_a_value(text: str, line_in_value: int, expected: tuple[int, int]) -> None:
    """A line inside a string value maps to the file: block scalars start below their indicator."""
    locator = _located(text)
    assert locator.scalar_line("/t", line_in_value) == expected


@pytest.mark.parametrize(
    ("text", "index", "expected"),
    [
        ("a\nb", 2, (2, 1)),
        ("a\r\nb", 3, (2, 1)),
        ("a\r\nb", 2, (2, 1)),
        ("a\rb\x85c\u2028d\u2029e", 8, (5, 1)),
        ("a\rb\x85c\u2028d\u2029e", 9, (5, 2)),
        ("ab", 5, (1, 6)),
        ("", 0, (1, 1)),
    ],
)
def test_position_of_counts_lines_as_yaml_does(text: str, index: int, expected: tuple[int, int]) -> None:
    """CRLF is one break; CR, LF, NEL, U+2028 and U+2029 each end a line; a CR before the index ends one too."""
    assert _yaml.position_of(text, index) == expected
